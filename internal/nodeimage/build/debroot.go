package build

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/jsonstream"

	"github.com/hwk-dev/hwk/internal/debian"
	"github.com/hwk-dev/hwk/internal/download"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// A Debian root is made in two stages, with no root on the host and no
// Debian tool (debootstrap, chroot) anywhere:
//
//  1. In Go, on any OS: the lock's .debs are fetched (cached by SHA-256)
//     and unpacked into one tar as dpkg --unpack would leave them
//     (internal/debian.Assemble).
//  2. Once, in a Linux kernel (a Kernel: the Docker engine, WSL 2, or a
//     VM of a driver that boots kernels, vmKernel):
//     that tar, with the recipe's stage-2 script and its files under /hwk,
//     becomes a throwaway system that runs the script (dpkg --configure
//     -a, then the recipe's steps). Its file system, exported, is the root.

// rootFormat is part of the keys of every configured root (the node's, the
// images' userland, and so the images built on it): bump it whenever the
// code that makes a root from the packages (cleanExport, stage 2's
// protocol) changes what it writes, so that roots cached by older code are
// not reused.
const rootFormat = 2

// stage2Dir is where the stage-2 script and its inputs sit in the root
// while it runs; the script removes it and the export leaves it out.
const stage2Dir = "hwk"

// stage2 is what a root's second stage runs: script (with /bin/sh, as
// root, no network), beside files written by add under /hwk.
type stage2 struct {
	script []byte
	add    func(tw *tar.Writer) error
}

// configuredRoot writes to file, as a tar, the Debian root that lock
// describes, configured by s. Each phase is a reported step and a stage
// of the manifest (kind-fetch, kind-assemble, kind-configure).
func (b *builder) configuredRoot(ctx context.Context, kind string, lock *debian.Lock, s stage2, file string) error {
	var size int64
	for _, p := range lock.Packages {
		size += p.Size
	}
	var debs []debian.Deb
	err := b.phase(kind+"-fetch", fmt.Sprintf("Download the %s's Debian packages (%d, %.1f MiB)", kind, len(lock.Packages), float64(size)/(1<<20)), func() error {
		var err error
		debs, err = b.fetchDebs(ctx, kind, lock, size)
		return err
	})
	if err != nil {
		return fmt.Errorf("download the %s's Debian packages: %w", kind, err)
	}
	work, err := os.MkdirTemp(b.opts.CacheDir, "stage1-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	stage1 := filepath.Join(work, "stage1.tar")
	if err := b.phase(kind+"-assemble", fmt.Sprintf("Unpack the %s's packages (stage 1, in Go)", kind), func() error { return assemble(ctx, stage1, debs) }); err != nil {
		return fmt.Errorf("unpack the %s's Debian packages: %w", kind, err)
	}
	k := b.kernel()
	return b.phase(kind+"-configure", fmt.Sprintf("Configure the %s's root in %s (stage 2)", kind, k.Name()), func() error {
		return b.configure(ctx, k, kind, stage1, s, file)
	})
}

// configure runs stage 2 of the stage-1 root in k and writes the root it
// leaves, cleaned, to file; on failure there is no file.
func (b *builder) configure(ctx context.Context, k nodeimage.Kernel, kind, stage1 string, s stage2, file string) error {
	start := time.Now()
	err := os.MkdirAll(filepath.Dir(file), 0o755)
	if err == nil {
		err = state.WriteOutput(file, 0o644, func(f *os.File) error { return configureIn(ctx, k, kind, stage1, s, b.opts.Log, f) })
	}
	if err != nil {
		return fmt.Errorf("configure the %s's root in %s: %w", kind, k.Name(), err)
	}
	fmt.Fprintf(b.opts.Log, "%s: configured in %s and exported in %s\n", kind, k.Name(), time.Since(start).Round(time.Millisecond))
	return nil
}

// kernel returns where stage 2 runs: a VM of Options.VM, else Options.Kernel,
// else the Docker engine.
func (b *builder) kernel() nodeimage.Kernel {
	if b.opts.VM != nil {
		return vmKernel{vm: b.opts.VM, kernel: b.vmLinuz, dir: filepath.Join(b.opts.CacheDir, "build", "vm"), diskBytes: b.opts.DiskSize}
	}
	if b.opts.Kernel != nil {
		return b.opts.Kernel
	}
	return DockerKernel{Client: b.opts.Docker}
}

// configureIn runs stage 2 of the stage-1 root in k and writes the root
// it leaves, cleaned, to w.
func configureIn(ctx context.Context, k nodeimage.Kernel, kind, stage1 string, s stage2, log, w io.Writer) error {
	in, inW := io.Pipe()
	wrote := make(chan error, 1)
	var files map[string]string
	if kf, ok := k.(kernelFiles); ok {
		files = kf.Files()
	}
	go func() {
		err := writeStage2Tar(inW, stage1, s, files)
		inW.CloseWithError(err)
		wrote <- err
	}()
	out, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := cleanExport(out, w)
		if err == nil {
			// What follows the tar's end (a tool's closing message) is
			// read and dropped, so that the kernel's copy ends well.
			_, err = io.Copy(io.Discard, out)
		}
		// A kernel still writing learns that nothing reads any more.
		out.CloseWithError(err)
		done <- err
	}()
	err := k.Configure(ctx, kind, in, log, outW)
	outW.CloseWithError(err)
	cerr := <-done
	// A kernel that stopped reading its input ends the writer; one that
	// failed because the input could not be written learns only of a
	// broken stream, so the writer's own error is the cause to report.
	in.Close()
	if werr := <-wrote; werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		return fmt.Errorf("write the stage-2 root: %w", werr)
	}
	if err == nil {
		err = cerr
	}
	return err
}

