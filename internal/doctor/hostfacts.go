package doctor

import (
	"encoding/json"
	"fmt"
	"strings"
)

// hostFactsScript prints, as one JSON object, what the virtualization
// check needs of a Windows host: Win32_Processor's
// VirtualizationFirmwareEnabled and VMMonitorModeExtensions, and
// Win32_ComputerSystem's HypervisorPresent.
const hostFactsScript = `$ErrorActionPreference = 'Stop'
$cpu = CimCmdlets\Get-CimInstance -ClassName Win32_Processor -Property @('VirtualizationFirmwareEnabled', 'VMMonitorModeExtensions') | Microsoft.PowerShell.Utility\Select-Object -First 1
$cs = CimCmdlets\Get-CimInstance -ClassName Win32_ComputerSystem -Property HypervisorPresent
[pscustomobject]@{
    firmware   = [bool]$cpu.VirtualizationFirmwareEnabled
    extensions = [bool]$cpu.VMMonitorModeExtensions
    hypervisor = [bool]$cs.HypervisorPresent
} | Microsoft.PowerShell.Utility\ConvertTo-Json -Compress
`

// hostFacts is hostFactsScript's answer.
type hostFacts struct {
	Firmware   bool `json:"firmware"`
	Extensions bool `json:"extensions"`
	Hypervisor bool `json:"hypervisor"`
}

func parseHostFacts(out []byte) (*hostFacts, error) {
	var f hostFacts
	// Windows PowerShell 5.1 may start its output with a BOM.
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(string(out)), "\ufeff")), &f); err != nil {
		return nil, fmt.Errorf("read the host's facts from PowerShell: %w (it said %q)", err, out)
	}
	return &f, nil
}

// virtualization returns the facts' verdict; a present hypervisor alone
// means virtualization is on.
func (f *hostFacts) virtualization() Virtualization {
	switch {
	case f.Hypervisor:
		// Why: with a hypervisor running, Windows reports the firmware
		// setting as off (the hypervisor holds the extensions).
		return Virtualization{Enabled: true, Hypervisor: true, Detail: "the Windows hypervisor is running (Hyper-V, WSL2 or the Windows Hypervisor Platform), so the firmware has virtualization on"}
	case f.Firmware:
		return Virtualization{Enabled: true, Detail: "the CPU's virtualization extensions are on in the firmware; no hypervisor runs yet"}
	case f.Extensions:
		return Virtualization{Detail: "the CPU has virtualization extensions, but the firmware has them off"}
	}
	return Virtualization{Detail: "the CPU reports no virtualization extensions"}
}

// Scripts returns every PowerShell script this package makes, for the check
// of every script hwk sends to Windows (internal/testing/pscatalog).
func Scripts() map[string]string {
	return map[string]string{"hostFactsScript": hostFactsScript}
}
