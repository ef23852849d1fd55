package hyperv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// hostFacts is what preflightScript reports.
type hostFacts struct {
	Build             int  `json:"build"`
	HypervisorPresent bool `json:"hypervisorPresent"`
	// FeatureState is Win32_OptionalFeature's InstallState: 1 enabled,
	// 2 disabled, 3 absent, 0 when the class had no such feature.
	FeatureState  int       `json:"featureState"`
	Module        bool      `json:"module"`
	RebootPending bool      `json:"rebootPending"`
	VMMS          string    `json:"vmms"`
	Elevated      bool      `json:"elevated"`
	HypervAdmin   bool      `json:"hypervAdmin"`
	VirtualBox    bool      `json:"virtualBox"`
	NATs          []natInfo `json:"nats"`
}

// Preflight implements drivers.Driver. In order, each with its fix:
// Hyper-V enabled, Windows restarted since, the hypervisor running, its
// management service running, the user allowed to manage VMs (elevated or
// in Hyper-V Administrators, S-1-5-32-578), and no NAT except hwk's (see
// otherNAT). VirtualBox running is a warning in the result.
func (d *Driver) Preflight(ctx context.Context) (string, error) {
	var f hostFacts
	if err := d.ps.Run(ctx, preflightScript(), &f); err != nil {
		if errors.Is(err, errNoPowerShell) {
			return "", &drivers.UnavailableError{Driver: config.DriverHyperV, Reason: err.Error(),
				Fix: "use the libvirt or docker driver on Linux, virtualbox on macOS; Hyper-V needs Windows 10/11 Pro or Enterprise, or Windows Server"}
		}
		return "", &drivers.UnavailableError{Driver: config.DriverHyperV, Reason: "checking the host failed: " + err.Error(), Fix: "run `Get-Module -ListAvailable Hyper-V` in PowerShell to see what is wrong"}
	}
	return judge(f)
}

// errNoPowerShell marks a host where PowerShell could not start.
var errNoPowerShell = errors.New("no PowerShell")

// judge turns the host's facts into Preflight's verdict.
func judge(f hostFacts) (string, error) {
	fail := func(reason, fix string) (string, error) {
		return "", &drivers.UnavailableError{Driver: config.DriverHyperV, Reason: reason, Fix: fix}
	}
	switch {
	case !f.Module || f.FeatureState == 2 || f.FeatureState == 3:
		return fail("Hyper-V is not enabled on this Windows",
			"in an elevated PowerShell: `Enable-WindowsOptionalFeature -Online -FeatureName Microsoft-Hyper-V -All`, then restart Windows (Windows Home has no Hyper-V: use the virtualbox driver)")
	case f.RebootPending:
		return fail("Windows has changes waiting for a restart (Hyper-V was just enabled, or an update is pending)",
			"restart Windows, then run hwk again")
	case !f.HypervisorPresent:
		return fail("Hyper-V is enabled but the hypervisor is not running",
			"turn on virtualization (Intel VT-x / AMD-V) in the PC's firmware settings, run `bcdedit /set hypervisorlaunchtype auto` in an elevated prompt, and restart")
	case f.VMMS != "Running":
		return fail(fmt.Sprintf("the Hyper-V Virtual Machine Management service (vmms) is %s", orNone(f.VMMS)),
			"in an elevated PowerShell: `Start-Service vmms`")
	case !f.Elevated && !f.HypervAdmin:
		return fail("you may not manage Hyper-V VMs: this PowerShell is not elevated and you are not in Hyper-V Administrators",
			"in an elevated PowerShell: `Add-LocalGroupMember -SID 'S-1-5-32-578' -Member $env:USERNAME`, then sign out and in again (or run hwk as administrator)")
	}
	for _, n := range f.NATs {
		p, err := netip.ParsePrefix(n.Prefix)
		if err != nil || (n.Name == natName && p == natPrefix) {
			continue
		}
		if p.Overlaps(natPrefix) {
			return fail(fmt.Sprintf("the host's NAT %s (%s) overlaps %s, the range hwk's Hyper-V NAT uses", quote(n.Name), n.Prefix, natPrefix),
				"remove it if nothing uses it: `NetNat\\Remove-NetNat -Name "+quote(n.Name)+"` (elevated)")
		}
	}
	if err := otherNAT(f.NATs); err != nil {
		return "", err
	}
	who := "Hyper-V Administrators"
	if f.Elevated {
		who = "elevated"
	}
	detail := fmt.Sprintf("Hyper-V on Windows build %d, %s", f.Build, who)
	var warns []string
	if f.VirtualBox {
		warns = append(warns, "VirtualBox is running: with Hyper-V on, its VMs run through the Windows Hypervisor Platform and are slow")
	}
	if !f.Elevated && !hasNAT(f.NATs) {
		warns = append(warns, "hwk's NAT is not made yet: the first `hwk up` needs an elevated PowerShell")
	}
	if len(warns) > 0 {
		detail += "; warning: " + strings.Join(warns, "; ")
	}
	return detail, nil
}

func hasNAT(nats []natInfo) bool {
	for _, n := range nats {
		if n.Name == natName && n.Prefix == natPrefix.String() {
			return true
		}
	}
	return false
}

func orNone(s string) string {
	if s == "" {
		return "not installed"
	}
	return strings.ToLower(s)
}

// CheckImage implements drivers.ImageChecker: image is a VHDX file.
func (d *Driver) CheckImage(_ context.Context, image string) error {
	f, err := os.Open(image)
	if errors.Is(err, os.ErrNotExist) {
		return &drivers.ImageMissingError{Driver: d.Name(), Image: image, Build: BuildCommand}
	}
	if err != nil {
		return err
	}
	defer f.Close()
	// A VHDX starts with its file type identifier, "vhdxfile".
	head := make([]byte, 8)
	if _, err := io.ReadFull(f, head); err != nil || string(head) != "vhdxfile" {
		return fmt.Errorf("node image %s is not a VHDX disk; the hyperv driver boots the vhdx format (`%s`)", image, BuildCommand)
	}
	return nil
}
