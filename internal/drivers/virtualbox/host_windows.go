package virtualbox

import (
	"context"
	"os"
	"strings"

	"golang.org/x/sys/windows/registry"

	"github.com/hwk-dev/hwk/internal/hostexec"
)

// InstallDir returns where VirtualBox is installed, "" when it is not: its MSI
// sets VBOX_MSI_INSTALL_PATH and records InstallDir in the registry.
func InstallDir() string {
	if d := os.Getenv("VBOX_MSI_INSTALL_PATH"); d != "" {
		return d
	}
	return installDir()
}

// installDir returns VirtualBox's install directory as its installer records
// it in the registry.
func installDir() string {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SOFTWARE\Oracle\VirtualBox`, registry.QUERY_VALUE)
	if err != nil {
		return ""
	}
	defer k.Close()
	d, _, err := k.GetStringValue("InstallDir")
	if err != nil {
		return ""
	}
	return d
}

// hypervisorPresent reports whether Windows' hypervisor runs (Hyper-V,
// WSL2, the Windows Hypervisor Platform), through which VirtualBox then
// runs its VMs.
func hypervisorPresent(ctx context.Context) (bool, error) {
	out, err := hostexec.Output(hostexec.Command(ctx, "powershell.exe", "-NoLogo", "-NoProfile", "-NonInteractive", "-Command", hypervisorScript))
	if err != nil {
		return false, err
	}
	return strings.EqualFold(strings.TrimSpace(string(out)), "True"), nil
}
