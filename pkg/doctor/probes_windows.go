package doctor

import (
	"context"
	"errors"
	"os/exec"

	"golang.org/x/sys/windows"

	"github.com/hwk-dev/hwk/drivers/virtualbox"
)

func platform(p *Probes) {
	p.OS = "windows"
	var facts *hostFacts
	read := func(ctx context.Context) (*hostFacts, error) {
		if facts != nil {
			return facts, nil
		}
		out, err := exec.CommandContext(ctx, "powershell.exe", "-NoLogo", "-NoProfile", "-NonInteractive", "-Command", hostFactsScript).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return nil, errors.New(string(ee.Stderr))
			}
			return nil, err
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
	p.Memory = func(ctx context.Context) (uint64, uint64, error) {
		f, err := read(ctx)
		if err != nil {
			return 0, 0, err
		}
		return f.TotalKiB << 10, f.FreeKiB << 10, nil
	}
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
