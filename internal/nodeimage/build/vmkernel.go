package build

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/debian"
	"github.com/hwk-dev/hwk/internal/download"
	"github.com/hwk-dev/hwk/internal/format/diskimage"
	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/node-images/linux"
)

// vmInit is PID 1 of the configure VM; see the file for the protocol.
//
//go:embed vminit.sh
var vmInit string

// vmInitName is where vmInit sits in the root: beside /hwk, not in it,
// since the kernel's files go into the tar before /hwk does.
const vmInitName = "hwk-vminit.sh"

// Where vminit.sh puts its results on the output disk.
const (
	vmLogOffset = 4096
	vmTarOffset = 64 << 20
)

// vmKernel runs stage 2 in a VM of a hypervisor driver (a
// drivers.KernelBooter), for a host with neither Docker nor WSL 2.
type vmKernel struct {
	vm drivers.KernelBooter
	// kernel gives the kernel file to boot.
	kernel func(ctx context.Context) (string, error)
	// dir holds the disk while it is written and the console logs.
	dir string
	// diskBytes is both disks' virtual size (they are sparse).
	diskBytes int64
}

// Name implements Kernel.
func (k vmKernel) Name() string { return "a " + k.vm.Name() + " VM" }

// Files implements kernelFiles.
func (vmKernel) Files() map[string]string { return map[string]string{vmInitName: vmInit} }

// Configure implements Kernel.
func (k vmKernel) Configure(ctx context.Context, kind string, root io.Reader, log, out io.Writer) error {
	// The root, with vminit.sh, is written in Go to a raw disk with no
	// boot loader, the node lock's Debian cloud kernel boots it directly,
	// and vminit.sh writes the configured root, as a tar, to a second disk
	// the driver hands back.
	kernel, err := k.kernel(ctx)
	if err != nil {
		return fmt.Errorf("the VM's kernel: %w", err)
	}
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return err
	}
	// VMs of builds that were killed go first; failing to remove one
	// does not stop this build.
	if err := state.SweepLeftovers(k.dir, func(name string) error { return k.vm.RemoveBoot(ctx, name) }); err != nil {
		fmt.Fprintf(log, "warning: %v\n", err)
	}
	work, err := os.MkdirTemp(k.dir, "vm-"+kind+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	start := time.Now()
	raw := filepath.Join(work, "root.raw")
	disk, err := diskimage.WriteRawDisk(ctx, root, raw, diskimage.RawDiskOptions{Size: k.diskBytes, NoBoot: true})
	if err != nil {
		return fmt.Errorf("write the stage-1 root's disk: %w", err)
	}
	// The tar's padding after its end marker is read too, so that the
	// writer's last write returns.
	_, _ = io.Copy(io.Discard, root)
	fmt.Fprintf(log, "%s: stage-1 root written to a disk in Go in %s (%d files, %d hard links as copies)\n",
		kind, time.Since(start).Round(time.Millisecond), disk.Files, disk.HardLinkCopies)

	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	spec := drivers.KernelBootSpec{
		Name:   "hwk-build-" + kind + "-" + hex.EncodeToString(suffix),
		Kernel: kernel,
		// init=/bin/sh, and what follows "--" its arguments: the file
		// need not be executable. panic=-1 restarts at once when vminit.sh
		// dies, which the driver takes as a failure.
		Cmdline:     "root=PARTUUID=" + disk.RootPartUUID + " rw rootwait console=ttyS0,115200 panic=-1 init=/bin/sh -- /" + vmInitName,
		Root:        raw,
		OutBytes:    k.diskBytes,
		CPUs:        2,
		MemoryBytes: 2 << 30,
	}
	spec.ConsoleLog = filepath.Join(k.dir, spec.Name+".console.log")
	held, err := state.HoldLeftover(k.dir, spec.Name)
	if err != nil {
		return err
	}
	start = time.Now()
	err = k.vm.BootKernel(ctx, spec, func(disk drivers.OutputDisk) error { return readVMResult(disk, log, out) })
	// BootKernel removes what it made; should that have failed, the lock
	// stays for the next build's sweep, and the build stands.
	if rerr := state.EndLeftover(held, k.vm.RemoveBoot(context.WithoutCancel(ctx), spec.Name)); rerr != nil {
		fmt.Fprintf(log, "warning: remove the build VM %s: %v (the next build removes it)\n", spec.Name, rerr)
	}
	if err != nil {
		if tail := fileTail(spec.ConsoleLog, 30); tail != "" {
			err = fmt.Errorf("%w\nthe VM's console (%s) ends:\n%s", err, spec.ConsoleLog, tail)
		}
		return err
	}
	os.Remove(spec.ConsoleLog)
	fmt.Fprintf(log, "%s: configured and read back from %s in %s\n", kind, k.Name(), time.Since(start).Round(time.Millisecond))
	return nil
}

