package virtualbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// minVersion is the oldest VirtualBox hwk drives: 7.0 renamed the
// modifyvm options hwk uses (--audio-enabled, --uart-mode1) and added the
// virtual TPM Windows nodes get.
var minVersion = version{Major: 7, Minor: 0}

// Preflight implements drivers.Driver. In order, each with its fix:
// VBoxManage installed, VirtualBox 7.0 or newer, its kernel driver loaded
// (Linux), the Windows hypervisor off (or --force), and VT-x/AMD-V on.
func (d *Driver) Preflight(ctx context.Context) (string, error) {
	fail := func(reason, fix string) (string, error) {
		return "", &drivers.UnavailableError{Driver: config.DriverVirtualBox, Reason: reason, Fix: fix}
	}
	drivers.Waiting(ctx, "VBoxManage --version")
	out, err := d.run(ctx, "--version")
	if err != nil {
		if _, ok := err.(*drivers.UnavailableError); ok {
			return "", err
		}
		return fail("VBoxManage --version failed: "+err.Error(), "reinstall VirtualBox 7.0 or newer from https://www.virtualbox.org/wiki/Downloads")
	}
	if strings.Contains(out, "vboxdrv kernel module is not loaded") {
		return fail("VirtualBox's kernel module (vboxdrv) is not loaded, so no VM can start",
			"run `sudo /sbin/vboxconfig` (with this kernel's headers installed), or reinstall VirtualBox; with Secure Boot on, the module must be signed")
	}
	v, ok := parseVersion(out)
	if !ok {
		return fail(fmt.Sprintf("VBoxManage printed no version (%q)", strings.TrimSpace(out)), "reinstall VirtualBox 7.0 or newer from https://www.virtualbox.org/wiki/Downloads")
	}
	if !v.atLeast(minVersion.Major, minVersion.Minor) {
		return fail(fmt.Sprintf("VirtualBox %s is too old: hwk needs 7.0 or newer", v),
			"upgrade VirtualBox from https://www.virtualbox.org/wiki/Downloads")
	}
	var warns []string
	hv, err := d.hypervisor(ctx)
	switch {
	case err != nil:
		warns = append(warns, "could not tell whether the Windows hypervisor runs: "+err.Error())
	case hv && !d.force:
		return fail("the Windows hypervisor is on (Hyper-V, WSL2, Windows Sandbox or the Windows Hypervisor Platform): VirtualBox then runs its VMs through it, slowly and with known failures",
			"use the hyperv driver if this Windows has Hyper-V; or turn the hypervisor off (`bcdedit /set hypervisorlaunchtype off` in an elevated prompt, then restart; this stops WSL2 and Docker Desktop too); or run hwk with --force to use VirtualBox on it anyway")
	case hv:
		warns = append(warns, "the Windows hypervisor is on: VirtualBox runs its VMs through it (--force), slowly")
	}
	info, err := d.run(ctx, "list", "hostinfo")
	if err != nil {
		return fail("VBoxManage list hostinfo failed: "+err.Error(), "start VirtualBox Manager once to see what is wrong, then run hwk again")
	}
	if !hv && hostInfo(info)["Processor supports HW virtualization"] == "no" {
		return fail("the processor's virtualization (Intel VT-x or AMD-V) is off or missing, and VirtualBox 7 runs 64-bit guests only with it",
			"turn on Intel VT-x (\"Virtualization Technology\") or AMD-V (\"SVM Mode\") in the PC's firmware (BIOS/UEFI) settings, then restart")
	}
	detail := "VirtualBox " + v.String()
	if len(warns) > 0 {
		detail += "; warning: " + strings.Join(warns, "; ")
	}
	return detail, nil
}

// hostInfo reads `list hostinfo`: "Field: value" lines.
func hostInfo(out string) map[string]string {
	kv := map[string]string{}
	for _, b := range blocks(out) {
		for k, v := range b.Fields {
			kv[k] = v
		}
	}
	return kv
}

// hypervisorScript asks Windows whether its hypervisor runs; it prints
// True or False.
const hypervisorScript = `(CimCmdlets\Get-CimInstance -ClassName Win32_ComputerSystem).HypervisorPresent`

// Scripts returns the PowerShell scripts the driver runs (on the Windows host),
// for internal/testing/pscatalog's checks.
func Scripts() map[string]string {
	return map[string]string{"hypervisorScript": hypervisorScript}
}

// CheckImage implements drivers.ImageChecker: image is a VDI file.
func (d *Driver) CheckImage(_ context.Context, image string) error {
	_, err := readVDI(image)
	if errors.Is(err, os.ErrNotExist) {
		return &drivers.ImageMissingError{Driver: d.Name(), Image: image, Build: BuildCommand}
	}
	if err != nil {
		return fmt.Errorf("node image: %w; the virtualbox driver boots the vdi format (`%s`)", err, BuildCommand)
	}
	return nil
}
