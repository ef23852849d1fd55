package build

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/hwk-dev/hwk/internal/format/diskimage"
	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// formats converts the installed disk to every format asked for; the
// install's own format is the installed disk itself, moved last, so that
// a host without qemu-img (a Windows laptop) can build the one format its
// driver boots.
func (wb *windowsBuilder) formats(ctx context.Context, m *nodeimage.Manifest) error {
	from := nodeimage.Format(wb.w.Installer.InstallFormat())
	src := filepath.Join(wb.work, "disk."+string(from))
	order := slices.Clone(wb.w.Formats)
	slices.SortStableFunc(order, func(a, b nodeimage.Format) int {
		return boolInt(a == from) - boolInt(b == from)
	})
	for _, f := range order {
		dst := filepath.Join(wb.dir, "disk."+string(f))
		label, convert := "Convert the disk to "+string(f), func() error { return convertDisk(ctx, wb.opts.Log, src, string(from), dst, f) }
		if f == from {
			label, convert = "Keep the disk as "+string(f), func() error { return os.Rename(src, dst) }
		}
		err := wb.step(label, func() error {
			if err := convert(); err != nil {
				return err
			}
			return wb.record(m, f, dst)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// qemuFormat is qemu-img's name and options for each disk format: VHDX
// dynamic (Hyper-V's differencing disks need a dynamic or fixed parent),
// VDI dynamic, qcow2 compact.
var qemuFormat = map[nodeimage.Format][]string{
	nodeimage.FormatQCOW2: {"-O", "qcow2"},
	nodeimage.FormatVHDX:  {"-O", "vhdx", "-o", "subformat=dynamic"},
	nodeimage.FormatVDI:   {"-O", "vdi"},
}

// convertDisk writes src (of format from) as dst in format to, through a
// temporary file.
func convertDisk(ctx context.Context, log io.Writer, src, from string, dst string, to nodeimage.Format) error {
	args := append([]string{"convert", "-f", from}, qemuFormat[to]...)
	args = append(args, src, dst+".tmp")
	qemuImg, err := diskimage.QemuImg()
	if err != nil {
		return fmt.Errorf("converting disks needs qemu-img: %w", err)
	}
	cmd := hostexec.Command(ctx, qemuImg, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := hostexec.Run(cmd); err != nil {
		os.Remove(dst + ".tmp")
		return fmt.Errorf("convert the disk to %s: %w", to, err)
	}
	return os.Rename(dst+".tmp", dst)
}