// fetchDebs downloads the lock's packages into the cache (each checked
// against its SHA-256) and returns them in unpack order.
func (b *builder) fetchDebs(ctx context.Context, kind string, lock *debian.Lock, size int64) ([]debian.Deb, error) {
	start := time.Now()
	dl := &download.Client{HTTP: b.opts.HTTP, CacheDir: filepath.Join(b.opts.CacheDir, "debian")}
	var o debian.FetchOptions
	if b.opts.Transfers != nil {
		update, stop := b.opts.Transfers()
		defer stop()
		o.Progress = packagesProgress(kind+"'s Debian packages", size, update)
	}
	paths, err := debian.Fetch(ctx, dl, lock, o)
	if err != nil {
		return nil, err
	}
	d := time.Since(start)
	fmt.Fprintf(b.opts.Log, "%s: %d Debian packages (%.1f MiB) from %s or the cache in %s (%.1f MiB/s)\n",
		kind, len(paths), float64(size)/(1<<20), lock.Mirror, d.Round(time.Millisecond), float64(size)/(1<<20)/max(d.Seconds(), 0.001))
	debs := make([]debian.Deb, len(paths))
	for i, p := range lock.Packages {
		debs[i] = debian.Deb{Package: p, Path: paths[i]}
	}
	return debs, nil
}

// packagesProgress sums Fetch's per-package progress (from several
// downloads at once) into one transfer of total bytes: a package already
// in the cache reports itself done at once.
func packagesProgress(name string, total int64, update func(name string, done, total int64)) func(debian.LockedPackage, int64, int64) {
	var mu sync.Mutex
	each := map[string]int64{}
	var sum int64
	return func(p debian.LockedPackage, done, _ int64) {
		mu.Lock()
		defer mu.Unlock()
		sum += done - each[p.Filename]
		each[p.Filename] = done
		update(name, sum, total)
	}
}

// assemble writes the stage-1 tar of debs to file.
func assemble(ctx context.Context, file string, debs []debian.Deb) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = debian.Assemble(ctx, bw, debs, debian.AssembleOptions{})
	if err == nil {
		err = bw.Flush()
	}
	return errors.Join(err, f.Close())
}

