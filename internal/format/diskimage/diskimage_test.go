package diskimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	mib = 1 << 20
	gib = 1 << 30
)

// tools names the Debian package of each tool the tests run.
var tools = map[string]string{
	"qemu-img":           "qemu-utils",
	"qemu-system-x86_64": "qemu-system-x86",
}

// requireTools skips the test when a tool is missing, unless
// HWK_REQUIRE_QEMU=1, where it fails.
func requireTools(t *testing.T, names ...string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("these tests run QEMU on Linux only")
	}
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv("HWK_REQUIRE_QEMU") == "1" {
				t.Fatalf("HWK_REQUIRE_QEMU=1 but %s is missing (Debian: %s)", name, tools[name])
			}
			t.Skipf("%s is missing (Debian: %s)", name, tools[name])
		}
	}
}

// The newer kernel sorts first by name: the writer must compare versions.
const (
	oldKernel = "6.1.0-9-cloud-amd64"
	newKernel = "6.1.0-10-cloud-amd64"
)

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// run1 runs a command and returns its standard output, failing the test
// if it fails.
func run1(t *testing.T, name string, args ...string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		p = filepath.Join("/usr/sbin", name)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(p, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

func TestInfo(t *testing.T) {
	requireTools(t, "qemu-img")
	dir := t.TempDir()
	for _, format := range []string{"qcow2", "vhdx", "vdi", "raw"} {
		p := filepath.Join(dir, "disk."+format)
		run1(t, "qemu-img", "create", "-q", "-f", format, p, "64M")
		got, size, err := Info(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if got != format || size != 64*mib {
			t.Errorf("Info(%s) = %q, %d; want %q, %d", p, got, size, format, 64*mib)
		}
	}
	if _, _, err := Info(context.Background(), filepath.Join(dir, "missing.qcow2")); err == nil || !strings.Contains(err.Error(), "missing.qcow2") {
		t.Errorf("Info of a missing file: err = %v, want one naming it", err)
	}
}

func TestConsoleScanner(t *testing.T) {
	const want = "Reached target multi-user.target"
	// What systemd 252 writes to a serial console, cut up as a pipe
	// might deliver it: inside escapes, inside the text, between CR and LF.
	out := "\x1b[2J\x1b[01;01H\x1b[=3hBdsDxe: loading Boot0002\r\n" +
		"[\x1b[0;32m  OK  \x1b[0m] Reached target \x1b[0;1;39mbasic.target\x1b[0m - Basic System.\r\r\n" +
		"[\x1b[0;32m  OK  \x1b[0m] Reached target \x1b[0;1;39mmulti-user.target\x1b[0m - Multi-User System.\r\r\n" +
		"\r\nDebian GNU/Linux 12 vm ttyS0\r\n\r\nvm login: "
	for _, step := range []int{1, 2, 3, 7, 64, len(out)} {
		s := &consoleScanner{want: want, found: make(chan struct{})}
		var at int
		for i := 0; i < len(out); i += step {
			s.feed([]byte(out[i:min(i+step, len(out))]))
			select {
			case <-s.found:
				if at == 0 {
					at = i + step
				}
			default:
			}
		}
		if at == 0 {
			t.Fatalf("step %d: want not found", step)
		}
		if at < strings.Index(out, "multi-user.target\x1b[0m")+len("multi-user.target") {
			t.Errorf("step %d: found at %d, before it was written", step, at)
		}
		tail := s.tail()
		for _, w := range []string{"\nBdsDxe: loading Boot0002\n", "\n[  OK  ] Reached target multi-user.target - Multi-User System.\n", "\nvm login: "} {
			if !strings.Contains(tail, w) {
				t.Errorf("step %d: tail = %q, want it to contain %q", step, tail, w)
			}
		}
	}

	// A prompt that no newline follows.
	s := &consoleScanner{want: "login: ", found: make(chan struct{})}
	s.feed([]byte(out))
	select {
	case <-s.found:
	default:
		t.Error("a want at the end of an unfinished line was not found")
	}
}

// fakeQemu puts a qemu-system-x86_64 that runs script first on PATH, with
// firmware files beside it where BootCheck looks for QEMU's own.
func fakeQemu(t *testing.T, script string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fake QEMU is a shell script")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "qemu-system-x86_64"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "share"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, fw := range []string{"edk2-x86_64-code.fd", "edk2-i386-vars.fd"} {
		if err := os.WriteFile(filepath.Join(dir, "share", fw), []byte("fake"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func TestBootCheckQemuExits(t *testing.T) {
	requireTools(t, "qemu-img")
	disk := filepath.Join(t.TempDir(), "blank.qcow2")
	run1(t, "qemu-img", "create", "-q", "-f", "qcow2", disk, "64M")
	fakeQemu(t, "printf 'Linux version 6.1\\r\\nKernel panic - not syncing\\r\\n'\necho 'qemu: guest asked to reboot' >&2\nexit 1\n")
	var console bytes.Buffer
	err := BootCheck(context.Background(), disk, time.Minute, "Reached target multi-user.target", &console)
	if err == nil {
		t.Fatal("BootCheck succeeded with a QEMU that exited")
	}
	for _, want := range []string{"qemu exited (exit status 1)", "qemu said:\nqemu: guest asked to reboot", "last 2 lines:\nLinux version 6.1\nKernel panic - not syncing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to contain %q", err, want)
		}
	}
	if !strings.Contains(console.String(), "Kernel panic") {
		t.Errorf("console = %q, want QEMU's output", console.String())
	}
}

func TestBootCheckKillsQemu(t *testing.T) {
	requireTools(t, "qemu-img")
	dir := t.TempDir()
	disk := filepath.Join(dir, "blank.qcow2")
	run1(t, "qemu-img", "create", "-q", "-f", "qcow2", disk, "64M")
	// The fake guest gets to multi-user, then QEMU runs on until killed.
	pidFile := filepath.Join(dir, "pid")
	fakeQemu(t, "echo $$ >"+pidFile+"\n"+
		"printf '[  OK  ] Reached target \\033[0;1;39mmulti-user.target\\033[0m - Multi-User System.\\r\\n'\n"+
		"exec sleep 60\n")
	start := time.Now()
	if err := BootCheck(context.Background(), disk, time.Minute, "Reached target multi-user.target", nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("BootCheck took %s; it should return once the target is reached", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// BootCheck waited for it, so the PID is free unless still running.
	if p, err := os.FindProcess(pid); err == nil && p.Signal(syscall.Signal(0)) == nil {
		t.Errorf("QEMU (pid %d) still runs after BootCheck returned", pid)
	}
}

func TestBootCheckTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU; -short skips it")
	}
	requireTools(t, "qemu-img", "qemu-system-x86_64")
	disk := filepath.Join(t.TempDir(), "blank.qcow2")
	run1(t, "qemu-img", "create", "-q", "-f", "qcow2", disk, "64M")
	// The firmware prints within a second or two here; on a machine busy
	// enough that it has printed nothing by the timeout, the check runs
	// again with a longer one, so that the console's copy is still seen.
	for _, timeout := range []time.Duration{20 * time.Second, time.Minute} {
		var console bytes.Buffer
		start := time.Now()
		err := BootCheck(context.Background(), disk, timeout, "never printed", &console)
		want := fmt.Sprintf("did not print %q within %s", "never printed", timeout)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want %q", err, want)
		}
		t.Logf("err = %v (after %s)", err, time.Since(start).Round(100*time.Millisecond))
		if console.Len() > 0 {
			break
		}
		if timeout == time.Minute {
			t.Error("nothing copied from the console")
		}
	}
	if _, err := os.Stat(disk); err != nil {
		t.Error(err)
	}
}

// TestBootDebianRootfs checks that every format made from a real node
// rootfs as the node image build makes them (WriteRawDisk, then WriteQCOW2,
// WriteVHDX and WriteVDI) is sound, and that the qcow2 boots to systemd's
// multi-user target. HWK_TEST_ROOTFS names the rootfs; without it the test
// skips.
func TestBootDebianRootfs(t *testing.T) {
	// HWK_TEST_ROOTFS is a directory the test can read whole (root, for a
	// debootstrapped one), such as one made with
	//
	//	debootstrap --variant=minbase --include=systemd,systemd-sysv,udev,dbus,kmod,linux-image-cloud-amd64,systemd-boot-efi,e2fsprogs,iproute2 bookworm ROOTFS http://deb.debian.org/debian
	//
	// or a tar of one. Why the test skips without it: no CI stage has such
	// a root (the node image's rootfs.tar.gz and hack/debianlock's
	// debootstrapped oracle root both lack /boot's kernel).
	rootfs := os.Getenv("HWK_TEST_ROOTFS")
	if rootfs == "" {
		t.Skip("needs a Debian root with a kernel in /boot: set HWK_TEST_ROOTFS to one (a directory or a tar)")
	}
	fi, err := os.Stat(rootfs)
	if err != nil {
		t.Fatalf("HWK_TEST_ROOTFS: %v", err)
	}
	if testing.Short() {
		t.Skip("integration test; -short skips it")
	}
	requireTools(t, "qemu-img", "qemu-system-x86_64")
	ctx := context.Background()
	out := t.TempDir()
	const size = 20 * gib

	raw := filepath.Join(out, "disk.raw")
	pr, pw := io.Pipe()
	tarDone := make(chan struct{})
	go func() {
		defer close(tarDone)
		if fi.IsDir() {
			pw.CloseWithError(tarTree(rootfs, pw))
			return
		}
		f, err := os.Open(rootfs)
		if err == nil {
			_, err = io.Copy(pw, f)
			f.Close()
		}
		pw.CloseWithError(err)
	}()
	start := time.Now()
	res, err := WriteRawDisk(ctx, pr, raw, RawDiskOptions{Size: size})
	// Unblocks the tar's writer if WriteRawDisk stopped reading early.
	pr.CloseWithError(errors.New("WriteRawDisk stopped reading"))
	<-tarDone
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("WriteRawDisk took %s: kernel %s, initrd %s, %d directories, %d files, %d symlinks, %d hard link copies, %d devices skipped, extended attributes dropped %q",
		time.Since(start).Round(time.Millisecond), res.Kernel, res.Initrd, res.Dirs, res.Files, res.Symlinks, res.HardLinkCopies, res.SkippedDevices, res.DroppedXattrs)
	if res.Size != size {
		t.Errorf("WriteRawDisk made a disk of %d bytes, want %d", res.Size, int64(size))
	}

	disks := map[string]string{}
	for _, w := range []struct {
		format string
		write  func(ctx context.Context, raw, out string) error
	}{
		{"qcow2", WriteQCOW2},
		{"vhdx", WriteVHDX},
		{"vdi", WriteVDI},
	} {
		p := filepath.Join(out, "disk."+w.format)
		start := time.Now()
		if err := w.write(ctx, raw, p); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		format, vsize, err := Info(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes in %s", p, fi.Size(), took.Round(time.Millisecond))
		if format != w.format || vsize != size {
			t.Errorf("Info(%s) = %s, %d; want %s, %d", p, format, vsize, w.format, int64(size))
		}
		disks[w.format] = p
	}

	var console io.Writer = io.Discard
	if testing.Verbose() {
		console = t.Output()
	}
	// What systemd 252 (Debian 12) prints, colours removed:
	// "[  OK  ] Reached target multi-user.target - Multi-User System."
	start = time.Now()
	if err := BootCheck(ctx, disks["qcow2"], 10*time.Minute, "Reached target multi-user.target", console); err != nil {
		t.Fatal(err)
	}
	t.Logf("reached multi-user.target in %s (TCG)", time.Since(start).Round(time.Second))
}

// tarTree writes the directory tree at root to w as a tar stream, as
// "tar -C root -c ." would: names ./…, each directory before what it
// holds, modes, times and numeric owners as the host has them, and each
// further name of a hard-linked file as a link to the first. Sockets are
// left out, as tar does; extended attributes are not read.
func tarTree(root string, w io.Writer) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSocket != 0 {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := "./"
		if rel != "." {
			name += filepath.ToSlash(rel)
			if fi.IsDir() {
				name += "/"
			}
		}
		var target string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		h.Name = name
		// The host's names for the ids, which need not be the rootfs's.
		h.Uname, h.Gname = "", ""
		if st, ok := statOf(fi); ok {
			h.Uid, h.Gid = st.uid, st.gid
			if h.Typeflag == tar.TypeReg && st.nlink > 1 {
				id := [2]uint64{st.dev, st.ino}
				if first, ok := links[id]; ok {
					h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
				} else {
					links[id] = name
				}
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(tw, f); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// fileStat is what tarTree needs of a file's stat beyond fs.FileInfo.
type fileStat struct {
	uid, gid        int
	dev, ino, nlink uint64
}
