package actions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/ui"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// bootPhase is how far a Windows node's first boot has come, as hwk sees
// it from outside through the node handle alone, the same on every
// driver. Phases are ordered as the boot goes.
type bootPhase int

// The phases, in the boot's order: Windows Setup (specialize, a restart,
// oobeSystem), then hwk-seed (the static address first, then the cluster's
// SSH key and the pinned host key, sshd restarted), then the rename and the
// restart it takes, then containerd.
const (
	// phaseSetup means no SSH at the node's address, or no handle at all (a
	// driver that waits for the guest to report it): Windows Setup runs,
	// or hwk-seed has not set the static address yet.
	phaseSetup bootPhase = iota
	// phaseSeed means SSH answers at the static address, but with a host key
	// other than the pinned one, or refusing the cluster's key: hwk-seed
	// has set the address and not yet the keys.
	phaseSeed
	// phaseRename means hwk's SSH works, but the computer still runs under
	// another name: hwk-seed's rename and the restart it takes are still
	// to come (or under way, SSH then gone for a while).
	phaseRename
	// phaseContainerd means renamed and restarted; containerd does not run yet.
	phaseContainerd
	// phaseBooted means containerd runs on the renamed node.
	phaseBooted
)

// String returns the phase as the progress line and the timeout error
// show it.
func (p bootPhase) String() string {
	switch p {
	case phaseSetup:
		return "Windows Setup running (no SSH at its address yet)"
	case phaseSeed:
		return "hwk-seed applying the seed (SSH answers at its address, not yet with its pinned host key and the cluster's key)"
	case phaseRename:
		return "seed applied, restarting to take its name"
	case phaseContainerd:
		return "renamed, waiting for containerd"
	}
	return "booted"
}

// lookAt returns where to look when a node stops at the phase.
func (p bootPhase) lookAt(n config.Node, cluster string) string {
	const seedLog = `C:\ProgramData\hwk\hwk-seed.log`
	switch p {
	case phaseSetup:
		return `the node's console (on Hyper-V: vmconnect.exe localhost ` + n.Name + `) for Windows Setup's progress or an error on screen (an out-of-box page asking for a region, a keyboard or a password means Setup did not read unattend.xml from the node's cidata disc); Setup's own log is C:\Windows\Panther\setupact.log`
	case phaseSeed:
		return "hwk-seed's log on the node, " + seedLog + ", from its console: it sets the static address, then the SSH keys, and says where it stopped"
	case phaseRename:
		return "the node's console: after hwk-seed renames the computer it restarts once; " + seedLog + " says whether the rename ran"
	default:
		return fmt.Sprintf(`containerd on the node: hwk ssh %s --name %s, then Get-Service containerd and C:\var\log\containerd\containerd.log`, n.Name, cluster)
	}
}

// Windows boot waits' pace: a probe starts powershell.exe on the node,
// which takes a second or more on a cold VM, so probes are not
// back-to-back; and a probe has a deadline of its own, so that one on a
// connection that died silently (the rename's restart) does not spend the
// budget (the SSH keepalive would end it too, but later).
var (
	windowsBootPoll     = 2 * time.Second
	windowsProbeTimeout = time.Minute
)

// waitWindowsBooted waits, within Timeouts.WindowsBoot, until the
// Windows node has its name and containerd runs, showing each phase it
// reaches on the progress line (phases). Phases only go forward: SSH gone
// after the seed is the rename's restart, not Setup again.
func waitWindowsBooted(ctx context.Context, c *Context, n config.Node, phases *ui.Phases) error {
	began := time.Now()
	// Why WindowsBoot is 20 minutes by default: in a Windows clone's first
	// boot Windows Setup runs specialize with full hardware detection,
	// restarts, runs oobeSystem, then hwk-seed applies the seed and
	// renames the computer, which takes a second restart; on a laptop's
	// two vCPUs, beside the Linux control plane's boot and Defender's
	// first scan.
	budget := c.Timeouts.WindowsBoot
	wctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	reached, since := phaseSetup, began
	phases.Set(n.Name, reached.String())
	var last error
	for {
		pctx, pcancel := context.WithTimeout(wctx, windowsProbeTimeout)
		p, err := probeWindows(pctx, c, n)
		pcancel()
		if err == nil {
			took := ui.FormatDuration(time.Since(began))
			phases.Done(n.Name, "booted after "+took)
			if c.Log != nil {
				c.Log.Info("Windows node booted", "node", n.Name, "after", took)
			}
			return nil
		}
		if wctx.Err() == nil || last == nil {
			// A probe cut short by the end of the budget tells nothing
			// new; the one before it tells more.
			last = err
		}
		if p > reached {
			reached, since = p, time.Now()
			phases.Set(n.Name, reached.String())
			if c.Log != nil {
				c.Log.Info("Windows node boot", "node", n.Name, "phase", reached.String(), "after", ui.FormatDuration(since.Sub(began)))
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &bootTimeoutError{Node: n, Cluster: c.Config.Name, Phase: reached, After: budget, InPhase: time.Since(since), Last: last}
		case <-time.After(windowsBootPoll):
		}
	}
}

// probeWindows returns which phase the node is in; nil error means booted.
func probeWindows(ctx context.Context, c *Context, n config.Node) (bootPhase, error) {
	h, err := c.Node(ctx, n.Name)
	if err != nil {
		return phaseSetup, err
	}
	if err := h.Connect(ctx); err != nil {
		var ce *node.ConnectError
		if errors.As(err, &ce) && (ce.Stage == node.StageHostKey || ce.Stage == node.StageAuth) {
			return phaseSeed, err
		}
		return phaseSetup, err
	}
	var out strings.Builder
	err = h.Run(ctx, node.Cmd{Args: node.ScriptArgs(node.PowerShell, bootstrap.WindowsBootScript), Stdout: &out})
	var exit *node.ExitError
	if err != nil && !errors.As(err, &exit) {
		// SSH went away under the probe: a restart, or the seed's
		// restart of sshd. The phases before say which.
		return phaseSetup, err
	}
	// Why the name: hwk-seed restarts sshd with the node's keys before it
	// renames the computer and restarts it, so containerd can run, and SSH
	// answer, on a node about to restart; the name tells those apart.
	name, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
	name = strings.TrimSpace(name)
	if !strings.EqualFold(name, n.Name) {
		// Compared without case: Windows reports its NetBIOS name in
		// upper case.
		return phaseRename, fmt.Errorf("the computer runs as %q, not yet as %s", name, n.Name)
	}
	if err != nil {
		return phaseContainerd, fmt.Errorf("containerd's service does not run yet: %w", err)
	}
	return phaseBooted, nil
}

// bootTimeoutError is a Windows node whose first boot did not end within
// its budget: where it stopped, for how long, and where to look.
type bootTimeoutError struct {
	Node    config.Node
	Cluster string
	Phase   bootPhase
	After   time.Duration
	// InPhase is how long it had been in Phase.
	InPhase time.Duration
	Last    error
}

func (e *bootTimeoutError) Error() string {
	return fmt.Sprintf("node %s stopped at phase %q after %s (in it for the last %s); last check: %v\n  look at %s",
		e.Node.Name, e.Phase.String(), e.After, ui.FormatDuration(e.InPhase), e.Last, e.Phase.lookAt(e.Node, e.Cluster))
}

func (e *bootTimeoutError) Unwrap() error { return e.Last }
