// Package diskimage turns a node rootfs into the VM disk formats hwk's
// drivers boot (qcow2 for libvirt, VHDX for Hyper-V, VDI for VirtualBox),
// reads their headers back, and boot-tests a disk under QEMU.
//
// There are two ways to the raw GPT disk, which hold the same layout (an
// EFI system partition with systemd-boot, the kernel and the initramfs,
// then an ext4 root named by PARTUUID):
//
//   - Build, which the node-image build uses today, runs a shell recipe
//     (node-images/linux/disk.sh, passed in by the caller) on a rootfs
//     directory. It needs a Linux host with mkfs.ext4, mkfs.fat, mtools and
//     sgdisk, and root to read every file; qemu-img then converts the raw
//     disk to each format.
//   - WriteRawDisk writes the raw disk in Go (github.com/diskfs/go-diskfs)
//     from a tar stream of the rootfs, never unpacked on the host: no tool,
//     no root, any OS. What of a tar it cannot put in the ext4 (hard links
//     become copies; device nodes outside /dev, most extended attributes and
//     a path given twice are errors) is listed at writeRoot. Nothing calls
//     it in the build yet, and it makes the raw disk only.
//
// WriteQCOW2, WriteVDI and WriteVHDX turn a raw disk into qcow2, VDI or
// VHDX in Go, as qemu-img convert does in Build, reading only the raw
// disk's data: with WriteRawDisk they make a node disk with no tool.
// Nothing calls them in the build yet.
//
// The package compiles everywhere; Build and the QEMU helpers need their
// tools at run time.
package diskimage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Formats are the disk formats Build converts to, in the order it does.
var Formats = []string{"qcow2", "vhdx", "vdi"}

// Raw names the raw disk as a format: Build keeps it only when asked for it.
const Raw = "raw"

// convertArgs are qemu-img convert's output options per format.
var convertArgs = map[string][]string{
	// Uncompressed. On a 20 GiB Debian node disk (430 MiB of files) the
	// conversion took 0.5 s for a 460 MiB file; -c took 23 s (zlib) or
	// 3.3 s (compression_type=zstd, which QEMU before 5.1 cannot read) to
	// halve it. Not worth it for a disk that every node reads through, and
	// whose VHDX and VDI siblings cannot be compressed anyway.
	"qcow2": {"-O", "qcow2"},
	// Dynamic: grows as the guest writes, like the other two. 1 MiB
	// blocks, as Microsoft advises for Linux guests on Hyper-V, not QEMU's
	// default (16 MiB at 20 GiB) or Hyper-V's 32 MiB: ext4 spreads its
	// metadata and files over the whole disk, and larger blocks allocate
	// mostly zeros around them (864 MB of file against 518 MB here).
	"vhdx": {"-O", "vhdx", "-o", "subformat=dynamic,block_size=1M"},
	// qemu-img's VDI is dynamic unless static=on.
	"vdi": {"-O", "vdi"},
}

// tailLines is how much of a failed command's output an error quotes.
const tailLines = 20

