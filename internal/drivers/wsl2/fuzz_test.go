package wsl2

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"
	"unicode/utf8"

	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
)

// The fuzz targets here read what wsl.exe and a WSL distribution give
// hwk: wsl.exe's output in UTF-16LE or UTF-8, its error messages, the
// Windows build in its --version, the user's .wslconfig, and the node
// facts the facts script sends. Their seeds are the real-format replies
// of testdata/replies; under `go test` they run on the seeds alone.

// raw returns what the program writes of s: UTF-16LE or UTF-8.
func raw(r fakeprog.Reply, s string) []byte {
	if r.UTF16 {
		return utf16le(s)
	}
	return []byte(s)
}

// FuzzDecode checks that wsl.exe's output decoded is UTF-8 text with no CR
// before a line end, at most three bytes for each it was; that UTF-8 text
// reads as itself, less its CRs before line ends and a byte order mark;
// and that text with a character of ASCII or Latin-1 (a line end will do)
// reads the same in UTF-16LE, with or without a BOM, as in UTF-8.
func FuzzDecode(f *testing.F) {
	for _, r := range fakeprog.Seeds(f, "testdata/replies", "wsl/") {
		f.Add(raw(r, r.Stdout))
	}
	f.Add(utf16le("Ubuntu\r\r\nhwk-demo-cp\r\r\n"))
	// Found reading decode, not by the fuzzer: a run of CRs longer than
	// CRCRLF, and UTF-8 after a byte order mark.
	f.Add([]byte("Ubuntu\r\r\r\r\nhwk-demo-cp\r\n"))
	f.Add([]byte("\ufeffUbuntu\r\nhwk-demo-cp\r\n"))
	f.Add(append([]byte{0xff, 0xfe}, utf16le("déjà\u00a0: x\r\n")...))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := decode(b)
		if !utf8.ValidString(s) {
			t.Errorf("%q decoded as %q, not UTF-8", b, s)
		}
		if strings.Contains(s, "\r\n") {
			t.Errorf("%q decoded as %q, with CRLF", b, s)
		}
		// At most three bytes of UTF-8 a byte: a replacement for a
		// byte that is no UTF-8, or for half a code unit.
		if len(s) > 3*len(b) {
			t.Errorf("%d bytes decoded as %d", len(b), len(s))
		}
		text := string(b)
		if !utf8.ValidString(text) || strings.Contains(text, "\x00") {
			return
		}
		if crs := func(s string) string { return strings.ReplaceAll(s, "\r", "") }; crs(s) != crs(strings.TrimPrefix(text, "\ufeff")) {
			t.Errorf("UTF-8 %q decoded as %q", text, s)
		}
		if !strings.ContainsFunc(text, func(r rune) bool { return r < 0x100 }) {
			// UTF-16LE of which every byte is non-zero may be valid
			// UTF-8 too ("中" is "-N"); what wsl.exe writes ends in a
			// line end.
			return
		}
		if got := decode(utf16le(text)); got != s {
			t.Errorf("%q in UTF-16LE decoded as %q, in UTF-8 as %q", text, got, s)
		}
		if got := decode(append([]byte{0xff, 0xfe}, utf16le(text)...)); got != s {
			t.Errorf("%q in UTF-16LE with a byte order mark decoded as %q, in UTF-8 as %q", text, got, s)
		}
	})
}

var wholeCodeRE = regexp.MustCompile(`^Wsl(?:/[A-Za-z0-9_]+)+$`)