// jsonStreamError reads an engine's progress stream to its end and
// returns the error it reports, if any.
func jsonStreamError(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if m.Error != nil {
			return errors.New(m.Error.Message)
		}
	}
}

// writeStage2Tar writes the stage-1 tar's entries, the kernel's files,
// then /hwk/stage2.sh and s's files, as one tar.
func writeStage2Tar(w io.Writer, stage1 string, s stage2, kernelFiles map[string]string) error {
	f, err := os.Open(stage1)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(w)
	if _, err := copyEntries(tar.NewReader(bufio.NewReaderSize(f, 1<<20)), tw, func(string) (bool, []byte) { return true, nil }); err != nil {
		return fmt.Errorf("copy %s: %w", stage1, err)
	}
	for _, name := range slices.Sorted(maps.Keys(kernelFiles)) {
		if err := tarFile(tw, name, []byte(kernelFiles[name]), 0o644); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: stage2Dir + "/", Mode: 0o700, ModTime: epoch}); err != nil {
		return err
	}
	if err := tarFile(tw, stage2Dir+"/stage2.sh", s.script, 0o755); err != nil {
		return err
	}
	if s.add != nil {
		if err := s.add(tw); err != nil {
			return err
		}
	}
	return tw.Close()
}

// tarFile writes one regular file owned by root.
func tarFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	return tarFrom(tw, name, bytes.NewReader(data), int64(len(data)), mode)
}

// tarFileFrom writes the file at src into tw as name.
func tarFileFrom(tw *tar.Writer, name, src string, mode int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return tarFrom(tw, name, f, fi.Size(), mode)
}

// tarFrom writes size bytes of r into tw as the regular file name.
func tarFrom(tw *tar.Writer, name string, r io.Reader, size, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: size, ModTime: epoch}); err != nil {
		return err
	}
	_, err := io.Copy(tw, r)
	return err
}

// runtimeFiles are what Docker puts into every container and a root must
// not carry: the engine's own files (bind mounts, whose placeholders the
// export holds) are replaced by what a node starts with.
var runtimeFiles = map[string][]byte{
	"etc/hostname":    []byte("node\n"),
	"etc/hosts":       []byte("127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n"),
	"etc/resolv.conf": {}, // hwk-seed, or the container runtime, writes it
}

// kernelOnly are files a kernel leaves in a root that no node may have:
// Docker's marker; WSL's configuration (hwk's, from kernelFiles), the
// placeholder its /init is bound over, the links its init makes to it,
// and the library path it adds for the host's GPU libraries
// (microsoft/WSL src/linux/init: main.cpp MountInit, config.cpp).
var kernelOnly = map[string]bool{
	".dockerenv": true, "init": true, "etc/wsl.conf": true, "etc/wsl-distribution.conf": true,
	"bin/wslpath": true, "bin/wslinfo": true, "sbin/mount.drvfs": true,
	"usr/bin/wslpath": true, "usr/bin/wslinfo": true, "usr/sbin/mount.drvfs": true,
	"etc/ld.so.conf.d/ld.wsl.conf": true,
}

// isWSLModules reports whether name is in the module directory of WSL's
// own kernel, which its init makes (empty) to mount the modules over.
func isWSLModules(name string) bool {
	rest, ok := strings.CutPrefix(name, "usr/lib/modules/")
	release, _, _ := strings.Cut(rest, "/")
	return ok && strings.HasSuffix(release, "-microsoft-standard-WSL2")
}

// under reports whether name is dir or below it.
func under(name, dir string) bool { return name == dir || strings.HasPrefix(name, dir+"/") }

// runtimeLinks are symlinks a runtime makes in a root, given the target
// systemd's tmpfiles.d/etc.conf gives them at boot, whether the kernel
// made them (Docker: /etc/mtab to /proc/mounts) or not (a VM).
var runtimeLinks = map[string]string{"etc/mtab": "../proc/self/mounts"}

