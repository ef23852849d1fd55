package virtualbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
	"github.com/hwk-dev/hwk/internal/testing/vboxtest"
)

// The fuzz targets here read what VBoxManage gives hwk: showvminfo's
// machine-readable pairs, the lists and reports of records, its version,
// its error lines, the metadata hwk keeps in a VM's description, and the
// header of a node image's VDI. Their seeds are the real-format replies
// of testdata/replies; under `go test` they run on the seeds alone.

// seedReplies adds the standard output (or, with stderr, the standard
// error) of every reply of testdata/replies whose key starts with prefix.
func seedReplies(f *testing.F, prefix string, stderr bool) {
	f.Helper()
	for _, r := range fakeprog.Seeds(f, "testdata/replies", prefix) {
		if stderr {
			f.Add(r.Stderr)
		} else {
			f.Add(r.Stdout)
		}
	}
}

// quoteMR returns s quoted as outputMachineReadableString quotes a value: in
// double quotes, with only " and \ escaped.
func quoteMR(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// FuzzMachineReadable checks that the pairs read from showvminfo's output
// have keys of one line, are no more than its lines, and, written back as
// VBoxManage writes them, read back the same.
func FuzzMachineReadable(f *testing.F) {
	seedReplies(f, "vminfo/", false)
	f.Add("name=\"dev1\"\r\nEncryption:     disabled\r\nVMState=\"poweroff\"\r\n")
	f.Add("description=\"two\nlines\" trailing\nname=\"x\"\n\"SATA-0-0\"=\"none\"\n")
	f.Fuzz(func(t *testing.T, out string) {
		kv := machineReadable(out)
		if len(kv) > strings.Count(out, "\n")+1 {
			t.Errorf("%d pairs from %d lines", len(kv), strings.Count(out, "\n")+1)
		}
		var b strings.Builder
		want := map[string]string{}
		for k, v := range kv {
			if strings.Contains(k, "\n") {
				t.Errorf("key %q holds a line end", k)
			}
			// A lone CR is kept as it is, and one before a line end
			// makes CRLF, which reads as LF: VBoxManage writes neither
			// in a key or value of its own.
			if strings.Contains(k+v, "\r") {
				continue
			}
			want[k] = v
			if strings.HasPrefix(k, `"`) || strings.Contains(k, "=") {
				b.WriteString(quoteMR(k))
			} else {
				b.WriteString(k)
			}
			b.WriteString("=" + quoteMR(v) + "\n")
		}
		if back := machineReadable(b.String()); !reflect.DeepEqual(back, want) {
			t.Errorf("%q written as %q read back as %q", want, b.String(), back)
		}
	})
}

// TestMachineReadableLongValue checks that a description of many lines
// reads in time proportional to its length.
func TestMachineReadableLongValue(t *testing.T) {
	// Why: read by joining its lines one at a time, 16000 lines took over
	// a minute.
	desc := strings.Repeat("a line of a long description\n", 50000)
	for _, out := range []string{
		"description=" + quoteMR(desc) + "\nname=\"x\"\n",
		"description=\"" + desc + "name=\"x\"\n", // left open: x's quote closes it, with x" after
		"description=\"" + desc,                  // left open to the end
	} {
		start := time.Now()
		kv := machineReadable(out)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%d bytes took %s", len(out), d)
		}
		if strings.HasSuffix(out, "name=\"x\"\n") && kv["name"] != "x" {
			t.Errorf("the pair after the description: %q", kv["name"])
		}
	}
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F-]{36}$`)

// FuzzVMList checks that `list vms` entries are one per line at most, with
// a UUID of UUID's form and a name of one line, and listed again read back
// the same.
func FuzzVMList(f *testing.F) {
	seedReplies(f, "vms/", false)
	f.Fuzz(func(t *testing.T, out string) {
		vms := listVMs(out)
		if len(vms) > strings.Count(out, "\n")+1 {
			t.Errorf("%d VMs from %d lines", len(vms), strings.Count(out, "\n")+1)
		}
		var b strings.Builder
		for _, v := range vms {
			if strings.Contains(v.Name, "\n") || !uuidRE.MatchString(v.UUID) || v.Name == "<inaccessible>" {
				t.Errorf("entry %+v", v)
			}
			fmt.Fprintf(&b, "\"%s\" {%s}\r\n", v.Name, v.UUID)
		}
		if back := listVMs(b.String()); !slices.Equal(back, vms) {
			t.Errorf("%+v listed as %q read back as %+v", vms, b.String(), back)
		}
	})
}

// writeBlocks returns bs in the "Field: value" form blocks reads: each field
// followed by its indented lines, then the headings of the others, a
// blank line after each record.
func writeBlocks(bs []block) string {
	var b strings.Builder
	for _, bl := range bs {
		keys := slices.Sorted(maps.Keys(bl.Fields))
		extra := func(k string) {
			for _, l := range bl.Extra[k] {
				b.WriteString("        " + l + "\n")
			}
		}
		for _, k := range keys {
			b.WriteString(k + ": " + bl.Fields[k] + "\n")
			extra(k)
		}
		for k := range bl.Extra {
			if _, ok := bl.Fields[k]; !ok {
				b.WriteString(k + "\n")
				extra(k)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// FuzzBlocks checks that records of `natnetwork list`, `list hdds` and
// `list hostinfo` hold trimmed fields of one line, are no more than the
// output's lines, and written back read back the same; and that a medium's
// capacity is never negative, and is the MBytes its record gives.
func FuzzBlocks(f *testing.F) {
	seedReplies(f, "natnetwork/", false)
	seedReplies(f, "media/", false)
	seedReplies(f, "hostinfo/", false)
	f.Fuzz(func(t *testing.T, out string) {
		bs := blocks(out)
		lines := strings.Count(out, "\n") + 1
		if len(bs) > lines {
			t.Errorf("%d records from %d lines", len(bs), lines)
		}
		oneLine := func(s string) bool {
			return !strings.ContainsAny(s, "\n") && s == strings.TrimSpace(s)
		}
		for _, b := range bs {
			if len(b.Fields) == 0 {
				t.Errorf("a record without fields: %+v", b)
			}
			for k, v := range b.Fields {
				if !oneLine(k) || !oneLine(v) || strings.Contains(k, ":") {
					t.Errorf("field %q: %q", k, v)
				}
			}
			for k, ls := range b.Extra {
				for _, l := range ls {
					if !oneLine(k) || !oneLine(l) || l == "" {
						t.Errorf("line %q under %q", l, k)
					}
				}
			}
			m := mediumFrom(b)
			if m.Capacity < 0 || m.Capacity%(1<<20) != 0 {
				t.Errorf("capacity %d from %q", m.Capacity, b.Fields["Capacity"])
			}
			if c, ok := strings.CutSuffix(b.Fields["Capacity"], " MBytes"); ok {
				if mib, err := strconv.ParseInt(c, 10, 64); err == nil && mib >= 0 && mib <= math.MaxInt64>>20 && m.Capacity != mib<<20 {
					t.Errorf("capacity %d from %q", m.Capacity, b.Fields["Capacity"])
				}
			}
		}
		if back := blocks(writeBlocks(bs)); !reflect.DeepEqual(back, bs) {
			t.Errorf("%+v written as %q read back as %+v", bs, writeBlocks(bs), back)
		}
	})
}

// FuzzVBoxVersion checks that a version read is the numbers its output
// prints, and prints back as them.
func FuzzVBoxVersion(f *testing.F) {
	seedReplies(f, "version/", false)
	f.Add("7.0.16_Ubuntur162802\n")
	f.Add("7.1.0_BETA1r163000\n")
	f.Add("VBoxManage: error: ...")
	f.Fuzz(func(t *testing.T, out string) {
		v, ok := parseVersion(out)
		if !ok {
			return
		}
		if v.Major < 0 || v.Minor < 0 || v.Patch < 0 {
			t.Errorf("%q read as %v", out, v)
		}
		m := versionRE.FindStringSubmatch(out)
		trim := func(s string) string {
			if s = strings.TrimLeft(s, "0"); s == "" {
				return "0"
			}
			return s
		}
		if printed := trim(m[1]) + "." + trim(m[2]) + "." + trim(m[3]); v.String() != printed {
			t.Errorf("%q read as %v, not %s", out, v, printed)
		}
		if back, ok := parseVersion(v.String() + "r1\n"); !ok || back != v {
			t.Errorf("%v read back as %v %v", v, back, ok)
		}
	})
}

// FuzzForwardRule checks that a NAT Network's forwarding rule read is IPv4
// to a name without colons, and written as hwk writes one reads back the
// same.
func FuzzForwardRule(f *testing.F) {
	f.Add("demo-cp-22:tcp:[127.0.0.1]:41022:[172.31.250.10]:22")
	f.Add("        demo-cp-6443:tcp:[]:46443:[172.31.250.10]:6443")
	f.Add("127.0.0.1=2")
	f.Fuzz(func(t *testing.T, s string) {
		r, ok := parseRule(s)
		if !ok {
			return
		}
		if r.Name == "" || strings.Contains(r.Name, ":") || !r.Guest.Addr().Is4() {
			t.Errorf("%q read as %+v", s, r)
		}
		if back, ok := parseRule(r.String()); !ok || back != r {
			t.Errorf("%+v written as %q read back as %+v %v", r, r.String(), back, ok)
		}
	})
}

// FuzzDescription checks that a description read as hwk's names its
// cluster, node and address, and that the description hwk would write of
// it reads back the same.
func FuzzDescription(f *testing.F) {
	all, err := fakeprog.LoadReplies("testdata/replies")
	if err != nil {
		f.Fatal(err)
	}
	for _, k := range slices.Sorted(maps.Keys(all)) {
		if d := machineReadable(all[k].Stdout)["description"]; d != "" {
			f.Add(d)
		}
	}
	f.Add(metadata{Cluster: "c", Name: "c-cp", Role: "control-plane", OS: "linux", IP: netip.MustParseAddr("127.0.0.1"), Base: "b", Ports: map[uint16]uint16{6443: 2, 22: 1}, Partial: true}.String())
	f.Fuzz(func(t *testing.T, s string) {
		m := parseDescription(s)
		if m == nil {
			return
		}
		if m.Cluster == "" || m.Name == "" || !m.IP.IsValid() {
			t.Errorf("%q read as %+v", s, m)
		}
		if len(m.Ports) > len(s) {
			t.Errorf("%d ports from %d bytes", len(m.Ports), len(s))
		}
		// Written as hwk writes it, and shown by showvminfo.
		w := m.String()
		d := machineReadable("name=\"x\"\ndescription=" + quoteMR(w) + "\nmemory=4096\n")["description"]
		if back := parseDescription(d); d != w || back == nil || !reflect.DeepEqual(*back, *m) {
			t.Errorf("%+v written as %q read back as %+v", m, d, back)
		}
	})
}

var codeRE = regexp.MustCompile(`^[A-Z0-9_]+$`)

// FuzzVBoxError checks VBoxManage's stderr read as an Error: each message
// is a non-empty line of it, the code a result code's name, the end of the
// output kept when there is no message, no longer than its bound and still
// UTF-8 when the output is; and no error from a call that succeeded
// without printing an error line.
func FuzzVBoxError(f *testing.F) {
	seedReplies(f, "errors/", true)
	seedReplies(f, "commands/", true)
	// A code and no message, before more than the 400 bytes kept of the
	// output, in three-byte characters.
	f.Add("VBoxManage: error: Details: code E_ACCESSDENIED (0x80070005), component SessionMachine, interface IMachine\n" + strings.Repeat("ディスクが見つかりません。", 20) + "\n")
	f.Fuzz(func(t *testing.T, stderr string) {
		args := []string{"showvminfo", "demo-cp"}
		e := parseError(args, stderr, nil)
		if e == nil {
			// Only context lines and rules, if any error lines at all.
			for _, l := range strings.Split(stderr, "\n") {
				m := errLineRE.FindStringSubmatch(strings.TrimRight(l, "\r"))
				if m == nil {
					continue
				}
				if rest := strings.TrimSpace(m[1]); !strings.HasPrefix(rest, "Context: ") && strings.Trim(rest, "-") != "" {
					t.Errorf("error line %q read as no error", l)
				}
			}
			return
		}
		if len(e.Messages) == 0 && e.Code == "" {
			t.Errorf("an error of nothing: %+v", e)
		}
		for _, m := range e.Messages {
			// One line; a lone CR inside one is no line end (the seed
			// "VBoxManage: error: 0\r0" is one message).
			if m == "" || strings.Contains(m, "\n") || m != strings.TrimSpace(m) {
				t.Errorf("message %q", m)
			}
		}
		if e.Code != "" && !codeRE.MatchString(e.Code) {
			t.Errorf("code %q", e.Code)
		}
		if len(e.Stderr) > 403 || utf8.ValidString(stderr) && !utf8.ValidString(e.Stderr) {
			t.Errorf("the end of stderr kept: %q", e.Stderr)
		}
		msg := e.Error()
		for _, m := range e.Messages {
			if !strings.Contains(msg, m) {
				t.Errorf("%q does not say %q", msg, m)
			}
		}
		_, _ = e.busy(), IsNotFound(e)
		if notRun := parseError(args, stderr, errors.New("exec: no such file")); notRun == nil || notRun.Exit != -1 {
			t.Errorf("a call that did not run: %+v", notRun)
		}
	})
}

// FuzzVDIHeader checks that a VDI header read has a UUID of UUID's form
// and a size that is no negative number, and that a header of each UUID
// and size hwk's tests write reads back as them.
func FuzzVDIHeader(f *testing.F) {
	// readVDI reads a file: each input is written to one in the worker's
	// temporary directory, written over at the next. On a busy disk each
	// write takes milliseconds; fuzz with TMPDIR on a tmpfs (/dev/shm).
	dir := f.TempDir()
	for i, h := range []struct {
		uuid string
		size int64
	}{{linuxUUID, 20 << 30}, {windowsUUID, 64 << 30}, {linuxUUID, -1}} { // -1: a size of 2^64-1 bytes, refused
		p := filepath.Join(dir, fmt.Sprint(i))
		vboxtest.WriteVDI(f, p, h.uuid, h.size)
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("<<< Oracle VM VirtualBox Disk Image >>>\n"))
	p, again := filepath.Join(dir, "disk.vdi"), filepath.Join(dir, "again.vdi")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := readVDI(p)
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("the error does not name the file: %v", err)
			}
			return
		}
		if len(data) < vdiUUIDOffset+16 || binary.LittleEndian.Uint32(data[vdiSigOffset:]) != vdiSignature {
			t.Errorf("%d bytes without a VDI header read as %+v", len(data), h)
		}
		if !uuidRE.MatchString(h.UUID) || h.UUID != strings.ToLower(h.UUID) || h.Size < 0 {
			t.Errorf("header read as %+v", h)
		}
		vboxtest.WriteVDI(t, again, h.UUID, h.Size)
		if back, err := readVDI(again); err != nil || back != h {
			t.Errorf("%+v written again read back as %+v %v", h, back, err)
		}
	})
}
