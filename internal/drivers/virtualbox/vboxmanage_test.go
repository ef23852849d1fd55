package virtualbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
)

func replies(t *testing.T) fakeprog.Replies {
	t.Helper()
	r, err := fakeprog.LoadReplies("testdata/replies")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMachineReadable checks that showvminfo's output as
// VBoxManageInfo.cpp writes it, quirks and all, gives the values hwk
// reads, and that a description of the user's own, over two lines with
// quotes, reads back whole.
func TestMachineReadable(t *testing.T) {
	r := replies(t)
	kv := machineReadable(strings.ReplaceAll(r["vminfo/demo-cp-running"].Stdout, "{cp-ssh}", "41022"))
	for k, want := range map[string]string{
		"name": "demo-cp", "VMState": "running", "firmware": "EFI", "memory": "4096", "VRDEClients": "=0",
		"hwk-ImageUUID-0-0": "e2a94c17-5b03-4d8e-a6f1-0c7b3d9e2f58", "nat-network1": "hwk-demo",
	} {
		if kv[k] != want {
			t.Errorf("%s = %q, want %q", k, kv[k], want)
		}
	}
	m := parseDescription(kv["description"])
	if m == nil || m.Cluster != "demo" || m.Name != "demo-cp" || m.IP.String() != "172.31.250.10" || m.Ports[22] != 41022 || m.Partial {
		t.Errorf("metadata: %+v", m)
	}
	kv = machineReadable(r["vminfo/demo-cp-not-hwk"].Stdout)
	if d := kv["description"]; d != "my own demo VM\nwith a \"quoted\" second line" || parseDescription(d) != nil {
		t.Errorf("the user's description: %q", d)
	}
	if kv["GuestMemoryBalloon"] != "0" {
		t.Errorf("the line after a two-line description: %q", kv["GuestMemoryBalloon"])
	}
	// 7.0.0-7.0.14 print a line that is not key=value, and Windows ends
	// lines with CRLF.
	kv = machineReadable("name=\"dev1\"\r\nEncryption:     disabled\r\nVMState=\"poweroff\"\r\n")
	if kv["name"] != "dev1" || kv["VMState"] != "poweroff" || len(kv) != 2 {
		t.Errorf("7.0.14 on Windows: %q", kv)
	}
}

// TestMetadataRoundTrip checks that the description hwk writes reads back
// as written.
func TestMetadataRoundTrip(t *testing.T) {
	m := metadata{Cluster: "c", Name: "c-cp", Role: "control-plane", OS: "linux", IP: loopback, Base: "b", Ports: map[uint16]uint16{6443: 2, 22: 1}, Partial: true}
	got := parseDescription(m.String())
	if got == nil || got.String() != m.String() {
		t.Errorf("%q read back as %+v", m.String(), got)
	}
	if !strings.HasSuffix(m.String(), "ports=22:1,6443:2 partial") {
		t.Errorf("ports not sorted: %q", m.String())
	}
}

// TestLists checks the parsing of list vms, natnetwork list and list hdds
// in their formats.
func TestLists(t *testing.T) {
	r := replies(t)
	vms := listVMs(r["vms/cluster"].Stdout)
	if len(vms) != 3 || vms[1].Name != "demo-cp" || vms[1].UUID != "7d0c4a1e-93b5-4f6e-8a27-5c1d0e9f3b42" {
		t.Errorf("list vms: %+v (the inaccessible one is left out)", vms)
	}
	d := &Driver{vbm: fixed(strings.ReplaceAll(strings.ReplaceAll(r["natnetwork/demo-cp-forwards"].Stdout, "{cp-ssh}", "41022"), "{cp-api}", "46443"))}
	nets, err := d.natNetworks(context.Background())
	if err != nil || len(nets) != 2 || nets[1].Name != "hwk-demo" || nets[1].Subnet.String() != "172.31.250.0/24" || nets[1].DHCP || !nets[0].DHCP {
		t.Fatalf("natnetwork list: %+v %v", nets, err)
	}
	if f := nets[1].Forwards; len(f) != 2 || f[1].Name != "demo-cp-6443" || f[1].Host != 46443 || f[1].Guest.String() != "172.31.250.10:6443" {
		t.Errorf("forwards: %+v", f)
	}
	d.vbm = fixed(r["media/hdds-cluster"].Stdout)
	ms, err := d.listMedia(context.Background(), "hdds")
	if err != nil || len(ms) != 5 || ms[2].Parent != linuxUUID || ms[1].Type != "multiattach" || ms[1].Capacity != 20<<30 {
		t.Errorf("list hdds: %+v %v", ms, err)
	}
}

// fixed is a Runner that answers every call with out.
type fixed string

func (f fixed) Run(context.Context, ...string) (string, error) { return string(f), nil }

// TestParseVersion checks parseVersion on Oracle's, a distribution's and a
// prerelease's version, after the Linux wrapper's warning.
func TestParseVersion(t *testing.T) {
	r := replies(t)
	for in, want := range map[string]string{
		"7.1.4r165100\n":                      "7.1.4",
		"7.0.16_Ubuntur162802\n":              "7.0.16",
		"7.1.0_BETA1r163000\n":                "7.1.0",
		r["version/7.0.14-no-vboxdrv"].Stdout: "7.0.14",
	} {
		v, ok := parseVersion(in)
		if !ok || v.String() != want {
			t.Errorf("%q: %v %v", in, v, ok)
		}
	}
	if _, ok := parseVersion("VBoxManage: error: ..."); ok {
		t.Error("a version from an error")
	}
}

// TestParseError checks that errorprint.cpp's lines, on Linux and Windows,
// become an Error with the message and result code, and that the Details
// and Context lines and progress do not make a failure of a call that
// exited 0.
func TestParseError(t *testing.T) {
	r := replies(t)
	stderr := strings.ReplaceAll(r["errors/vm-not-found"].Stderr, "{name}", "demo-cp")
	for _, s := range []string{stderr, strings.ReplaceAll(stderr, "VBoxManage:", "VBoxManage.exe:")} {
		e := parseError([]string{"showvminfo", "demo-cp"}, s, nil)
		if e == nil || e.Code != "VBOX_E_OBJECT_NOT_FOUND" || len(e.Messages) != 1 || !IsNotFound(e) ||
			e.Error() != "VBoxManage showvminfo demo-cp: Could not find a registered machine named 'demo-cp'" {
			t.Errorf("%+v", e)
		}
	}
	if e := parseError([]string{"unregistervm", "x"}, r["commands/progress"].Stderr, nil); e != nil {
		t.Errorf("progress read as an error: %v", e)
	}
	e := parseError([]string{"showvminfo", "x"}, r["errors/not-ready"].Stderr, nil)
	if e == nil || !e.busy() || IsNotFound(e) {
		t.Errorf("not ready: %+v", e)
	}
}

// TestFind checks that Find looks in VirtualBox's install variables first,
// then on PATH, and passes over a directory without VBoxManage.
func TestFind(t *testing.T) {
	dir, empty, onPath := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{dir, onPath} {
		if err := os.WriteFile(filepath.Join(d, exeName()), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"VBOX_MSI_INSTALL_PATH": empty, "VBOX_INSTALL_PATH": dir + string(os.PathListSeparator) + onPath}
	look := func(string) (string, error) { return filepath.Join(onPath, exeName()), nil }
	p, err := Find(func(k string) string { return env[k] }, look, func() string { return "" })
	if err != nil || p != filepath.Join(dir, exeName()) {
		t.Errorf("from VBOX_INSTALL_PATH: %q %v", p, err)
	}
	p, err = Find(func(string) string { return "" }, look, func() string { return "" })
	if err != nil || p != filepath.Join(onPath, exeName()) {
		t.Errorf("from PATH: %q %v", p, err)
	}
	nowhere := func(string) (string, error) { return "", errors.New("not found") }
	if _, err := Find(func(string) string { return "" }, nowhere, func() string { return empty }); !errors.Is(err, errNotFound) && runtime.GOOS != "darwin" {
		t.Errorf("nowhere: %v", err)
	}
}

// TestFakeProgram checks that, through the real spawning path, an argument
// with spaces and quotes reaches VBoxManage as one, an error VBoxManage
// prints while exiting 0 is a failure, a busy machine is asked again, and a
// call the transcript does not expect fails and is recorded.
func TestFakeProgram(t *testing.T) {
	d, fake, _, _ := testDriver(t, "program.txt")
	retryWait = time.Millisecond
	t.Cleanup(func() { retryWait = time.Second })
	ctx := context.Background()
	if _, err := d.run(ctx, "modifyvm", "demo-cp", "--description", `a "quoted" word,  two spaces`); err != nil {
		t.Errorf("quoted argument: %v", err)
	}
	_, err := d.run(ctx, "showvminfo", "demo-cp", "--machinereadable")
	var ve *Error
	if !errors.As(err, &ve) || ve.Exit != 0 || !IsNotFound(err) {
		t.Errorf("an error at exit 0: %#v", err)
	}
	v, err := d.showVM(ctx, "demo-win-1")
	if err != nil || v == nil || v.State != "running" {
		t.Errorf("after two busy answers: %+v %v", v, err)
	}
	_, err = d.run(ctx, "controlvm", "demo-cp", "savestate")
	if !errors.As(err, &ve) || ve.Exit != 1 || !strings.Contains(err.Error(), "no exchange of the transcript expects this call") {
		t.Errorf("an unexpected call: %v", err)
	}
	if u := fake.Unexpected(); !strings.Contains(u, `["controlvm","demo-cp","savestate"]`) {
		t.Errorf("the fake's record: %q", u)
	}
	if u := fake.Unused(); len(u) != 0 {
		t.Errorf("unused: %q", u)
	}
}
