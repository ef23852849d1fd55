package actions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/testing/driverstest"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// bootState is what a Windows clone shows from outside at one moment of
// its first boot.
type bootState string

const (
	stNoHandle   bootState = "no handle"     // the driver cannot give one yet
	stSetup      bootState = "setup"         // nothing listens on TCP 22
	stImageKey   bootState = "image key"     // sshd shows the image's own host key
	stKeyRefused bootState = "key refused"   // pinned host key, cluster key refused
	stRenaming   bootState = "renaming"      // seed applied, old name, containerd running
	stRebooting  bootState = "rebooting"     // the rename's restart
	stNoRuntime  bootState = "no runtime"    // renamed, containerd not running
	stBooted     bootState = "booted"        // renamed, containerd running
	oldName                = "WIN-8Q2L1J7MD" // the name Setup gave the clone
)

// firstBoot is a Windows node's first boot on a clock: each state lasts
// its span from the machine's Create, the last one for ever. It is the
// driver (Create, Node) and the node's transport (Connect, Run).
type firstBoot struct {
	driverstest.Fake
	states []bootState
	spans  []time.Duration

	mu      sync.Mutex
	created time.Time
	// answered is the state the last probe saw.
	answered bootState
}

func newFirstBoot(steps ...any) *firstBoot {
	b := &firstBoot{Fake: driverstest.Up(config.DriverHyperV)}
	for i := 0; i < len(steps); i += 2 {
		b.states = append(b.states, steps[i].(bootState))
		if i+1 < len(steps) {
			b.spans = append(b.spans, steps[i+1].(time.Duration))
		}
	}
	return b
}

func (b *firstBoot) Create(context.Context, drivers.MachineSpec) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.created = time.Now()
	return nil
}

func (b *firstBoot) now() bootState {
	b.mu.Lock()
	defer b.mu.Unlock()
	at := time.Since(b.created)
	for i, d := range b.spans {
		if at < d {
			b.answered = b.states[i]
			return b.states[i]
		}
		at -= d
	}
	b.answered = b.states[len(b.states)-1]
	return b.answered
}

func (b *firstBoot) last() bootState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.answered
}

func (b *firstBoot) Node(_ context.Context, r drivers.Ref) (*node.Node, error) {
	if b.now() == stNoHandle {
		return nil, fmt.Errorf("node %s: no address reported yet", r.Name)
	}
	return node.New(r.Name, config.Windows, b), nil
}

// Connect implements node.Connector, failing as node.SSH does.
func (b *firstBoot) Connect(context.Context) error {
	addr := "172.31.250.11:22"
	switch b.now() {
	case stNoHandle, stSetup, stRebooting:
		return &node.ConnectError{Addr: addr, Stage: node.StageDial, Err: errors.New("connect: connection refused")}
	case stImageKey:
		return &node.ConnectError{Addr: addr, Stage: node.StageHostKey, Err: errors.New("ssh: handshake failed: ssh: host key mismatch")}
	case stKeyRefused:
		return &node.ConnectError{Addr: addr, Stage: node.StageAuth, Err: errors.New("ssh: handshake failed: ssh: unable to authenticate")}
	}
	return nil
}

// Run implements node.Transport: it connects first, as node.SSH does,
// and answers the boot checks.
func (b *firstBoot) Run(ctx context.Context, cmd node.Cmd) error {
	if err := b.Connect(ctx); err != nil {
		return err
	}
	st := b.last()
	script, _ := node.ScriptOf(cmd.Args)
	name := strings.ToUpper("demo-win-1")
	if st == stRenaming {
		name = oldName
	}
	running := st != stNoRuntime
	switch script {
	case bootstrap.WindowsBootScript:
		_, _ = io.WriteString(cmd.Stdout, name+"\r\n")
	case bootstrap.ContainerdRunningScript:
	default:
		return &node.ExitError{Code: 127}
	}
	if !running {
		return &node.ExitError{Code: 1}
	}
	return nil
}

// bootContext returns a cluster of one Windows node on b, whose progress goes
// to out (not a terminal: a line per phase).
func bootContext(b *firstBoot, t Timeouts, out io.Writer) *Context {
	n := config.Node{Name: "demo-win-1", Role: config.Worker, OS: config.Windows, Driver: config.DriverHyperV,
		Memory: "4Gi", Disk: "64Gi", IP: "172.31.250.11", CPUs: 2}
	return &Context{
		Config:   &config.Cluster{Name: "demo", Nodes: []config.Node{n}},
		Drivers:  map[string]drivers.Driver{n.Name: b},
		Images:   map[string]string{},
		Timeouts: t,
		Status:   ui.NewStatus(out, false),
		Started:  time.Now(),
	}
}

func fastBootPolls(t *testing.T) {
	poll, probe := windowsBootPoll, windowsProbeTimeout
	windowsBootPoll, windowsProbeTimeout = 10*time.Millisecond, time.Second
	t.Cleanup(func() { windowsBootPoll, windowsProbeTimeout = poll, probe })
}

