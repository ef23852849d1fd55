//go:build !windows

package virtualbox

import "context"

// installDir returns "": VirtualBox's install directory comes from the
// registry, which only Windows has.
func installDir() string { return "" }

// hypervisorPresent reports false: only on Windows does another hypervisor
// take the CPU's virtualization from VirtualBox while the host runs.
func hypervisorPresent(context.Context) (bool, error) { return false, nil }
