package doctor

import (
	"encoding/json"
	"fmt"
	"strings"
)

// hostFactsScript reads, on a Windows host, what the virtualization check
// needs, from the CIM classes Win32_Processor
// (VirtualizationFirmwareEnabled, VMMonitorModeExtensions) and
// Win32_ComputerSystem (HypervisorPresent), each asking for only those
// properties (-Property: WMI reads the others, some slowly, when they are
// asked for; Win32_Processor's all can take seconds):
// https://learn.microsoft.com/en-us/windows/win32/cimwin32prov/win32-processor,
// .../win32-computersystem. Memory comes from GlobalMemoryStatusEx
// (internal/hostmem), whose Available counts the standby list that
// Win32_OperatingSystem's FreePhysicalMemory leaves out.
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

// virtualization judges the facts. With a hypervisor running, Windows
// reports the firmware setting as off (the hypervisor holds the
// extensions), so a present hypervisor alone means it is on.
func (f *hostFacts) virtualization() Virtualization {
	switch {
	case f.Hypervisor:
		return Virtualization{Enabled: true, Hypervisor: true, Detail: "the Windows hypervisor is running (Hyper-V, WSL2 or the Windows Hypervisor Platform), so the firmware has virtualization on"}
	case f.Firmware:
		return Virtualization{Enabled: true, Detail: "the CPU's virtualization extensions are on in the firmware; no hypervisor runs yet"}
	case f.Extensions:
		return Virtualization{Detail: "the CPU has virtualization extensions, but the firmware has them off"}
	}
	return Virtualization{Detail: "the CPU reports no virtualization extensions"}
}

// Scripts is every PowerShell script this package makes, for the check
// of every script hwk sends to Windows (internal/testing/pscatalog).
func Scripts() map[string]string {
	return map[string]string{"hostFactsScript": hostFactsScript}
}
