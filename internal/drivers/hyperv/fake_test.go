package hyperv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
)

// jsonReplies are replies by key as the JSON value each holds.
type jsonReplies map[string]json.RawMessage

// Get returns the reply called key.
func (r jsonReplies) Get(key string) (json.RawMessage, error) {
	raw, ok := r[key]
	if !ok {
		return nil, fmt.Errorf("no reply %q in the reply files", key)
	}
	return raw, nil
}

// replies are the real-format replies in testdata/replies, each file
// citing where its format comes from, each a JSON value (the out of the
// session's result line).
var replies = sync.OnceValues(func() (jsonReplies, error) {
	all, err := fakeprog.LoadReplies("testdata/replies")
	if err != nil {
		return nil, err
	}
	out := jsonReplies{}
	for k := range all {
		if out[k], err = all.JSON(k); err != nil {
			return nil, err
		}
	}
	return out, nil
})

// reporter is the part of testing.TB the fake reports to.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
}

// fakePS stands in for the PowerShell session: it records every script
// and answers from rules, each matched by strings the script holds, with
// a reply from testdata/replies (decoded as the session decodes one) or
// an error record. A script no rule expects fails the test.
type fakePS struct {
	t       reporter
	scripts []string
	tr      fakeprog.Transcript
	st      fakeprog.State
	// patched are replies made by patch.
	patched map[string]json.RawMessage
}

func (f *fakePS) Run(_ context.Context, script string, out any) error {
	f.t.Helper()
	f.scripts = append(f.scripts, script)
	r, ok := f.tr.Answer(&f.st, fakeprog.Request{Script: script}, nil)
	if !ok {
		f.t.Errorf("PowerShell was sent a script no rule of the test expects:\n%s", script)
		return &PSError{Message: "the fake PowerShell did not expect this script", Category: "NotImplemented"}
	}
	if r.Error != nil {
		var e PSError
		if err := json.Unmarshal(r.Error, &e); err != nil {
			f.t.Fatal(err)
		}
		return &e
	}
	raw := json.RawMessage("null")
	if p, ok := f.patched[r.Reply]; ok {
		raw = p
	} else if r.Reply != "" {
		all, err := replies()
		if err != nil {
			f.t.Fatal(err)
		}
		if raw, err = all.Get(r.Reply); err != nil {
			f.t.Fatal(err)
		}
	}
	return (&reply{OK: true, Out: raw}).decode(out)
}

// on answers the scripts that hold every string of match with the reply
// called key (file/name in testdata/replies).
func (f *fakePS) on(key string, match ...string) *fakePS {
	return f.add(fakeprog.Exchange{Script: match, Reply: key})
}

// add adds an exchange answering any number of times, none included.
func (f *fakePS) add(e fakeprog.Exchange) *fakePS {
	e.Name, e.Optional = fmt.Sprint(len(f.tr.Exchanges)), true
	f.tr.Exchanges = append(f.tr.Exchanges, e)
	return f
}

// quiet answers, with no output, scripts that write nothing.
func (f *fakePS) quiet(match ...string) *fakePS { return f.on("", match...) }

// fail answers with an error record.
func (f *fakePS) fail(err *PSError, match ...string) *fakePS {
	rec, jerr := json.Marshal(err)
	if jerr != nil {
		f.t.Fatal(jerr)
	}
	return f.add(fakeprog.Exchange{Script: match, Error: rec})
}

// failTimes answers with an error record n times.
func (f *fakePS) failTimes(n int, err *PSError, match ...string) *fakePS {
	f.fail(err, match...)
	f.tr.Exchanges[len(f.tr.Exchanges)-1].Times = n
	return f
}