// syncWriter is a bytes buffer safe for the status line's goroutines.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestWindowsBootWaitsForRename checks that the boot wait goes on while SSH
// works and containerd runs on a node about to restart for its rename, and
// through that restart, until the node runs under its own name with
// containerd; the progress shows each phase as the node reaches it.
func TestWindowsBootWaitsForRename(t *testing.T) {
	// Why: hwk-seed restarts sshd with the node's keys before it renames
	// the computer and restarts it (review 3, Step B.2).
	fastBootPolls(t)
	ms := time.Millisecond
	b := newFirstBoot(stNoHandle, 100*ms, stSetup, 100*ms, stImageKey, 100*ms, stKeyRefused, 100*ms,
		stRenaming, 1500*ms, stRebooting, 200*ms, stNoRuntime, 200*ms, stBooted)
	var out syncWriter
	c := bootContext(b, Timeouts{NodeBoot: 10 * time.Second, WindowsBoot: 10 * time.Second}, &out)
	c.Status.Start("Creating nodes")
	err := Nodes{}.Execute(context.Background(), c)
	c.Status.End(err)
	if err != nil {
		t.Fatalf("boot: %v", err)
	}
	if got := b.last(); got != stBooted {
		t.Fatalf("the boot wait ended while the node was %q; want it to wait until it runs under its own name after the rename's restart", got)
	}
	log := out.String()
	at := 0
	for _, want := range []string{
		"demo-win-1: Windows Setup running",
		"demo-win-1: hwk-seed applying the seed",
		"demo-win-1: seed applied, restarting to take its name",
		"demo-win-1: renamed, waiting for containerd",
		"demo-win-1: booted after",
	} {
		i := strings.Index(log[at:], want)
		if i < 0 {
			t.Errorf("the progress does not show %q after what came before:\n%s", want, log)
			continue
		}
		at += i
	}
}

// TestWindowsBootBudget checks that a Windows node's first boot is bounded
// by WindowsBoot, not by NodeBoot (Linux's), and up's default for it fits a
// slow laptop; the emulation slowdown scales it too.
func TestWindowsBootBudget(t *testing.T) {
	fastBootPolls(t)
	b := newFirstBoot(stSetup, 600*time.Millisecond, stBooted)
	var out syncWriter
	c := bootContext(b, Timeouts{NodeBoot: 200 * time.Millisecond, WindowsBoot: 10 * time.Second}, &out)
	if err := (Nodes{}).Execute(context.Background(), c); err != nil {
		t.Fatalf("a Windows boot longer than NodeBoot but within WindowsBoot: %v", err)
	}
	if DefaultTimeouts.WindowsBoot < 15*time.Minute {
		t.Errorf("the default Windows boot budget is %s; a first boot on a slow laptop needs 15 minutes or more", DefaultTimeouts.WindowsBoot)
	}
	if got := DefaultTimeouts.Scale(EmulationSlowdown).WindowsBoot; got != EmulationSlowdown*DefaultTimeouts.WindowsBoot {
		t.Errorf("scaled WindowsBoot: %s", got)
	}
}

// TestWindowsBootTimeoutSaysPhase checks that a node that never gets past a
// phase fails naming the phase, the budget, what the last check saw and
// where to look, rather than "did not start its container runtime".
func TestWindowsBootTimeoutSaysPhase(t *testing.T) {
	fastBootPolls(t)
	ms := time.Millisecond
	for _, c := range []struct {
		stuck              bootState
		phase, last, where string
	}{
		{stSetup, "Windows Setup running", "connection refused", `C:\Windows\Panther\setupact.log`},
		{stImageKey, "hwk-seed applying the seed", "host key mismatch", `C:\ProgramData\hwk\hwk-seed.log`},
		{stRenaming, "seed applied, restarting to take its name", `the computer runs as "WIN-8Q2L1J7MD", not yet as demo-win-1`, "restarts once"},
		{stNoRuntime, "renamed, waiting for containerd", "exited with status 1", "hwk ssh demo-win-1 --name demo"},
	} {
		b := newFirstBoot(stSetup, 50*ms, c.stuck)
		var out syncWriter
		ctx := bootContext(b, Timeouts{NodeBoot: 10 * time.Second, WindowsBoot: 400 * ms}, &out)
		err := Nodes{}.Execute(context.Background(), ctx)
		if err == nil {
			t.Fatalf("stuck at %s: no error", c.stuck)
		}
		for _, want := range []string{
			"node demo-win-1 stopped at phase \"" + c.phase, "\" after 400ms (in it for the last ",
			"last check: ", c.last, "look at ", c.where,
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("stuck at %s: the error does not say %q:\n%v", c.stuck, want, err)
			}
		}
	}
}
