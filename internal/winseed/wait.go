package winseed

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/internal/powershell"
)

// ImageStateComplete is the ImageState Windows Setup leaves once a
// machine has finished its specialize and OOBE passes (Microsoft,
// "Windows Setup States": the values are IMAGE_STATE_COMPLETE,
// IMAGE_STATE_UNDEPLOYABLE, IMAGE_STATE_GENERALIZE_RESEAL_TO_OOBE,
// IMAGE_STATE_SPECIALIZE_RESEAL_TO_OOBE, and their _TO_AUDIT twins).
const ImageStateComplete = "IMAGE_STATE_COMPLETE"

// Adapter is a physical network adapter as Get-NetAdapter reports it.
type Adapter struct {
	Name    string `json:"Name"`
	IfIndex int    `json:"ifIndex"`
	// Status is Get-NetAdapter's text: Up, Disconnected, Disabled, Not
	// Present.
	Status string `json:"Status"`
}

// Probe asks the machine how far Setup and its network are.
type Probe interface {
	// ImageState is Setup's ImageState value, "" when there is none.
	ImageState(ctx context.Context) (string, error)
	// Adapters are the machine's physical adapters.
	Adapters(ctx context.Context) ([]Adapter, error)
}

// Wait is how long WaitReady waits.
type Wait struct {
	// Poll is the pause between two questions.
	Poll time.Duration
	// Adapter bounds the wait for the one adapter to be Up; Setup's wait
	// has no bound, as a restart ends it.
	Adapter time.Duration
	// Log gets a line when a wait begins and when a question fails.
	Log io.Writer
}

// DefaultWait is hwk-seed's: a NIC gets two minutes to come up.
var DefaultWait = Wait{Poll: 2 * time.Second, Adapter: 2 * time.Minute}

// WaitReady waits until Windows Setup has finished with the machine (with
// no bound except ctx), then up to w.Adapter until exactly one physical
// adapter is Up, and returns that adapter.
func WaitReady(ctx context.Context, p Probe, w Wait) (Adapter, error) {
	// Why: a clone's first boots run Setup's specialize and OOBE passes,
	// which start services, hwk-seed's task among them; renaming or
	// restarting the computer then would fight Setup's own ComputerName
	// and can break it.
	if err := w.setup(ctx, p); err != nil {
		return Adapter{}, err
	}
	// Why: the adapter may come up some time after the task starts.
	return w.adapter(ctx, p)
}

func (w Wait) logf(format string, args ...any) {
	if w.Log != nil {
		fmt.Fprintf(w.Log, "hwk-seed: "+format+"\n", args...)
	}
}

// setup waits for ImageStateComplete, with no bound.
func (w Wait) setup(ctx context.Context, p Probe) error {
	said, first := "", true
	for {
		state, err := p.ImageState(ctx)
		switch {
		case err != nil:
			w.logf("read Setup's ImageState: %v (asking again)", err)
		case state == ImageStateComplete:
			return nil
		case first || state != said:
			w.logf("Windows Setup is at %s; waiting for %s", orNone(state), ImageStateComplete)
			said, first = state, false
		}
		if err := sleep(ctx, w.Poll); err != nil {
			return err
		}
	}
}

// adapter waits up to w.Adapter for exactly one physical adapter Up.
func (w Wait) adapter(ctx context.Context, p Probe) (Adapter, error) {
	deadline := time.Now().Add(w.Adapter)
	last := ""
	for {
		all, err := p.Adapters(ctx)
		var up []Adapter
		for _, a := range all {
			if a.Status == "Up" {
				up = append(up, a)
			}
		}
		switch {
		case err != nil:
			last = err.Error()
			w.logf("list the network adapters: %v (asking again)", err)
		case len(up) == 1:
			return up[0], nil
		default:
			if now := describe(all); now != last {
				w.logf("want one physical network adapter Up, have %s; waiting", now)
				last = now
			}
		}
		if !time.Now().Before(deadline) {
			return Adapter{}, fmt.Errorf("want one physical network adapter Up, still have %s after %v; check the VM's network adapter (hwk gives a node exactly one)", last, w.Adapter)
		}
		if err := sleep(ctx, w.Poll); err != nil {
			return Adapter{}, err
		}
	}
}

func orNone(state string) string {
	if state == "" {
		return "no ImageState"
	}
	return state
}

func describe(all []Adapter) string {
	if len(all) == 0 {
		return "none"
	}
	parts := make([]string, len(all))
	for i, a := range all {
		parts[i] = fmt.Sprintf("%s (%s)", a.Name, a.Status)
	}
	return strings.Join(parts, ", ")
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// The questions PowerShell asks for PowerShellProbe. Get-ItemProperty's
// property prints as the bare string, nothing when there is none.
// ConvertTo-Json gets the adapters through a pipeline, which unrolls them:
// it prints one adapter as an object, several as an array, and nothing at
// all for none.
const (
	imageStateQuery = `$ErrorActionPreference = 'Stop'
(Microsoft.PowerShell.Management\Get-ItemProperty -LiteralPath 'HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion\Setup\State' -Name ImageState -ErrorAction SilentlyContinue).ImageState
`
	adaptersQuery = `$ErrorActionPreference = 'Stop'
NetAdapter\Get-NetAdapter -Physical | Microsoft.PowerShell.Utility\Select-Object -Property 'Name', 'ifIndex', 'Status' | Microsoft.PowerShell.Utility\ConvertTo-Json -Compress
`
)

// PowerShellProbe asks Windows PowerShell (powershell.exe on PATH).
type PowerShellProbe struct{}

// ImageState implements Probe.
func (PowerShellProbe) ImageState(ctx context.Context) (string, error) {
	out, err := runPowerShell(ctx, imageStateQuery)
	return strings.TrimSpace(out), err
}

// Adapters implements Probe.
func (PowerShellProbe) Adapters(ctx context.Context) ([]Adapter, error) {
	out, err := runPowerShell(ctx, adaptersQuery)
	if err != nil {
		return nil, err
	}
	return parseAdapters(out)
}

// parseAdapters reads ConvertTo-Json's output: nothing, an object or an
// array of objects.
func parseAdapters(out string) ([]Adapter, error) {
	out = strings.TrimSpace(out)
	var all []Adapter
	switch {
	case out == "":
		return nil, nil
	case strings.HasPrefix(out, "{"):
		var a Adapter
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			return nil, fmt.Errorf("read the adapters' JSON: %w", err)
		}
		all = []Adapter{a}
	default:
		if err := json.Unmarshal([]byte(out), &all); err != nil {
			return nil, fmt.Errorf("read the adapters' JSON: %w", err)
		}
	}
	return all, nil
}

// runPowerShell runs script in Windows PowerShell and returns its output.
func runPowerShell(ctx context.Context, script string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := hostexec.Command(ctx, "powershell.exe", powershell.Args(script)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// The error record is CLIXML: the command is encoded and stderr
		// is a pipe.
		if msg := strings.TrimSpace(powershell.ErrorText(stderr.String())); msg != "" {
			return "", fmt.Errorf("powershell.exe: %w: %s", err, msg)
		}
		return "", fmt.Errorf("powershell.exe: %w", err)
	}
	return stdout.String(), nil
}
