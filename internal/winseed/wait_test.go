package winseed

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/powershell"
	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
)

// Replies of the fake powershell.exe (testdata/replies, which cite their
// formats), by key.
const (
	stateOOBE     = "imagestate/oobe"
	stateUndeploy = "imagestate/undeployable"
	stateNone     = "imagestate/none"
	stateComplete = "imagestate/complete"
	registryError = "imagestate/registry-error"

	adaptersNone         = "adapters/none"
	adapterDisconnected  = "adapters/disconnected"
	adapterUp            = "adapters/up"
	adaptersTwoUp        = "adapters/two-up"
	adaptersOneOfTwoUp   = "adapters/one-of-two-up"
	adaptersCmdletFailed = "adapters/cmdlet-failed"
)

// fakeOnPath puts a fake powershell.exe first on PATH (so that
// PowerShellProbe really starts a program, passes it an encoded script
// and reads its output and stderr) answering the two queries, each with
// its replies in turn, the last repeating; any other call fails the test.
// It returns a function that reads back the queries it answered.
func fakeOnPath(t *testing.T, replies map[string][]string) (calls func() []string) {
	t.Helper()
	tr := &fakeprog.Transcript{Name: t.Name()}
	for _, q := range []struct{ name, script string }{{"ImageState", imageStateQuery}, {"Adapters", adaptersQuery}} {
		for i, r := range replies[q.name] {
			times := 1
			if i == len(replies[q.name])-1 {
				times = 0
			}
			tr.Exchanges = append(tr.Exchanges, fakeprog.Exchange{Name: q.name, Args: powershell.Args(q.script), Times: times, Optional: true, Reply: r})
		}
	}
	fake := fakeprog.New(t, fakeprog.Config{Program: "powershell.exe", Transcript: tr, Replies: "testdata/replies"})
	t.Cleanup(func() {
		if u := fake.Unexpected(); u != "" {
			t.Errorf("powershell.exe was called in a way it did not expect:\n%s", u)
		}
	})
	return fake.Answered
}

// quick gives up on the adapter soon: for the tests that end that way.
var quick = Wait{Poll: time.Millisecond, Adapter: 300 * time.Millisecond}

// TestWaitReady checks that hwk-seed goes on only once Setup reports the
// image complete, and then only with exactly one adapter Up (issue 26).
func TestWaitReady(t *testing.T) {
	for name, c := range map[string]struct {
		states, adapters []string
		want             Adapter
		calls            string
		log              []string
	}{
		"Setup's passes, then a NIC that comes up late": {
			states:   []string{stateNone, stateOOBE, stateOOBE, registryError, stateUndeploy, stateComplete},
			adapters: []string{adaptersNone, adapterDisconnected, adapterDisconnected, adapterUp},
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
			states:   []string{stateComplete},
			adapters: []string{adaptersOneOfTwoUp},
			want:     Adapter{Name: "Ethernet 2", IfIndex: 7, Status: "Up"},
			calls:    "ImageState Adapters",
		},
		"Get-NetAdapter fails once": {
			states:   []string{stateComplete},
			adapters: []string{adaptersCmdletFailed, adapterUp},
			want:     Adapter{Name: "Ethernet", IfIndex: 4, Status: "Up"},
			calls:    "ImageState Adapters Adapters",
			log:      []string{"list the network adapters: powershell.exe: exit status 1: Get-NetAdapter : Invalid class"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			calls := fakeOnPath(t, map[string][]string{"ImageState": c.states, "Adapters": c.adapters})
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

// TestWaitReadyGivesUp checks that two adapters Up, or none, past the
// bound is an error naming what it saw, and that Setup's wait ends only
// with the context.
func TestWaitReadyGivesUp(t *testing.T) {
	for name, c := range map[string]struct {
		adapters string
		want     string
	}{
		"two Up": {adaptersTwoUp, "still have Ethernet (Up), Ethernet 2 (Up) after 300ms"},
		"none":   {adaptersNone, "still have none after 300ms"},
	} {
		t.Run(name, func(t *testing.T) {
			fakeOnPath(t, map[string][]string{"ImageState": {stateComplete}, "Adapters": {c.adapters}})
			_, err := WaitReady(context.Background(), PowerShellProbe{}, quick)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
	t.Run("Setup never completes", func(t *testing.T) {
		calls := fakeOnPath(t, map[string][]string{"ImageState": {stateOOBE}, "Adapters": {adapterUp}})
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