// Build runs script (disk.sh) with sh to make a raw disk of size bytes
// (rounded down to a whole MiB) from the rootfs directory, then converts it
// with qemu-img to each of formats, as disk.<format> in outDir. It returns
// the path of each. The raw disk is removed at the end unless formats asks
// for Raw. Command output goes to log; an error quotes its last lines.
func Build(ctx context.Context, script []byte, rootfs, outDir string, size int64, formats []string, log io.Writer) (map[string]string, error) {
	if log == nil {
		log = io.Discard
	}
	if len(formats) == 0 {
		return nil, errors.New("build disk image: no formats asked for")
	}
	keepRaw := false
	var convert []string
	for _, f := range formats {
		switch {
		case f == Raw:
			keepRaw = true
		case convertArgs[f] != nil:
			if !slices.Contains(convert, f) {
				convert = append(convert, f)
			}
		default:
			return nil, fmt.Errorf("build disk image: unknown format %q (want %s or %s)", f, strings.Join(Formats, ", "), Raw)
		}
	}
	// Both checked before the script runs, which takes a while.
	sh, err := exec.LookPath("sh")
	if err != nil {
		return nil, fmt.Errorf("build disk image: the disk recipe needs a POSIX sh and Linux tools (mkfs.ext4, mtools, sgdisk): %w", err)
	}
	qemuImg := ""
	if len(convert) > 0 {
		if qemuImg, err = lookQemuImg(); err != nil {
			return nil, fmt.Errorf("build disk image: %w", err)
		}
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("build disk image: %w", err)
	}

	f, err := os.CreateTemp("", "hwk-disk-*.sh")
	if err != nil {
		return nil, fmt.Errorf("build disk image: write the disk recipe: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(script)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("build disk image: write the disk recipe: %w", err)
	}

	raw := filepath.Join(outDir, "disk.raw")
	if !keepRaw {
		defer os.Remove(raw)
	}
	if err := run(ctx, log, "disk recipe", sh, f.Name(), rootfs, raw, fmt.Sprint(size)); err != nil {
		return nil, fmt.Errorf("build disk image from %s: %w", rootfs, err)
	}
	out := map[string]string{}
	if keepRaw {
		out[Raw] = raw
	}
	for _, format := range convert {
		dst := filepath.Join(outDir, "disk."+format)
		// A temporary name, so a failed or interrupted conversion never
		// leaves a truncated disk.<format> to be mistaken for a good one.
		tmp := dst + ".part"
		args := slices.Concat([]string{"convert", "-f", "raw"}, convertArgs[format], []string{raw, tmp})
		if err := run(ctx, log, "qemu-img convert", qemuImg, args...); err != nil {
			os.Remove(tmp)
			return nil, fmt.Errorf("build disk image: convert to %s: %w", format, err)
		}
		if err := os.Rename(tmp, dst); err != nil {
			os.Remove(tmp)
			return nil, fmt.Errorf("build disk image: %w", err)
		}
		out[format] = dst
	}
	return out, nil
}

// Info reads a disk image's format and virtual size (in bytes) with
// qemu-img info.
func Info(ctx context.Context, path string) (format string, virtualSize int64, err error) {
	qemuImg, err := lookQemuImg()
	if err != nil {
		return "", 0, fmt.Errorf("disk image info: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, qemuImg, "info", "--output=json", path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", 0, fmt.Errorf("qemu-img info %s: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &info); err != nil {
		return "", 0, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	return info.Format, info.VirtualSize, nil
}

func lookQemuImg() (string, error) {
	p, err := exec.LookPath("qemu-img")
	if err != nil {
		return "", fmt.Errorf("qemu-img is not installed (Debian/Ubuntu: apt-get install qemu-utils): %w", err)
	}
	return p, nil
}

// run runs a command with its output going to log, and on failure returns
// an error, led by desc, that quotes the output's last lines.
func run(ctx context.Context, log io.Writer, desc, name string, args ...string) error {
	var tail tailBuffer
	w := io.MultiWriter(log, &tail)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Cancel = func() error {
		if runtime.GOOS == "windows" {
			return cmd.Process.Kill()
		}
		// SIGTERM, not SIGKILL: disk.sh traps it to remove its scratch
		// files and the half-made disk. Its sh runs the trap only once the
		// tool it is waiting for ends; WaitDelay bounds that wait.
		return cmd.Process.Signal(syscall.SIGTERM)
	}
	// Also bounds the wait for output from a child that outlives sh and
	// still holds the output pipe.
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	if lines := tail.Lines(tailLines); len(lines) > 0 {
		return fmt.Errorf("%s: %w; its last output:\n%s", desc, err, strings.Join(lines, "\n"))
	}
	return fmt.Errorf("%s: %w", desc, err)
}

// tailBuffer keeps the end of what is written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

// tailKeep bounds the buffer: enough for a few dozen long lines.
const tailKeep = 16 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailKeep; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Lines returns up to the last n lines written, without their line ends.
func (t *tailBuffer) Lines(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLines(string(t.buf), n)
}

func lastLines(s string, n int) []string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\r", ""), "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	return lines[max(0, len(lines)-n):]
}
