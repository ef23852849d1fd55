package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/windows"

	"github.com/hwk-dev/hwk/internal/drivers/virtualbox"
	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/internal/hostmem"
	"github.com/hwk-dev/hwk/internal/ui"
)

func platform(p *Probes) {
	p.OS = "windows"
	var facts *hostFacts
	read := func(ctx context.Context) (*hostFacts, error) {
		if facts != nil {
			return facts, nil
		}
		// Why: hostFactsScript asks each CIM class for only the
		// properties it needs (-Property): WMI reads the others, some
		// slowly, when they are asked for, and Win32_Processor's all can
		// take seconds
		// (https://learn.microsoft.com/en-us/windows/win32/cimwin32prov/win32-processor,
		// .../win32-computersystem).
		ui.Waiting(ctx, "powershell.exe to read Win32_Processor and Win32_ComputerSystem")
		out, err := hostexec.Output(hostexec.Command(ctx, "powershell.exe", "-NoLogo", "-NoProfile", "-NonInteractive", "-Command", hostFactsScript))
		if err != nil {
			if errors.Is(err, hostexec.ErrNotFound) {
				return nil, errors.New("powershell.exe (Windows PowerShell) is not on PATH")
			}
			if e, ok := errors.AsType[*hostexec.Error](err); ok && e.Code >= 0 {
				return nil, fmt.Errorf("powershell.exe exited with %d: %s", e.Code, e.StderrText())
			}
			return nil, err
		}
		if len(strings.TrimSpace(string(out))) == 0 {
			return nil, errors.New("powershell.exe printed nothing and exited 0: it is not a working Windows PowerShell 5.1 (Wine's, for one, is a stub)")
		}
		f, err := parseHostFacts(out)
		if err != nil {
			return nil, err
		}
		facts = f
		return f, nil
	}
	p.Virtualization = func(ctx context.Context) (Virtualization, error) {
		f, err := read(ctx)
		if err != nil {
			return Virtualization{}, err
		}
		return f.virtualization(), nil
	}
	// Why GlobalMemoryStatusEx (internal/hostmem), not CIM: its Available
	// counts the standby list that Win32_OperatingSystem's
	// FreePhysicalMemory leaves out.
	p.Memory = func(context.Context) (uint64, uint64, error) { return hostmem.Read() }
	p.DiskFree = func(path string) (uint64, error) {
		for {
			var free uint64
			p16, err := windows.UTF16PtrFromString(path)
			if err != nil {
				return 0, err
			}
			err = windows.GetDiskFreeSpaceEx(p16, &free, nil, nil)
			if err == nil {
				return free, nil
			}
			parent := parentDir(path)
			if parent == path {
				return 0, err
			}
			path = parent
		}
	}
	p.VirtualBox = virtualbox.InstallDir
}
