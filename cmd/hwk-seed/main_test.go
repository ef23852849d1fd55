package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/pkg/sshkey"
)

func writeSeed(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	key, err := sshkey.New("test")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"hostname":        "hwk-win-1\n",
		"network":         "ADDRESS=172.31.250.11/24\nGATEWAY=172.31.250.1\nDNS=172.31.250.1\n",
		"authorized_keys": key.Public + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPrint(t *testing.T) {
	dir := writeSeed(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"--seed", dir, "--print"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "-IPAddress '172.31.250.11' -PrefixLength 24") || !strings.Contains(out.String(), "$seed = '"+dir+"'") {
		t.Errorf("printed:\n%s", out.String())
	}
	if strings.Contains(out.String(), "ssh_host_ed25519_key") {
		t.Error("a seed without a host key got host key steps")
	}
}

func TestErrors(t *testing.T) {
	bad := writeSeed(t)
	if err := os.WriteFile(filepath.Join(bad, "hostname"), []byte("a-name-far-too-long-for-windows\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"bad seed":     {[]string{"--seed", bad, "--print"}, "at most 15"},
		"missing seed": {[]string{"--seed", filepath.Join(bad, "nope"), "--print"}, "no such file"},
		"bad flag":     {[]string{"--nope"}, "flag provided but not defined"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(c.args, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want %q", code, errOut.String(), c.want)
			}
		})
	}
	if runtime.GOOS != "windows" {
		var out, errOut bytes.Buffer
		if code := run(nil, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no --seed directory given") {
			t.Errorf("no seed on %s: exit %d %q", runtime.GOOS, code, errOut.String())
		}
		if code := run([]string{"--seed", writeSeed(t)}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "only on Windows") {
			t.Errorf("applying on %s: exit %d %q", runtime.GOOS, code, errOut.String())
		}
	}
}
