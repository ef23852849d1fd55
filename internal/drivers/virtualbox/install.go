package virtualbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hwk-dev/hwk/drivers"
)

// InstallFormat implements drivers.Installer.
func (d *Driver) InstallFormat() string { return "vdi" }

// pressFor and pressEvery are how long, and how often, Install presses
// the space bar for the media's "Press any key to boot from CD or DVD"
// prompt, which VirtualBox's EFI reaches within seconds.
var (
	pressFor   = 30 * time.Second
	pressEvery = 2 * time.Second
)

// spaceScancodes are the space bar's make and break codes (PC scan code
// set 1), as keyboardputscancode takes them.
var spaceScancodes = []string{"39", "b9"}

// Install implements drivers.Installer: a VM with an empty VDI at
// spec.Disk, the media as SATA DVDs (the first booted, under EFI with a
// TPM as Windows Server 2025 wants), COM1 logged to spec.ConsoleLog and no
// network; when the guest has powered itself off, the VM is removed and
// the disk kept.
func (d *Driver) Install(ctx context.Context, spec drivers.InstallSpec) (err error) {
	if len(spec.Media) == 0 || spec.Disk == "" || spec.DiskBytes <= 0 || spec.CPUs < 1 || spec.MemoryBytes < 512<<20 {
		return fmt.Errorf("install %s: needs media, a disk, CPUs and at least 512 MiB of memory", spec.Name)
	}
	dir := filepath.Join(filepath.Dir(spec.Disk), spec.Name)
	// An earlier attempt's VM and disk go first.
	if err := d.removeInstall(ctx, spec, false); err != nil {
		return fmt.Errorf("install %s: remove an earlier attempt: %w", spec.Name, err)
	}
	defer func() {
		// The VM goes whatever happened; the disk stays only when the
		// install ended. A cancelled ctx must not stop the clean-up.
		if rerr := d.removeInstall(context.WithoutCancel(ctx), spec, err == nil); rerr != nil && err == nil {
			err = fmt.Errorf("install %s: remove the VM: %w", spec.Name, rerr)
		}
	}()
	if err := d.makeInstallVM(ctx, spec, dir); err != nil {
		return fmt.Errorf("install %s: %w", spec.Name, err)
	}
	if _, err := d.run(ctx, "startvm", spec.Name, "--type", "headless"); err != nil {
		return fmt.Errorf("install %s: start the VM: %w", spec.Name, err)
	}
	pressUntil := time.Now().Add(pressFor)
	for {
		if spec.PressKey && time.Now().Before(pressUntil) {
			args := append([]string{"controlvm", spec.Name, "keyboardputscancode"}, spaceScancodes...)
			if _, err := d.run(ctx, args...); err != nil {
				return fmt.Errorf("install %s: press a key for the boot prompt: %w", spec.Name, err)
			}
		}
		v, err := d.showVM(ctx, spec.Name)
		if err != nil {
			return fmt.Errorf("install %s: %w", spec.Name, err)
		}
		switch {
		case v == nil:
			return fmt.Errorf("install %s: the VM was removed from outside", spec.Name)
		case v.State == "poweroff":
			return nil
		case v.State == "aborted" || v.State == "gurumeditation":
			return fmt.Errorf("install %s: the VM stopped with state %s (see its log in %s)", spec.Name, v.State, dir)
		}
		wait := pollEvery * 5
		if spec.PressKey && time.Now().Before(pressUntil) {
			wait = pressEvery
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("install %s: %w", spec.Name, ctx.Err())
		case <-time.After(wait):
		}
	}
}

func (d *Driver) makeInstallVM(ctx context.Context, spec drivers.InstallSpec, dir string) error {
	if _, err := d.run(ctx, "createmedium", "disk", "--filename", spec.Disk, "--size", strconv.FormatInt(spec.DiskBytes>>20, 10), "--format", "VDI"); err != nil {
		return fmt.Errorf("make the disk: %w", err)
	}
	if _, err := d.run(ctx, "createvm", "--name", spec.Name, "--ostype", "Windows2022_64", "--basefolder", dir, "--register"); err != nil {
		return err
	}
	if _, err := d.run(ctx, "modifyvm", spec.Name,
		"--memory", strconv.FormatInt(spec.MemoryBytes>>20, 10),
		"--cpus", strconv.Itoa(spec.CPUs),
		"--firmware", "efi",
		"--tpm-type", "2.0",
		"--ioapic", "on",
		"--rtc-use-utc", "on",
		"--graphicscontroller", "vboxsvga",
		"--audio-enabled", "off",
		"--nic1", "none",
		"--boot1", "dvd", "--boot2", "disk", "--boot3", "none", "--boot4", "none",
		"--uart1", "0x3F8", "4", "--uart-mode1", "file", spec.ConsoleLog,
	); err != nil {
		return err
	}
	if _, err := d.run(ctx, "storagectl", spec.Name, "--name", controllerName, "--add", "sata", "--controller", "IntelAhci",
		"--portcount", strconv.Itoa(len(spec.Media)+1), "--bootable", "on"); err != nil {
		return err
	}
	// The media first, so that the first is the first DVD the firmware
	// finds; the disk after them.
	for i, m := range spec.Media {
		if _, err := d.run(ctx, "storageattach", spec.Name, "--storagectl", controllerName, "--port", strconv.Itoa(i), "--device", "0",
			"--type", "dvddrive", "--medium", m); err != nil {
			return err
		}
	}
	_, err := d.run(ctx, "storageattach", spec.Name, "--storagectl", controllerName, "--port", strconv.Itoa(len(spec.Media)), "--device", "0",
		"--type", "hdd", "--medium", spec.Disk)
	return err
}

// removeInstall removes the install VM of spec and the media VirtualBox
// registered for it. The installed disk stays on disk when keepDisk is
// set: it is detached first (so that unregistervm --delete leaves it) and
// forgotten after; otherwise it is deleted.
func (d *Driver) removeInstall(ctx context.Context, spec drivers.InstallSpec, keepDisk bool) error {
	v, err := d.showVM(ctx, spec.Name)
	if err != nil {
		return err
	}
	if v != nil {
		if !off(v.State) {
			if _, err := d.run(ctx, "controlvm", spec.Name, "poweroff"); err != nil {
				return err
			}
		}
		if keepDisk {
			if _, err := d.run(ctx, "storageattach", spec.Name, "--storagectl", controllerName, "--port", strconv.Itoa(len(spec.Media)), "--device", "0",
				"--medium", "none"); err != nil {
				return err
			}
		}
		if _, err := d.run(ctx, "unregistervm", spec.Name, "--delete"); err != nil && !IsNotFound(err) {
			return err
		}
	}
	hdds, err := d.listMedia(ctx, "hdds")
	if err != nil {
		return err
	}
	for _, m := range hdds {
		if m.Location != spec.Disk {
			continue
		}
		args := []string{"closemedium", "disk", m.UUID}
		if !keepDisk {
			args = append(args, "--delete")
		}
		if _, err := d.run(ctx, args...); err != nil && !IsNotFound(err) {
			return err
		}
	}
	if !keepDisk {
		if err := os.Remove(spec.Disk); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
