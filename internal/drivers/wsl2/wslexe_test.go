package wsl2

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/hwk-dev/hwk/internal/testing/wsltest"
)

func utf16le(s string) []byte {
	var b []byte
	for _, c := range utf16.Encode([]rune(s)) {
		b = append(b, byte(c), byte(c>>8))
	}
	return b
}

// TestDecode checks that wsl.exe's UTF-16LE (no BOM, as it writes it; with
// one, as some fixtures have it), its UTF-8 under WSL_UTF8=1, and the
// inbox wsl.exe's CRCRLF all read as the same text.
func TestDecode(t *testing.T) {
	want := "Ubuntu\nhwk-demo-cp\n"
	for name, in := range map[string][]byte{
		"utf-16le":     utf16le("Ubuntu\r\nhwk-demo-cp\r\n"),
		"utf-16le BOM": append([]byte{0xff, 0xfe}, utf16le("Ubuntu\r\nhwk-demo-cp\r\n")...),
		"utf-8":        []byte("Ubuntu\r\nhwk-demo-cp\r\n"),
		"inbox CRCRLF": utf16le("Ubuntu\r\r\nhwk-demo-cp\r\r\n"),
	} {
		if got := decode(in); got != want {
			t.Errorf("%s: %q", name, got)
		}
	}
	if got := decode(utf16le("déjà\u00a0: x\r\n")); got != "déjà\u00a0: x\n" {
		t.Errorf("non-ASCII: %q", got)
	}
}

// TestManageThroughFake checks the real spawning path to a fake wsl.exe on
// PATH answering in wsl.exe's formats: WSL's version and Windows' build
// from --version in English and German, an inbox wsl.exe that has none,
// names from --list --quiet, errors in German and French read to their
// codes, and a Linux command's output and exit status passed through.
func TestManageThroughFake(t *testing.T) {
	dir, tar := t.TempDir(), filepath.Join(t.TempDir(), "rootfs.tar")
	fake := wsltest.New(t, "manage.txt", map[string]string{"DIR": dir, "TAR": tar})
	ctx := context.Background()
	r := CLI{}
	for _, want := range []hostFacts{
		{version: "2.5.7.0", major: 2, windowsBuild: 26100},
		{version: "2.5.7.0", major: 2, windowsBuild: 26100},
		{inbox: true},
		{version: "1.2.5.0", major: 1, windowsBuild: 19045},
	} {
		var f hostFacts
		if err := versions(ctx, r, &f); err != nil || f.version != want.version || f.major != want.major || f.inbox != want.inbox || f.windowsBuild != want.windowsBuild {
			t.Errorf("--version: %+v %v, want %+v", f, err, want)
		}
	}
	if names, err := distributions(ctx, r, false); err != nil || strings.Join(names, ",") != "Ubuntu,hwk-demo-cp,docker-desktop" {
		t.Errorf("--list --quiet: %q %v", names, err)
	}
	if names, err := distributions(ctx, r, true); err != nil || len(names) != 0 {
		t.Errorf("--list --running --quiet: %q %v", names, err)
	}
	_, err := manage(ctx, r, "--terminate", "nosuch")
	if !isCode(err, "WSL_E_DISTRO_NOT_FOUND") || !strings.Contains(err.Error(), "Es ist keine Distribution mit dem angegebenen Namen vorhanden. (Wsl/Service/WSL_E_DISTRO_NOT_FOUND)") {
		t.Errorf("German: %v", err)
	}
	if _, err := manage(ctx, r, "--unregister", "nosuch"); !isCode(err, "WSL_E_DISTRO_NOT_FOUND") {
		t.Errorf("English: %v", err)
	}
	if out, err := manage(ctx, r, "--import", "hwk-demo-cp", dir, tar, "--version", "2"); err != nil || out != "The operation completed successfully. \n" {
		t.Errorf("import: %q %v", out, err)
	}
	if _, err := manage(ctx, r, "--import", "hwk-demo-cp", dir, tar, "--version", "2"); !isCode(err, "ERROR_ALREADY_EXISTS") || !strings.Contains(err.Error(), "existe déjà") {
		t.Errorf("French: %v", err)
	}
	_, err = manage(ctx, r, "--import", "hwk-other", dir, tar, "--version", "2")
	if !isCode(err, "HCS_E_HYPERV_NOT_INSTALLED") || !strings.Contains(err.Error(), `Enable "Virtual Machine Platform" by running: wsl.exe --install --no-distribution`) {
		t.Errorf("Virtual Machine Platform off: %v", err)
	}
	var stdout, stderr bytes.Buffer
	exit, err := r.Run(ctx, nil, &stdout, &stderr, "-d", "hwk-demo-cp", "-u", "root", "-e", "sh", "-c", "echo out; echo err >&2; exit 3")
	if err != nil || exit != 3 || stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Errorf("a Linux command: exit %d %v, stdout %q, stderr %q", exit, err, stdout.String(), stderr.String())
	}
	fake.Check(t)
}

// TestAfterBinary checks that a failed export's message, which follows
// the part of the tar it wrote, is found, and that a message alone,
// UTF-16 or not, is kept whole.
func TestAfterBinary(t *testing.T) {
	msg := "Error code: Wsl/Service/E_FAIL\r\n"
	tarPart := append([]byte("etc/hostname\x00\x00\x000000644\x00"), make([]byte, 40)...)
	if got := string(afterBinary(append(tarPart, msg...))); got != msg {
		t.Errorf("after a tar: %q", got)
	}
	if got := string(afterBinary([]byte(msg))); got != msg {
		t.Errorf("UTF-8 alone: %q", got)
	}
	utf16 := []byte{'E', 0, 'r', 0, 'r', 0}
	if got := afterBinary(utf16); !bytes.Equal(got, utf16) {
		t.Errorf("UTF-16 alone: %q", got)
	}
}
