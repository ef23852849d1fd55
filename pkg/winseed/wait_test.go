package winseed

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/pkg/powershell"
)

// The test binary is also the fake powershell.exe: a link named so, first
// on PATH, runs it (see TestMain), so that PowerShellProbe really starts a
// program, passes it an encoded script and reads its output and stderr.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "powershell.exe" {
		os.Exit(fakePowerShell(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// reply is one answer of the fake: what powershell.exe prints and how it
// exits.
type reply struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Code   int    `json:"code"`
}

// Replies in the formats Windows PowerShell 5.1 writes, with CR LF line
// ends (its console output):
//   - Get-ItemProperty's ImageState, a REG_SZ, prints as its bare string;
//     the values are those of Microsoft's "Windows Setup States" page
//     (learn.microsoft.com/windows-hardware/manufacture/desktop/windows-setup-states).
//     With -ErrorAction SilentlyContinue a missing value prints nothing.
//   - Get-NetAdapter's Status is its text ("Up", "Disconnected",
//     "Disabled", "Not Present"; learn.microsoft.com/powershell/module/netadapter/get-netadapter),
//     ifIndex a number. ConvertTo-Json -Compress gets the adapters through
//     the pipeline, which unrolls them: one adapter is an object, several
//     an array, none prints nothing at all.
//   - A failed command writes its error record to stderr and, with
//     -NonInteractive and a terminating error, exits 1.
var (
	stateOOBE     = reply{Stdout: "IMAGE_STATE_SPECIALIZE_RESEAL_TO_OOBE\r\n"}
	stateUndeploy = reply{Stdout: "IMAGE_STATE_UNDEPLOYABLE\r\n"}
	stateNone     = reply{}
	stateComplete = reply{Stdout: "IMAGE_STATE_COMPLETE\r\n"}
	registryError = reply{Stderr: "Get-ItemProperty : Requested registry access is not allowed.\r\nAt line:2 char:2\r\n", Code: 1}

	adaptersNone         = reply{}
	adapterDisconnected  = reply{Stdout: `{"Name":"Ethernet","ifIndex":4,"Status":"Disconnected"}` + "\r\n"}
	adapterUp            = reply{Stdout: `{"Name":"Ethernet","ifIndex":4,"Status":"Up"}` + "\r\n"}
	adaptersTwoUp        = reply{Stdout: `[{"Name":"Ethernet","ifIndex":4,"Status":"Up"},{"Name":"Ethernet 2","ifIndex":7,"Status":"Up"}]` + "\r\n"}
	adaptersOneOfTwoUp   = reply{Stdout: `[{"Name":"Ethernet","ifIndex":4,"Status":"Disconnected"},{"Name":"Ethernet 2","ifIndex":7,"Status":"Up"}]` + "\r\n"}
	adaptersCmdletFailed = reply{Stderr: "Get-NetAdapter : Invalid class\r\n", Code: 1}
)

// fakePowerShell answers the two queries from $HWK_FAKE_PS_DIR/replies.json
// ({"ImageState": [...], "Adapters": [...]}, each taken in turn, the last
// repeating), logs each to calls.log, and fails any other call, logging it
// to unexpected.log.
func fakePowerShell(args []string) int {
	dir := os.Getenv("HWK_FAKE_PS_DIR")
	unexpected := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		appendLine(filepath.Join(dir, "unexpected.log"), msg)
		fmt.Fprintln(os.Stderr, "fake powershell.exe: "+msg)
		return 1
	}
	want := powershell.Args("")
	script, ok := powershell.Script(args)
	if !ok || len(args) != len(want) || !slices.Equal(args[:len(args)-1], want[:len(want)-1]) {
		return unexpected("arguments %q", args)
	}
	var query string
	switch script {
	case imageStateQuery:
		query = "ImageState"
	case adaptersQuery:
		query = "Adapters"
	default:
		return unexpected("script %q", script)
	}
	b, err := os.ReadFile(filepath.Join(dir, "replies.json"))
	if err != nil {
		return unexpected("%v", err)
	}
	var replies map[string][]reply
	if err := json.Unmarshal(b, &replies); err != nil || len(replies[query]) == 0 {
		return unexpected("no replies for %s (%v)", query, err)
	}
	// The count of earlier calls of this query picks the reply.
	counter := filepath.Join(dir, query+".count")
	n := 0
	if c, err := os.ReadFile(counter); err == nil {
		n, _ = strconv.Atoi(string(c))
	}
	_ = os.WriteFile(counter, []byte(strconv.Itoa(n+1)), 0o600)
	r := replies[query][min(n, len(replies[query])-1)]
	appendLine(filepath.Join(dir, "calls.log"), query)
	os.Stdout.WriteString(r.Stdout)
	os.Stderr.WriteString(r.Stderr)
	return r.Code
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

// fakeOnPath puts the fake powershell.exe first on PATH with replies, and
// returns a function that reads back the queries it answered.
func fakeOnPath(t *testing.T, replies map[string][]reply) (calls func() []string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, dir := t.TempDir(), t.TempDir()
	if err := os.Symlink(self, filepath.Join(bin, "powershell.exe")); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(replies)
	if err := os.WriteFile(filepath.Join(dir, "replies.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("HWK_FAKE_PS_DIR", dir)
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "unexpected.log")); err == nil {
			t.Errorf("powershell.exe was called in a way it did not expect:\n%s", b)
		}
	})
	return func() []string {
		b, _ := os.ReadFile(filepath.Join(dir, "calls.log"))
		return strings.Fields(string(b))
	}
}

