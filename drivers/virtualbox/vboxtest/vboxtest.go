// Package vboxtest puts a fake VBoxManage first on PATH for tests that run
// the VirtualBox driver's real process-spawning code: the driver finds
// and starts it as it would VirtualBox's, and it answers from a
// transcript and the real-format replies in drivers/virtualbox/testdata
// (see drivers/virtualbox/internal/vboxscript).
package vboxtest

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers/virtualbox/internal/vboxscript"
)

// Fake is a fake VBoxManage on PATH and its record.
type Fake struct {
	// Dir holds its transcript, state and logs.
	Dir        string
	transcript string
}

func testdata() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "testdata")
}

// program builds the fake into dir.
func program(t testing.TB, dir string) {
	t.Helper()
	name := "VBoxManage"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/hwk-dev/hwk/drivers/virtualbox/internal/fakevboxmanage")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the fake VBoxManage: %v\n%s", err, out)
	}
}

// New puts the fake first on PATH for the rest of t, answering from
// testdata/transcripts/TRANSCRIPT with vars for its ${VAR}s. VirtualBox's
// own install-path variables are cleared, so that the driver finds the
// fake.
func New(t testing.TB, transcript string, vars map[string]string) *Fake {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	program(t, bin)
	data, err := os.ReadFile(filepath.Join(testdata(), "transcripts", transcript))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vboxscript.Parse(transcript, data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "transcript.txt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	v, _ := json.Marshal(vars)
	if err := os.WriteFile(filepath.Join(dir, "vars.json"), v, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("VBOX_MSI_INSTALL_PATH", "")
	t.Setenv("VBOX_INSTALL_PATH", "")
	t.Setenv("HWK_FAKE_VBOX_DIR", dir)
	t.Setenv("HWK_FAKE_VBOX_TRANSCRIPT", transcript)
	t.Setenv("HWK_FAKE_VBOX_REPLIES", filepath.Join(testdata(), "replies"))
	return &Fake{Dir: dir, transcript: transcript}
}

// Calls is the argv of every call so far.
func (f *Fake) Calls() [][]string {
	data, _ := os.ReadFile(filepath.Join(f.Dir, "calls.log"))
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var args []string
		if json.Unmarshal([]byte(line), &args) == nil {
			out = append(out, args)
		}
	}
	return out
}

// Unexpected is what it did not expect, a line per call.
func (f *Fake) Unexpected() string {
	data, _ := os.ReadFile(filepath.Join(f.Dir, "unexpected.log"))
	return string(data)
}

// Unused lists the transcript's exchanges that never answered.
func (f *Fake) Unused() []string {
	data, err := os.ReadFile(filepath.Join(f.Dir, "transcript.txt"))
	if err != nil {
		return []string{err.Error()}
	}
	t, err := vboxscript.Parse(f.transcript, data)
	if err != nil {
		return []string{err.Error()}
	}
	var st vboxscript.State
	if raw, err := os.ReadFile(filepath.Join(f.Dir, "state.json")); err == nil {
		_ = json.Unmarshal(raw, &st)
	}
	return t.Unused(&st)
}

// Check fails t for every call the fake did not expect and every
// exchange of the transcript no call used.
func (f *Fake) Check(t testing.TB) {
	t.Helper()
	if u := f.Unexpected(); u != "" {
		t.Errorf("the fake VBoxManage was called in ways its transcript does not expect:\n%s", u)
	}
	if u := f.Unused(); len(u) > 0 {
		t.Errorf("exchanges of the transcript no call used:\n  %s", strings.Join(u, "\n  "))
	}
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
