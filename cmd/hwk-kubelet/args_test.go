package main

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestKubeletArgs(t *testing.T) {
	env := []byte(`KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=npipe:////./pipe/containerd-containerd --node-ip=172.31.250.11 --node-labels=\"a=b,c=d e\""` + "\r\n")
	args, err := kubeletArgs("HWK-WIN-1", env)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(args, " | ")
	for _, want := range []string{
		`--config=C:\var\lib\kubelet\config.yaml`,
		"--hostname-override=hwk-win-1",
		"--cgroups-per-qos=false",
		"--enforce-node-allocatable= |",
		"--container-runtime-endpoint=npipe:////./pipe/containerd-containerd",
		"--node-ip=172.31.250.11",
		"--node-labels=a=b,c=d e",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
	if args[len(args)-1] != "--node-labels=a=b,c=d e" {
		t.Errorf("kubeadm's flags do not come last (they win): %q", args[len(args)-1])
	}
}

func TestParseFlagsEnvErrors(t *testing.T) {
	if _, err := parseFlagsEnv([]byte("OTHER=1\n")); err == nil || !strings.Contains(err.Error(), "has kubeadm join run") {
		t.Errorf("missing line: %v", err)
	}
	if _, err := parseFlagsEnv([]byte(`KUBELET_KUBEADM_ARGS="--a=\"b"` + "\n")); err == nil {
		t.Error("unbalanced quotes parsed")
	}
	args, err := parseFlagsEnv([]byte("KUBELET_KUBEADM_ARGS=\"\"\n"))
	if err != nil || len(args) != 0 {
		t.Errorf("empty args: %v %v", args, err)
	}
}

func TestRotate(t *testing.T) {
	if rotate(maxLogBytes-1) || !rotate(maxLogBytes) {
		t.Error("rotation threshold")
	}
}

func TestPrint(t *testing.T) {
	dir := t.TempDir()
	env := dir + "/kubeadm-flags.env"
	if err := os.WriteFile(env, []byte(`KUBELET_KUBEADM_ARGS="--node-ip=172.31.250.11"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"--print", "--flags-env", env, "--hostname", "Win-1"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), `C:\k\kubelet.exe --cert-dir=`) || !strings.Contains(out.String(), "--hostname-override=win-1") || !strings.HasSuffix(out.String(), "--node-ip=172.31.250.11\n") {
		t.Errorf("printed %q", out.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"--print", "--flags-env", dir + "/none"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "has kubeadm join run") {
		t.Errorf("missing flags file: exit %d %q", code, errOut.String())
	}
	if runtime.GOOS != "windows" {
		if code := run(nil, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "Windows service") {
			t.Errorf("run on %s: exit %d %q", runtime.GOOS, code, errOut.String())
		}
	}
}
