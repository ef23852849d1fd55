package winseed

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hwk-dev/hwk/internal/testing/pssim"
)

// clone returns a model of a clone of hwk's Windows image at its first boot,
// after Setup: sshd installed, the answer file sysprep cached, a disk of
// diskGiB, and the node's seed in drive D: (a CD: read-only files).
func clone(t *testing.T, files fstest.MapFS, diskGiB int64) *pssim.Machine {
	t.Helper()
	m := pssim.NewServer2022()
	m.Services["sshd"] = &pssim.Service{Name: "sshd", Status: "Running", StartType: "Automatic", BinPath: `C:\Program Files\OpenSSH\sshd.exe`}
	m.WriteFile(`C:\Windows\Panther\unattend.xml`, []byte("<unattend>hidden password</unattend>"))
	m.WriteFile(`C:\ProgramData\ssh\sshd_config`, []byte("PasswordAuthentication no\r\n"))
	m.DiskBytes = diskGiB << 30
	seed := map[string][]byte{}
	for name, f := range files {
		seed[name] = f.Data
	}
	m.InsertCD("D", "cidata", seed)
	return m
}

// TestScriptOnWindowsModel runs the seed's script on a model clone: the
// keys it copies from the CD are not left read-only, the answer files are
// gone, C: takes the larger disk, and the rename restarts the machine.
func TestScriptOnWindowsModel(t *testing.T) {
	files := seedFS(t)
	s, err := Read(files)
	if err != nil {
		t.Fatal(err)
	}
	m := clone(t, files, 64)
	before := m.PartitionBytes
	r := m.Run(s.Script(`D:\`), "hwk-seed's script")
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, strings.Join(r.Output, "\n"))
	}
	for _, f := range m.Files() {
		if f.ReadOnly {
			t.Errorf("%s is read-only", f.Path)
		}
	}
	for _, p := range []string{`C:\ProgramData\ssh\administrators_authorized_keys`, `C:\ProgramData\ssh\ssh_host_ed25519_key`, `C:\ProgramData\ssh\ssh_host_ed25519_key.pub`, Marker} {
		if m.File(p) == nil {
			t.Errorf("%s was not written", p)
		}
	}
	if m.File(`C:\Windows\Panther\unattend.xml`) != nil {
		t.Error("the cached answer file is still there")
	}
	if m.PartitionBytes <= before || m.PartitionBytes < 63<<30 {
		t.Errorf("C: is %d bytes on a 64 GiB disk (was %d)", m.PartitionBytes, before)
	}
	if m.Halted != "restart" {
		t.Errorf("the machine %q; want a restart for the rename", m.Halted)
	}

	// The next boot finds the seed applied and changes nothing.
	m.Boot()
	r = m.Run(s.Script(`D:\`), "hwk-seed's script")
	if r.Err != nil || m.Halted != "" || !strings.Contains(strings.Join(r.Output, "\n"), "is applied already") {
		t.Errorf("second run: %+v, halted %q", r, m.Halted)
	}
}
