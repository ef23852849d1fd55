package hyperv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
)

// The fuzz targets here read what PowerShell gives hwk: the session's
// framed replies, the JSON in them as the driver decodes it, and the
// metadata in a VM's Notes. Their seeds are the real-format replies of
// testdata/replies and the shapes TestSessionProtocol sends; under `go
// test` they run on the seeds alone.

// frame returns result as the session writes it: the result line, then the
// end marker, lines ended as Windows ends them.
func frame(result string) string {
	return resultMarker + result + "\r\n" + endMarker + "\r\n"
}

// fuzzReplies returns every reply of testdata/replies, by key, in key order.
func fuzzReplies(f *testing.F) ([]string, jsonReplies) {
	all, err := replies()
	if err != nil {
		f.Fatal(err)
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, all
}

// FuzzReadReply checks that readReply on any output either fails or
// returns the reply framed there, read the same from the output up to its
// end marker alone, never without that marker, and framing again to
// itself; that stray lines come out as they went in; and that a line's
// length does not depend on the reader's buffer.
func FuzzReadReply(f *testing.F) {
	keys, all := fuzzReplies(f)
	for _, k := range keys {
		f.Add([]byte(frame(`{"ok":true,"out":` + string(all[k]) + `}`)))
	}
	// The session protocol's shapes (scripts_test.go): stray warnings, an
	// error record, a leading byte order mark, a process that dies mid
	// reply (the fake powershell.exe's crash), an empty output.
	f.Add([]byte("WARNING: a cmdlet said something\r\n" + frame(`{"ok":true,"out":{"name":"x","state":"Running","ips":["172.31.250.10"]}}`)))
	f.Add([]byte(frame(`{"ok":false,"error":{"message":"Hyper-V was unable to find a virtual machine with name \"missing\".","id":"InvalidParameter,Microsoft.HyperV.PowerShell.Commands.GetVM","category":"ObjectNotFound","exception":"Microsoft.HyperV.PowerShell.VirtualizationException"}}`)))
	f.Add([]byte("\ufeff" + frame(`{"ok":true,"out":"Running"}`)))
	f.Add([]byte(frame(`{"ok":true,"out":null}`) + frame(`{"ok":true,"out":1}`)))
	f.Add([]byte("half a line\r\n<<hwk-result>>{\"ok\":tr"))
	f.Add([]byte(endMarker + "\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		src := bytes.NewReader(data)
		// The smallest buffer bufio allows: lines longer than it read whole.
		r := bufio.NewReaderSize(src, 16)
		var stray bytes.Buffer
		rep, err := readReply(r, &stray)
		consumed := len(data) - src.Len() - r.Buffered()

		var stray2 bytes.Buffer
		rep2, err2 := readReply(bufio.NewReaderSize(bytes.NewReader(data), 1<<16), &stray2)
		if !sameReply(rep, rep2) || errString(err) != errString(err2) || stray.String() != stray2.String() {
			t.Fatalf("a 16-byte buffer read %+v %v, a 64 KiB one %+v %v", rep, err, rep2, err2)
		}

		if stray.Len() > consumed+1 {
			t.Errorf("%d bytes of stray output from %d bytes read", stray.Len(), consumed)
		}
		for _, line := range strings.Split(strings.TrimSuffix(stray.String(), "\n"), "\n") {
			if line == endMarker || strings.HasPrefix(line, resultMarker) {
				t.Errorf("a marker went to the stray output: %q", line)
			}
		}
		if err != nil {
			if rep != nil {
				t.Errorf("a reply and an error: %+v %v", rep, err)
			}
			// The message quotes at most 200 characters of the reply.
			if len(err.Error()) > 1200 {
				t.Errorf("a %d-byte error", len(err.Error()))
			}
			return
		}

		read := data[:consumed]
		body := strings.TrimRight(string(read), "\r\n")
		lastNL := strings.LastIndexByte(body, '\n')
		if last := strings.TrimPrefix(body[lastNL+1:], "\ufeff"); last != endMarker {
			t.Fatalf("a reply whose last line read is %q, not the end marker", last)
		}
		if again, err := readReply(bufio.NewReader(bytes.NewReader(read)), new(bytes.Buffer)); err != nil || !sameReply(again, rep) {
			t.Errorf("the output up to the end marker read as %+v %v, the whole as %+v", again, err, rep)
		}
		if cut, err := readReply(bufio.NewReader(bytes.NewReader(read[:lastNL+1])), new(bytes.Buffer)); err == nil {
			t.Errorf("the output without its end marker read as a reply: %+v", cut)
		}

		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		back, err := readReply(bufio.NewReader(strings.NewReader(frame(string(b)))), new(bytes.Buffer))
		if err != nil || !sameReply(back, rep) {
			t.Errorf("reply %s framed again read as %+v %v", b, back, err)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// sameReply reports whether a and b are the same reply: their outputs
// the same JSON value (no out and null alike, as decode takes them).
func sameReply(a, b *reply) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.OK == b.OK && reflect.DeepEqual(a.Error, b.Error) && sameJSON(a.Out, b.Out)
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if len(a) > 0 && json.Unmarshal(a, &x) != nil || len(b) > 0 && json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// FuzzReplyDecode checks a reply's output decoded into each type the
// driver decodes into: a whole output of one object reads as a list of it,
// as PowerShell unrolls a list of one; an array reads as its elements;
// what decodes encodes and decodes back the same; a VM is hwk's only with
// metadata of a cluster in its Notes.
func FuzzReplyDecode(f *testing.F) {
	keys, all := fuzzReplies(f)
	for _, k := range keys {
		f.Add([]byte(all[k]))
	}
	f.Add([]byte("null"))
	f.Add([]byte(`"not a list"`))
	f.Fuzz(func(t *testing.T, out []byte) {
		rep, err := readReply(bufio.NewReader(strings.NewReader(frame(`{"ok":true,"out":`+string(out)+`}`))), new(bytes.Buffer))
		if err != nil {
			return
		}
		var vs list[vmInfo]
		if err := rep.decode(&vs); err == nil {
			if len(vs) > len(out) {
				t.Errorf("%d VMs from %d bytes", len(vs), len(out))
			}
			switch trimmed := bytes.TrimSpace(rep.Out); trimmed[0] {
			case '{':
				var one []vmInfo
				if err := json.Unmarshal([]byte("["+string(trimmed)+"]"), &one); err != nil || !reflect.DeepEqual([]vmInfo(vs), one) {
					t.Errorf("one VM read as %+v, in an array as %+v %v", vs, one, err)
				}
			case '[':
				var many []vmInfo
				if err := json.Unmarshal(trimmed, &many); err != nil || !reflect.DeepEqual([]vmInfo(vs), many) {
					t.Errorf("an array of VMs read as %+v, as a plain slice as %+v %v", vs, many, err)
				}
			case 'n':
				if vs != nil {
					t.Errorf("null read as %+v", vs)
				}
			}
			for _, v := range vs {
				m := v.machine()
				meta := parseNotes(v.Notes)
				if (m.State == drivers.StateMissing) != (meta == nil) || meta != nil && (m.Cluster != meta.Cluster || m.Cluster == "" || m.Name != v.Name) {
					t.Errorf("VM %+v as a machine: %+v (notes %+v)", v, m, meta)
				}
			}
			roundTrip(t, vs)
		}
		var one *vmInfo
		if err := rep.decode(&one); err == nil && one != nil {
			if len(vs) != 1 || !reflect.DeepEqual(vs[0], *one) {
				t.Errorf("inspect read %+v, list %+v", *one, vs)
			}
			roundTrip(t, one)
		}
		var nf netFacts
		if rep.decode(&nf) == nil {
			roundTrip(t, nf)
		}
		var hf hostFacts
		if rep.decode(&hf) == nil {
			roundTrip(t, hf)
		}
		var state string
		if rep.decode(&state) == nil {
			roundTrip(t, state)
		}
	})
}

// roundTrip checks that v encodes and decodes back to itself.
func roundTrip[T any](t *testing.T, v T) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var back T
	if err := (&reply{OK: true, Out: b}).decode(&back); err != nil || !reflect.DeepEqual(back, v) {
		t.Errorf("%+v encoded as %s read back as %+v %v", v, b, back, err)
	}
}

// FuzzParseNotes checks that Notes that parseNotes takes for hwk's hold a
// cluster, and that the notes hwk would write of what it read are one line
// that reads back the same.
func FuzzParseNotes(f *testing.F) {
	keys, all := fuzzReplies(f)
	for _, k := range keys {
		var vs list[vmInfo]
		if json.Unmarshal(all[k], &vs) == nil {
			for _, v := range vs {
				f.Add(v.Notes)
			}
		}
		var facts struct {
			VM string `json:"vm"`
		}
		if json.Unmarshal(all[k], &facts) == nil && facts.VM != "" {
			f.Add(facts.VM)
		}
	}
	f.Add(metadata{Cluster: "demo", Name: "demo-cp", Role: "control-plane", OS: "linux", IP: "172.31.250.10", Partial: true}.notes())
	f.Add("my own VM")
	f.Fuzz(func(t *testing.T, notes string) {
		m := parseNotes(notes)
		if m == nil {
			return
		}
		if !strings.HasPrefix(notes, notesPrefix) || m.Cluster == "" {
			t.Errorf("%q read as hwk's: %+v", notes, m)
		}
		again := m.notes()
		if strings.ContainsAny(again, "\r\n") {
			t.Errorf("notes of %+v are not one line: %q", m, again)
		}
		if back := parseNotes(again); back == nil || *back != *m {
			t.Errorf("%+v written as %q read back as %+v", m, again, back)
		}
	})
}