// FuzzWSLError checks a failed wsl.exe's output read as an Error: the
// message is its lines except the code's, on one line; the code is the
// context's last part; a line that ends in a code gives the error its code.
func FuzzWSLError(f *testing.F) {
	for _, r := range fakeprog.Seeds(f, "testdata/replies", "wsl/") {
		if r.Exit != 0 {
			f.Add(decode(raw(r, r.Stdout))+"\n"+decode(raw(r, r.Stderr)), r.Exit)
		}
	}
	f.Fuzz(func(t *testing.T, out string, exit int) {
		args := []string{"--unregister", "hwk-demo-cp"}
		e := parseError(args, out, exit)
		if e.Exit != exit || strings.Contains(e.Message, "\n") {
			t.Errorf("%q read as %+v", out, e)
		}
		if e.Context != "" {
			if !wholeCodeRE.MatchString(e.Context) || !strings.HasSuffix(e.Context, "/"+e.Code) || !isCode(e, e.Code) {
				t.Errorf("code %q, context %q", e.Code, e.Context)
			}
		}
		coded := false
		for _, l := range strings.Split(out, "\n") {
			l = strings.TrimSpace(l)
			for i := range l {
				if strings.HasPrefix(l[i:], "Wsl/") && wholeCodeRE.MatchString(l[i:]) {
					coded = true
				}
			}
		}
		if coded != (e.Context != "") {
			t.Errorf("%q read as code %q", out, e.Context)
		}
		msg := e.Error()
		if !strings.Contains(msg, e.Message) || !strings.Contains(msg, e.Context) {
			t.Errorf("%q does not say %+v", msg, e)
		}
	})
}

// FuzzWSLConfig checks that .wslconfig's settings have lower-case keys and
// values of one line without a comment in them, that whatever comes before
// does not hide a setting after it, and that the memory limit is never
// negative and is the size it gives, or no limit when that is beyond
// counting.
func FuzzWSLConfig(f *testing.F) {
	f.Add("# Settings apply across all Linux distros running on WSL 2\r\n[wsl2]\r\nmemory=8GB \r\nNetworkingMode = Mirrored ; for hwk\r\nkernelCommandLine = cgroup_no_v1=all\r\n\r\n[experimental]\r\nautoMemoryReclaim=gradual\r\n")
	f.Add("[wsl2]\nmemory=4096MB\n")
	f.Add("[wsl2]\nnetworkingMode=bridged\nvmSwitch=ext\n")
	f.Add("[wsl2]\nlocalhostForwarding=False\n")
	// 2^34+2 GB: 2^64 + 2 GiB bytes, which an int64 wraps to 2 GiB.
	f.Add("[wsl2]\nmemory=17179869186GB\n")
	f.Fuzz(func(t *testing.T, text string) {
		c := parseWSLConfig(text)
		if len(c) > strings.Count(text, "=") {
			t.Errorf("%d settings from %d =", len(c), strings.Count(text, "="))
		}
		for k, v := range c {
			if k != strings.ToLower(k) || strings.ContainsAny(k, "\n") || strings.ContainsAny(v, "\n#;") || !strings.Contains(k, ".") {
				t.Errorf("setting %q = %q", k, v)
			}
		}
		if got := parseWSLConfig(text + "\n[hwk-fuzz]\nprobe = 1\n")["hwk-fuzz.probe"]; got != "1" {
			t.Errorf("a setting after %.200q reads as %q", text, got)
		}
		limit := c.memoryLimit()
		if limit < 0 {
			t.Errorf("memory=%q is a limit of %d", c["wsl2.memory"], limit)
		}
		if m := sizeRE.FindStringSubmatch(c["wsl2.memory"]); m != nil {
			shift := map[string]uint{"": 0, "b": 0, "kb": 10, "mb": 20, "gb": 30, "tb": 40}[strings.ToLower(m[2])]
			n, err := strconv.ParseInt(m[1], 10, 64)
			switch {
			case err == nil && n <= math.MaxInt64>>shift:
				if limit != n<<shift {
					t.Errorf("memory=%q is a limit of %d", c["wsl2.memory"], limit)
				}
			case limit != math.MaxInt64:
				t.Errorf("memory=%q is a limit of %d, not none", c["wsl2.memory"], limit)
			}
		}
		_, _ = c.networkingMode(), c.localhostForwarding()
	})
}

// TestWSLConfigLongLine checks that a line longer than a bufio.Scanner's
// 64 KiB does not hide the settings after it.
func TestWSLConfigLongLine(t *testing.T) {
	// Why not one of FuzzWSLConfig's seeds: the fuzzer spends its time
	// shrinking an input that long.
	c := parseWSLConfig("[wsl2]\nkernelCommandLine = \"" + strings.Repeat("sysctl.vm.swappiness=10 ", 3000) + "\"\nmemory=2GB\n")
	if c.memoryLimit() != 2<<30 || len(c["wsl2.kernelcommandline"]) != 3000*24 {
		t.Errorf("memory=%q, a kernel command line of %d bytes", c["wsl2.memory"], len(c["wsl2.kernelcommandline"]))
	}
}