// patch adds a copy of the reply called key with the top-level properties
// in change replaced, for variations of a real-format reply, and returns
// the new reply's key.
func (f *fakePS) patch(key string, change map[string]any) string {
	all, err := replies()
	if err != nil {
		f.t.Fatal(err)
	}
	raw, err := all.Get(key)
	if err != nil {
		f.t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		f.t.Fatal(err)
	}
	for k, x := range change {
		if _, ok := v[k]; !ok {
			f.t.Fatal("reply " + key + " has no property " + k)
		}
		v[k] = x
	}
	b, err := json.Marshal(v)
	if err != nil {
		f.t.Fatal(err)
	}
	if f.patched == nil {
		f.patched = map[string]json.RawMessage{}
	}
	name := fmt.Sprintf("%s+patch%d", key, len(f.patched))
	f.patched[name] = b
	return name
}

// reset forgets the rules.
func (f *fakePS) reset() *fakePS {
	f.tr, f.st = fakeprog.Transcript{}, fakeprog.State{}
	return f
}

// transcript returns the scripts sent, with the test's temporary paths made
// stable, for golden files.
func (f *fakePS) transcript(root string) string {
	var b strings.Builder
	for i, s := range f.scripts {
		fmt.Fprintf(&b, "# --- script %d\n%s\n", i+1, s)
	}
	// The driver passes host paths through as they are; on Linux they
	// are slash paths under root, shown as the Windows paths they stand for.
	paths := regexp.MustCompile(regexp.QuoteMeta(root) + `[^'"\s]*`)
	return paths.ReplaceAllStringFunc(b.String(), func(p string) string {
		return `C:\hwk` + strings.ReplaceAll(strings.TrimPrefix(p, root), "/", `\`)
	})
}

// Markers of each kind of script, for rules.
const (
	preflightMark   = "Win32_ComputerSystem"
	netFactsMark    = "[pscustomobject]@{\n    switch"
	netMakeMark     = "Hyper-V\\New-VMSwitch"
	addressMark     = "NetTCPIP\\New-NetIPAddress -InterfaceAlias 'vEthernet (hwk)'"
	netDeleteMark   = "$kept = @()"
	createFactsMark = "System.IO.DriveInfo"
	createMark      = "Hyper-V\\New-VM "
	listMark        = "Microsoft.PowerShell.Core\\ForEach-Object { $vm = $_;"
	startMark       = "if ($vm.State -ne 'Running') { Hyper-V\\Start-VM"
	stopMark        = "-AsJob"
	deleteMark      = "Remove-Item -LiteralPath"
)

// inspectMark returns the marker of the inspect script of VM name.
func inspectMark(name string) string {
	return "$vm = Hyper-V\\Get-VM -Name '" + name + "' -ErrorAction SilentlyContinue\nif ($vm) { [pscustomobject]"
}

// recorder is a reporter that keeps what it was told, to test the fake.
type recorder struct{ errors []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatal(args ...any) { r.errors = append(r.errors, fmt.Sprint(args...)) }

// TestFakeFailsUnexpectedScripts checks that a script no rule expects
// fails the test (and the operation), instead of coming back as nothing.
func TestFakeFailsUnexpectedScripts(t *testing.T) {
	rec := &recorder{}
	f := (&fakePS{t: rec}).quiet(startMark)
	d := New(Options{Runner: f})
	if err := d.Stop(context.Background(), testRef("demo-cp")); err == nil || !strings.Contains(err.Error(), "did not expect") {
		t.Errorf("stop with no rule for it: %v", err)
	}
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "no rule of the test expects") || !strings.Contains(rec.errors[0], "-AsJob") {
		t.Errorf("the test was told %q", rec.errors)
	}
}

// TestRepliesCiteSources checks that every reply file parses, cites a
// source, and holds JSON (replies fails otherwise), and that a file
// without a source is refused.
func TestRepliesCiteSources(t *testing.T) {
	all, err := replies()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 20 {
		t.Errorf("%d replies", len(all))
	}
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/bad.txt", []byte("# a reply file\n== x ==\n{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fakeprog.LoadReplies(dir); err == nil || !strings.Contains(err.Error(), "cites no source") {
		t.Errorf("a file without a source: %v", err)
	}
}