// quick gives up on the adapter soon: for the tests that end that way.
var quick = Wait{Poll: time.Millisecond, Adapter: 300 * time.Millisecond}

// TestWaitReady: hwk-seed goes on only once Setup says the image is
// complete, and then only with exactly one adapter Up (issue 26).
func TestWaitReady(t *testing.T) {
	for name, c := range map[string]struct {
		states, adapters []reply
		want             Adapter
		calls            string
		log              []string
	}{
		"Setup's passes, then a NIC that comes up late": {
			states:   []reply{stateNone, stateOOBE, stateOOBE, registryError, stateUndeploy, stateComplete},
			adapters: []reply{adaptersNone, adapterDisconnected, adapterDisconnected, adapterUp},
			want:     Adapter{Name: "Ethernet", IfIndex: 4, Status: "Up"},
			calls:    "ImageState ImageState ImageState ImageState ImageState ImageState Adapters Adapters Adapters Adapters",
			log: []string{
				"Windows Setup is at no ImageState; waiting for IMAGE_STATE_COMPLETE",
				"Windows Setup is at IMAGE_STATE_SPECIALIZE_RESEAL_TO_OOBE; waiting",
				"read Setup's ImageState: powershell.exe: exit status 1: Get-ItemProperty : Requested registry access is not allowed.",
				"Windows Setup is at IMAGE_STATE_UNDEPLOYABLE; waiting",
				"want one physical network adapter Up, have none; waiting",
				"want one physical network adapter Up, have Ethernet (Disconnected); waiting",
			},
		},
		"a complete image, one of two adapters Up": {
			states:   []reply{stateComplete},
			adapters: []reply{adaptersOneOfTwoUp},
			want:     Adapter{Name: "Ethernet 2", IfIndex: 7, Status: "Up"},
			calls:    "ImageState Adapters",
		},
		"Get-NetAdapter fails once": {
			states:   []reply{stateComplete},
			adapters: []reply{adaptersCmdletFailed, adapterUp},
			want:     Adapter{Name: "Ethernet", IfIndex: 4, Status: "Up"},
			calls:    "ImageState Adapters Adapters",
			log:      []string{"list the network adapters: powershell.exe: exit status 1: Get-NetAdapter : Invalid class"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			calls := fakeOnPath(t, map[string][]reply{"ImageState": c.states, "Adapters": c.adapters})
			var log bytes.Buffer
			// A bound no slow machine reaches: each of these ends with an
			// adapter Up, however long the fake takes to start.
			w := Wait{Poll: time.Millisecond, Adapter: time.Minute, Log: &log}
			got, err := WaitReady(context.Background(), PowerShellProbe{}, w)
			if err != nil {
				t.Fatalf("%v\nlog:\n%s", err, log.String())
			}
			if got != c.want {
				t.Errorf("adapter %+v, want %+v", got, c.want)
			}
			if strings.Join(calls(), " ") != c.calls {
				t.Errorf("queries:\n got %s\nwant %s", strings.Join(calls(), " "), c.calls)
			}
			for _, l := range c.log {
				if !strings.Contains(log.String(), "hwk-seed: "+l) {
					t.Errorf("log lacks %q:\n%s", l, log.String())
				}
			}
		})
	}
}

// TestWaitReadyGivesUp: two adapters Up, or none, past the bound is an
// error that says what it saw; Setup's wait ends only with the context.
func TestWaitReadyGivesUp(t *testing.T) {
	for name, c := range map[string]struct {
		adapters reply
		want     string
	}{
		"two Up": {adaptersTwoUp, "still have Ethernet (Up), Ethernet 2 (Up) after 300ms"},
		"none":   {adaptersNone, "still have none after 300ms"},
	} {
		t.Run(name, func(t *testing.T) {
			fakeOnPath(t, map[string][]reply{"ImageState": {stateComplete}, "Adapters": {c.adapters}})
			_, err := WaitReady(context.Background(), PowerShellProbe{}, quick)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
	t.Run("Setup never completes", func(t *testing.T) {
		calls := fakeOnPath(t, map[string][]reply{"ImageState": {stateOOBE}, "Adapters": {adapterUp}})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if _, err := WaitReady(ctx, PowerShellProbe{}, quick); err != context.DeadlineExceeded {
			t.Errorf("err = %v, want the context's", err)
		}
		if slices.Contains(calls(), "Adapters") {
			t.Error("asked for the adapters before Setup was complete")
		}
	})
}

func TestParseAdapters(t *testing.T) {
	for _, bad := range []string{"{", "[{]", "Ethernet Up"} {
		if _, err := parseAdapters(bad); err == nil {
			t.Errorf("parseAdapters(%q) took it", bad)
		}
	}
}
