// Package vboxtest puts a fake VBoxManage first on PATH for tests that run
// the VirtualBox driver's real process-spawning code: the driver finds
// and starts it as it would VirtualBox's, and it answers from a
// transcript and the real-format replies in internal/drivers/virtualbox/testdata
// (see internal/testing/fakeprog).
package vboxtest

import (
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
)

// Fake is the fake VBoxManage and its record.
type Fake = fakeprog.Fake

func testdata() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "drivers", "virtualbox", "testdata")
}

// New puts the fake VBoxManage first on PATH for the rest of t, answering
// from testdata/transcripts/TRANSCRIPT with vars for its ${VAR}s.
// VirtualBox's own install-path variables are cleared, so that the driver
// finds the fake.
func New(t testing.TB, transcript string, vars map[string]string) *Fake {
	t.Helper()
	tr, err := fakeprog.ParseFile(filepath.Join(testdata(), "transcripts", transcript))
	if err != nil {
		t.Fatal(err)
	}
	f := fakeprog.New(t, fakeprog.Config{
		Program: "VBoxManage", Transcript: tr, Replies: filepath.Join(testdata(), "replies"), Vars: vars,
		// As VBoxManage fails: an error line on stderr, exit status 1.
		Refusal: fakeprog.Reply{Stderr: "VBoxManage: error: fake VBoxManage: {why}\n", Exit: 1},
		ANSI:    true,
	})
	t.Setenv("VBOX_MSI_INSTALL_PATH", "")
	t.Setenv("VBOX_INSTALL_PATH", "")
	return f
}

// WriteVDI writes a stand-in node image disk: a VDI 1.1 header (the
// layout of src/VBox/Storage/VDICore.h, as qemu-img writes it too) with
// creation UUID uuid and virtual size bytes, and no blocks.
func WriteVDI(t testing.TB, path, uuid string, bytes int64) {
	t.Helper()
	u, err := hex.DecodeString(strings.ReplaceAll(uuid, "-", ""))
	if err != nil || len(u) != 16 {
		t.Fatalf("bad UUID %q", uuid)
	}
	// RTUUID keeps its first three fields little-endian.
	slices.Reverse(u[0:4])
	slices.Reverse(u[4:6])
	slices.Reverse(u[6:8])
	h := make([]byte, 0x200)
	copy(h, "<<< Oracle VM VirtualBox Disk Image >>>\n")
	binary.LittleEndian.PutUint32(h[0x40:], 0xbeda107f)
	binary.LittleEndian.PutUint32(h[0x44:], 0x00010001)
	binary.LittleEndian.PutUint32(h[0x48:], 0x180)
	binary.LittleEndian.PutUint32(h[0x4c:], 1) // dynamic
	binary.LittleEndian.PutUint64(h[0x170:], uint64(bytes))
	binary.LittleEndian.PutUint32(h[0x178:], 1<<20)
	binary.LittleEndian.PutUint32(h[0x180:], uint32(bytes>>20))
	copy(h[0x188:], u)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, h, 0o644); err != nil {
		t.Fatal(err)
	}
}