// cleanExport copies a kernel's export of a root to w so that every
// kernel's root is the same: without the stage-2 directory, what the
// kernel leaves of its own and what it provides at run time, and with a
// node's contents in the files a runtime writes for itself (added where
// the kernel had none, as in a VM). What follows the tar is not read.
func cleanExport(r io.Reader, w io.Writer) error {
	seen := map[string]bool{}
	bw := bufio.NewWriterSize(w, 1<<20)
	tw := tar.NewWriter(bw)
	// A tar reader stops at the archive's end marker, so anything a tool
	// prints after the tar is not read as part of it.
	n, err := copyEntries(tar.NewReader(bufio.NewReaderSize(r, 1<<20)), tw, func(name string) (bool, []byte) {
		top, rest, _ := strings.Cut(name, "/")
		switch {
		case top == stage2Dir:
			return false, nil
		// What the kernel provides at run time: /dev, /proc and /sys keep
		// only their directories, and WSL's mount points under /mnt go.
		case (top == "dev" || top == "proc" || top == "sys" || top == "mnt") && rest != "":
			return false, nil
		// What the kernel leaves of its own: kernelOnly, WSL's mount
		// points under /usr/lib/wsl, its X11 socket directory, and the
		// empty module directory of its kernel.
		case kernelOnly[name] || under(name, "usr/lib/wsl") || under(name, "tmp/.X11-unix"):
			return false, nil
		case isWSLModules(name):
			return false, nil
		case runtimeLinks[name] != "":
			return false, nil
		}
		// The files a runtime writes for itself (Docker's bind mounts,
		// WSL's generated hosts and resolv.conf) get a node's contents.
		if _, ok := runtimeFiles[name]; ok {
			seen[name] = true
		}
		return true, runtimeFiles[name]
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("the export holds no files")
	}
	for _, name := range slices.Sorted(maps.Keys(runtimeFiles)) {
		if !seen[name] {
			if err := tarFile(tw, name, runtimeFiles[name], 0o644); err != nil {
				return err
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(runtimeLinks)) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: runtimeLinks[name], Mode: 0o777, ModTime: epoch}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// copyTar copies a tar's entries to w as edit decides: it is given an
// entry's cleaned name (no leading "./" or "/") and returns whether to
// keep it and, when not nil, the contents it gets instead (a regular file,
// 0644). It returns how many entries the input held.
func copyTar(r io.Reader, w io.Writer, edit func(name string) (keep bool, contents []byte)) (int, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	tw := tar.NewWriter(bw)
	n, err := copyEntries(tar.NewReader(bufio.NewReaderSize(r, 1<<20)), tw, edit)
	if err != nil {
		return n, err
	}
	if err := tw.Close(); err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// copyEntries runs copyTar's loop, into a tar that goes on after it.
func copyEntries(tr *tar.Reader, tw *tar.Writer, edit func(name string) (keep bool, contents []byte)) (int, error) {
	n := 0
	for ; ; n++ {
		h, err := tr.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		keep, contents := edit(strings.TrimPrefix(path.Clean("/"+h.Name), "/"))
		if !keep {
			continue
		}
		var from io.Reader = tr
		if contents != nil {
			h.Typeflag, h.Linkname, h.Size, h.Mode = tar.TypeReg, "", int64(len(contents)), 0o644
			from = bytes.NewReader(contents)
		}
		if err := tw.WriteHeader(h); err != nil {
			return n, err
		}
		if _, err := io.Copy(tw, from); err != nil {
			return n, err
		}
	}
}

// readLock reads a committed Debian lock from a recipe.
func readLock(fsys fs.FS, name string) (*debian.Lock, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("recipe: %w", err)
	}
	defer f.Close()
	l, err := debian.ReadLock(f)
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", name, err)
	}
	return l, nil
}
