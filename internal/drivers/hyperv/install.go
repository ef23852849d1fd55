package hyperv

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hwk-dev/hwk/drivers"
)

// InstallFormat implements drivers.Installer.
func (d *Driver) InstallFormat() string { return "vhdx" }

// installPoll is how often Install looks at the VM.
var installPoll = 5 * time.Second

// pressSeconds is how long Install keeps pressing a key for the media's
// "Press any key to boot from CD or DVD" prompt: Hyper-V reaches it in a
// few seconds.
const pressSeconds = 30

// Install implements drivers.Installer: the install VM writes its disk at
// spec.Disk (Hyper-V works on the VHDX in place), COM1 goes to a named
// pipe that hwk copies to spec.ConsoleLog, and when the VM is off it is
// removed and the disk kept. Hyper-V does not report why a VM went off:
// the caller reads the console to tell a finished install from a failed one.
func (d *Driver) Install(ctx context.Context, spec drivers.InstallSpec) (err error) {
	if len(spec.Media) == 0 || spec.Disk == "" || spec.DiskBytes <= 0 || spec.CPUs < 1 || spec.MemoryBytes < 512<<20 {
		return fmt.Errorf("install %s: needs media, a disk, CPUs and at least 512 MiB of memory", spec.Name)
	}
	dir := filepath.Join(filepath.Dir(spec.Disk), spec.Name)
	// An earlier attempt's VM goes first.
	if err := d.run(ctx, removeInstallScript(spec.Name, spec.Disk, false), nil); err != nil {
		return fmt.Errorf("install %s: remove an earlier attempt: %w", spec.Name, err)
	}
	defer func() {
		// The VM goes whatever happened; the disk stays only when the
		// install ended. A cancelled ctx must not stop the clean-up.
		cleanup := context.WithoutCancel(ctx)
		if rerr := d.run(cleanup, removeInstallScript(spec.Name, spec.Disk, err == nil), nil); rerr != nil && err == nil {
			err = fmt.Errorf("install %s: remove the VM: %w", spec.Name, rerr)
		}
	}()
	stop, console := d.followPipe(ctx, pipeName(spec.Name), spec.ConsoleLog)
	defer stop()
	if err := d.run(ctx, installScript(spec.Name, dir, spec.Disk, spec.DiskBytes, spec.CPUs, spec.MemoryBytes, spec.Media), nil); err != nil {
		return fmt.Errorf("install %s: make and start the VM: %w", spec.Name, err)
	}
	if spec.PressKey {
		if err := d.run(ctx, pressKeyScript(spec.Name, pressSeconds), nil); err != nil {
			return fmt.Errorf("install %s: press a key for the boot prompt: %w", spec.Name, err)
		}
	}
	for {
		var st string
		if err := d.run(ctx, stateScript(spec.Name), &st); err != nil {
			return fmt.Errorf("install %s: %w", spec.Name, err)
		}
		switch st {
		case "Off":
			return nil
		case "":
			return fmt.Errorf("install %s: the VM was removed from outside", spec.Name)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("install %s: %w", spec.Name, ctx.Err())
		case err := <-console:
			return fmt.Errorf("install %s: %w", spec.Name, err)
		case <-time.After(installPoll):
		}
	}
}