// FuzzWindowsBuild checks that the build read from --version is the number
// its last line ends with, and 0 when that is no number an int holds.
func FuzzWindowsBuild(f *testing.F) {
	for _, r := range fakeprog.Seeds(f, "testdata/replies", "wsl/version") {
		f.Add(decode(raw(r, r.Stdout)))
	}
	f.Fuzz(func(t *testing.T, out string) {
		b := parseWindowsBuild(out)
		if b < 0 {
			t.Errorf("%q read as build %d", out, b)
		}
		if b == 0 {
			return
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last := strings.TrimSpace(lines[len(lines)-1])
		m := windowsBuildRE.FindStringSubmatch(last)
		if m == nil || strings.TrimLeft(m[1], "0") != strconv.Itoa(b) {
			t.Errorf("build %d from %q", b, last)
		}
	})
}

// sendFacts returns fsys as the facts script sends it: each file decompressed
// if its name ends in .gz, each directory with no names (its entries are
// directories of their own in fsys).
func sendFacts(t *testing.T, fsys fstest.MapFS) []byte {
	var b bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(fsys)) {
		f := fsys[name]
		if f.Mode.IsDir() {
			fmt.Fprintf(&b, "D /%s 0\n\n", name)
			continue
		}
		data := gunzip(t, name, f.Data)
		fmt.Fprintf(&b, "F /%s %d\n%s\n", name, len(data), data)
	}
	return b.Bytes()
}

// gunzip returns data decompressed when name ends in .gz.
func gunzip(t *testing.T, name string, data []byte) []byte {
	if !strings.HasSuffix(name, ".gz") {
		return data
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// FuzzFacts checks the facts script's output read as a file system, or
// refused: its names are valid paths, its files' bytes no more than the
// output's, and sent again it reads back the same.
func FuzzFacts(f *testing.F) {
	for _, r := range fakeprog.Seeds(f, "testdata/replies", "facts/") {
		f.Add([]byte(r.Stdout))
	}
	f.Add([]byte("F /proc/sys/kernel/osrelease 7\n6.6.87\n\nD /sys/module 14\nvxlan\noverlay\n\n"))
	f.Add([]byte("F /lib/modules/6.6.87/modules.builtin.gz 7\nkernel\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys, err := parseFacts(data)
		if err != nil {
			if fsys != nil {
				t.Errorf("a file system and an error: %v", err)
			}
			if len(err.Error()) > 300 {
				t.Errorf("a %d-byte error", len(err.Error()))
			}
			return
		}
		// In the names' order: coverage that changes with a map's order
		// keeps the fuzzer from shrinking what it finds.
		names := slices.Sorted(maps.Keys(fsys))
		sent, spaces := 0, 0
		for _, name := range names {
			if !fs.ValidPath(name) || name == "." {
				t.Errorf("name %q", name)
			}
			if strings.ContainsFunc(name, unicode.IsSpace) {
				spaces++
			}
			if file := fsys[name]; !file.Mode.IsDir() {
				sent += len(gunzip(t, name, file.Data))
			}
		}
		if sent > len(data) {
			t.Errorf("%d bytes of files from %d bytes", sent, len(data))
		}
		if spaces > 0 {
			// A header names a path without spaces; only names a
			// directory lists may hold them.
			return
		}
		again := sendFacts(t, fsys)
		back, err := parseFacts(again)
		if err != nil {
			t.Fatalf("%q sent again: %v", again, err)
		}
		if len(back) != len(fsys) {
			t.Errorf("%d names sent again read back as %d", len(fsys), len(back))
		}
		for _, name := range names {
			file := fsys[name]
			b, ok := back[name]
			if !ok || b.Mode != file.Mode || !bytes.Equal(gunzip(t, name, b.Data), gunzip(t, name, file.Data)) {
				t.Errorf("%s sent again read back as %+v", name, b)
			}
		}
	})
}