// readVMResult reads what vminit.sh left on the output disk: the script's
// output goes to log, and the root, when the script succeeded, to out.
// Three reads: the result line, the log, the tar.
func readVMResult(disk drivers.OutputDisk, log, out io.Writer) error {
	var head bytes.Buffer
	if err := disk.CopyRange(&head, 0, 256); err != nil {
		return fmt.Errorf("read the VM's result: %w", err)
	}
	line, _, _ := strings.Cut(head.String(), "\n")
	var code, logBytes, tarBytes int64
	if n, _ := fmt.Sscanf(line, "hwk-stage2 exit=%d log=%d tar=%d", &code, &logBytes, &tarBytes); n != 3 {
		return errors.New("the VM powered off without writing a result: vminit.sh did not finish")
	}
	if logBytes < 0 || logBytes > vmTarOffset-vmLogOffset || tarBytes < 0 {
		return fmt.Errorf("the VM's result is malformed: %q", line)
	}
	tail := hostexec.NewTail(16 << 10)
	if err := disk.CopyRange(io.MultiWriter(log, tail), vmLogOffset, logBytes); err != nil {
		return fmt.Errorf("read the VM's log: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("stage2.sh exited with %d:\n%s", code, strings.Join(tail.Lines(30), "\n"))
	}
	if err := disk.CopyRange(out, vmTarOffset, tarBytes); err != nil {
		return fmt.Errorf("read the configured root: %w", err)
	}
	return nil
}

// fileTail returns the last n lines of a file, or "" when it cannot be read.
func fileTail(p string, n int) string {
	b, err := os.ReadFile(p)
	if err != nil || len(b) == 0 {
		return ""
	}
	return strings.Join(hostexec.Lines(string(b), n), "\n")
}

// vmLinuz returns the kernel the configure VM boots: the node lock's Debian
// cloud kernel (the userland's lock has none), taken out of its package
// once and cached by the package's SHA-256.
func (b *builder) vmLinuz(ctx context.Context) (string, error) {
	lock, err := readLock(linux.Recipe, "debian.lock.yaml")
	if err != nil {
		return "", err
	}
	var pkg *debian.LockedPackage
	for i, p := range lock.Packages {
		// The versioned package holds the kernel; linux-image-cloud-amd64
		// only depends on it.
		if strings.HasPrefix(p.Name, "linux-image-") && strings.HasSuffix(p.Name, "-cloud-amd64") && p.Name != "linux-image-cloud-amd64" {
			pkg = &lock.Packages[i]
		}
	}
	if pkg == nil {
		return "", errors.New("node-images/linux/debian.lock.yaml holds no linux-image-*-cloud-amd64")
	}
	file := filepath.Join(b.opts.CacheDir, "debian", "vmlinuz-"+pkg.SHA256[:16])
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	one := *lock
	one.Packages = []debian.LockedPackage{*pkg}
	dl := &download.Client{HTTP: b.opts.HTTP, CacheDir: filepath.Join(b.opts.CacheDir, "debian")}
	paths, err := debian.Fetch(ctx, dl, &one, debian.FetchOptions{})
	if err != nil {
		return "", err
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(debian.Assemble(ctx, pw, []debian.Deb{{Package: *pkg, Path: paths[0]}}, debian.AssembleOptions{}))
	}()
	defer pr.Close()
	tr := tar.NewReader(pr)
	for {
		hdr, err := tr.Next()
		if err != nil {
			if err == io.EOF {
				err = fmt.Errorf("%s holds no /boot/vmlinuz-*", pkg.Filename)
			}
			return "", err
		}
		name := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		if hdr.Typeflag == tar.TypeReg && path.Dir(name) == "boot" && strings.HasPrefix(path.Base(name), "vmlinuz-") {
			err := state.WriteOutput(file, 0o644, func(f *os.File) error {
				_, err := io.Copy(f, tr)
				return err
			})
			return file, err
		}
	}
}
