package config

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf16"

	"go.yaml.in/yaml/v3"
)

// FuzzDecode runs a config file's bytes through what 'hwk create cluster
// --config' does with them: Decode, SetDefaults, Validate; and a config
// that passes through the round trip TestRoundTrip checks.
func FuzzDecode(f *testing.F) {
	full, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	for _, s := range []string{
		"",
		header,
		header + "kubernetesVersion: 1.36.0\nnodes:\n- role: control-plane\n- os: windows\n  windowsVersion: \"2025\"\n- name: lin-a\n  cpus: 3\n  memory: 3Gi\n",
		header + "networking:\n  nodeSubnet: 172.31.7.0/24\n  podSubnet: 10.244.0.0/16\n  serviceSubnet: 10.96.0.0/12\n  apiServerPort: 6443\ncalico:\n  vxlanVNI: 4096\n  vxlanPort: 4789\nimages:\n  registry: 127.0.0.1:5000/hwk\n",
		header + "nodes:\n- &cp {role: control-plane, driver: libvirt, ip: 172.31.250.10}\n- {os: windows, driver: libvirt, image: registry.example.com/hwk/node:v1.35.4}\n",
		header + "nodes: [{role: control-plane, driver: wsl2}, {os: windows, driver: hyperv}]\n",
		header + "nmae: x\nnodes:\n- role: control-plane\n  memroy: 4Gi\n  cpus: two\n",
		header + "name: again\n",
		header + "---\n" + header,
		"apiVersion: hwk.dev/v1\nkind: Cluster\n",
		"- a\n- b\n",
		header + "autostart: true\nnodes: ~\nnetworking: ~\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		// YAML breaks lines at \n, \r, NEL, LS and PS (and \r\n,
		// counted twice here: this bounds the file's lines).
		lines := 1
		text := asUTF8(data)
		for _, brk := range []string{"\n", "\r", "\u0085", "\u2028", "\u2029"} {
			lines += bytes.Count(text, []byte(brk))
		}
		if err != nil {
			checkErrors(t, err, lines)
			if c != nil {
				t.Fatal("Decode returned a config with its error")
			}
			return
		}
		if c.APIVersion != APIVersion || c.Kind != Kind {
			t.Fatalf("Decode took apiVersion %q, kind %q", c.APIVersion, c.Kind)
		}
		SetDefaults(c, Host{OS: "linux"})
		again := *stripPositions(c)
		SetDefaults(&again, Host{OS: "windows"})
		if !reflect.DeepEqual(&again, stripPositions(c)) {
			t.Fatalf("defaulting twice changed the config\nonce  %+v\ntwice %+v", c, &again)
		}
		if err := Validate(c); err != nil {
			checkErrors(t, err, lines)
			return
		}
		// A valid config, printed, loads back as itself.
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(out)
		if err != nil {
			t.Fatalf("printed config does not load: %v\n%s", err, out)
		}
		SetDefaults(back, Host{OS: "windows"})
		if err := Validate(back); err != nil {
			t.Fatalf("printed config is invalid: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(stripPositions(back), stripPositions(c)) {
			t.Fatalf("round trip changed the config\nbefore %+v\nafter  %+v", c, back)
		}
	})
}

// asUTF8 returns the text the YAML decoder reads: it takes UTF-16 after a
// byte-order mark, whose code units can be line breaks (U+2028 is the
// bytes "( " in UTF-16LE).
func asUTF8(data []byte) []byte {
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(data, []byte{0xff, 0xfe}):
		order = binary.LittleEndian
	case bytes.HasPrefix(data, []byte{0xfe, 0xff}):
		order = binary.BigEndian
	default:
		return data
	}
	units := make([]uint16, 0, len(data)/2)
	for i := 2; i+1 < len(data); i += 2 {
		units = append(units, order.Uint16(data[i:]))
	}
	return []byte(string(utf16.Decode(units)))
}

// checkErrors asserts that err is what Decode and Validate promise: every
// problem as a FieldError with a path, a message and a line of the file
// (or none), or a file that is not YAML or too big. The walk must catch
// whatever the YAML decoder would refuse.
func checkErrors(t *testing.T, err error, lines int) {
	t.Helper()
	var errs Errors
	if !errors.As(err, &errs) {
		msg := err.Error()
		if !strings.HasPrefix(msg, "not valid YAML: ") && !strings.HasPrefix(msg, "the config is ") {
			t.Fatalf("error %T %q is neither config.Errors nor a YAML or size error", err, msg)
		}
		return
	}
	if len(errs) == 0 {
		t.Fatal("an empty Errors as an error")
	}
	for _, e := range errs {
		// An empty document's node sits on the line after its "---".
		if e.Path == "" || e.Message == "" || e.Line < 0 || e.Line > lines+1 {
			t.Fatalf("field error %+v: no path or message, or a line past the file's %d", e, lines)
		}
	}
}

// TestDecodeLimits checks that Decode refuses, with a clear error, a config
// of hundreds of thousands of nodes, a long misspelt key, and a file over
// its size limit.
func TestDecodeLimits(t *testing.T) {
	// Why: such a config took minutes to default (each node without a driver
	// looks through all the others), and a long misspelt key a matrix of its
	// length squared.
	many := header + "nodes: [" + strings.Repeat("{},", 200000) + "{}]\n"
	_, err := Decode([]byte(many))
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Path != "nodes" || !strings.Contains(errs[0].Message, "lists 200001 entries; hwk takes at most 1000") {
		t.Errorf("200001 nodes: %v", err)
	}
	long := header + "? " + strings.Repeat("x", 100000) + "\n: 1\n"
	if _, err := Decode([]byte(long)); err == nil || !strings.Contains(err.Error(), "unknown field; known fields here:") {
		t.Errorf("a long unknown key: %v", err)
	}
	huge := header + "# " + strings.Repeat("x", maxConfigSize) + "\n"
	if _, err := Decode([]byte(huge)); err == nil || !strings.Contains(err.Error(), "more than the 1024 KiB hwk reads") {
		t.Errorf("a config over 1 MiB: %v", err)
	}
}
