package diskimage

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	"mkfs.ext4":          "e2fsprogs",
	"debugfs":            "e2fsprogs",
	"dumpe2fs":           "e2fsprogs",
	"mkfs.fat":           "dosfstools",
	"mcopy":              "mtools",
	"mtype":              "mtools",
	"sgdisk":             "gdisk",
}

// requireTools skips the test when a tool is missing, unless
// HWK_REQUIRE_QEMU=1, where it fails.
func requireTools(t *testing.T, names ...string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the disk recipe runs on Linux only")
	}
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			// mkfs.* and sgdisk are in sbin, off a normal user's PATH;
			// disk.sh adds it.
			if _, serr := os.Stat(filepath.Join("/usr/sbin", name)); serr == nil {
				continue
			}
			if os.Getenv("HWK_REQUIRE_QEMU") == "1" {
				t.Fatalf("HWK_REQUIRE_QEMU=1 but %s is missing (Debian: %s)", name, tools[name])
			}
			t.Skipf("%s is missing (Debian: %s)", name, tools[name])
		}
	}
}

func diskScript(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "node-images", "linux", "disk.sh"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// onlySh makes sh the only command on PATH.
func onlySh(t *testing.T) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	if err := os.Symlink(sh, filepath.Join(dir, "sh")); err != nil {
		t.Skip(err)
	}
	t.Setenv("PATH", dir)
}

func TestBuildUnknownFormat(t *testing.T) {
	_, err := Build(context.Background(), nil, t.TempDir(), t.TempDir(), gib, []string{"qcow2", "vmdk"}, nil)
	if err == nil || !strings.Contains(err.Error(), `"vmdk"`) {
		t.Fatalf("err = %v, want one naming vmdk", err)
	}
}

func TestBuildNoFormats(t *testing.T) {
	if _, err := Build(context.Background(), nil, t.TempDir(), t.TempDir(), gib, nil, nil); err == nil {
		t.Fatal("Build with no formats succeeded")
	}
}

func TestBuildWithoutQemuImg(t *testing.T) {
	onlySh(t)
	_, err := Build(context.Background(), []byte("exit 0\n"), t.TempDir(), t.TempDir(), gib, []string{"qcow2"}, nil)
	if err == nil || !strings.Contains(err.Error(), "qemu-utils") {
		t.Fatalf("err = %v, want one naming qemu-utils", err)
	}
}

func TestBuildMissingTool(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no sh")
	}
	onlySh(t)
	out := t.TempDir()
	var log bytes.Buffer
	_, err := Build(context.Background(), diskScript(t), t.TempDir(), out, gib, []string{Raw}, &log)
	if err == nil {
		t.Fatal("Build succeeded with no tools on PATH")
	}
	// disk.sh adds sbin to PATH, so which of mkfs.ext4 and sgdisk are
	// found depends on the host; mtools lives in /usr/bin.
	for _, want := range []string{"missing tools", "mcopy (Debian/Ubuntu: apt-get install mtools)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to contain %q", err, want)
		}
	}
	if !strings.Contains(log.String(), "missing tools") {
		t.Errorf("log = %q, want the script's output", log.String())
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("a failed build left %v in its output directory", entries)
	}
}

func TestBuildBadSize(t *testing.T) {
	requireTools(t, "mkfs.ext4", "mkfs.fat", "mcopy", "sgdisk")
	rootfs := fakeRootfs(t, true)
	_, err := Build(context.Background(), diskScript(t), rootfs, t.TempDir(), 100*mib, []string{Raw}, nil)
	if err == nil || !strings.Contains(err.Error(), "no room for the root file system") {
		t.Fatalf("err = %v, want one about the size", err)
	}
}

// fakeRootfs is a rootfs with two made-up kernels, oldKernel and
// newKernel: enough for disk.sh, which never runs what it copies. With
// link, /vmlinuz and /initrd.img name the older, as Debian's would after a
// downgrade.
func fakeRootfs(t *testing.T, link bool) string {
	t.Helper()
	root := t.TempDir()
	write := func(name string, data []byte) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{oldKernel, newKernel} {
		write("boot/vmlinuz-"+v, randBytes(2*mib))
		write("boot/initrd.img-"+v, randBytes(3*mib))
	}
	write("usr/lib/systemd/boot/efi/systemd-bootx64.efi", randBytes(100<<10))
	write("etc/hostname", []byte("fake\n"))
	if link {
		for _, l := range [][2]string{{"vmlinuz", "boot/vmlinuz-" + oldKernel}, {"initrd.img", "boot/initrd.img-" + oldKernel}} {
			if err := os.Symlink(l[1], filepath.Join(root, l[0])); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// The newer kernel sorts first by name: disk.sh must compare versions.
const (
	oldKernel = "6.1.0-9-cloud-amd64"
	newKernel = "6.1.0-10-cloud-amd64"
)

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// snapshot lists a tree's names, modes, sizes and times, to show it was
// left alone.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintln(&sb, p, fi.Mode(), fi.ModTime(), fi.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// TestBuildFakeRootfs builds every format from a made-up rootfs and checks
// the disk's layout: the GPT, the boot entry, the ESP's files and the root
// file system's contents.
func TestBuildFakeRootfs(t *testing.T) {
	requireTools(t, "qemu-img", "mkfs.ext4", "debugfs", "dumpe2fs", "mkfs.fat", "mcopy", "mtype", "sgdisk")
	for _, tc := range []struct {
		name, kver string
		link       bool
	}{
		{"symlinks", oldKernel, true},
		{"newest", newKernel, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rootfs := fakeRootfs(t, tc.link)
			before := snapshot(t, rootfs)
			out := t.TempDir()
			size := int64(512*mib + 1000) // rounded down to whole MiB
			var log bytes.Buffer
			got, err := Build(context.Background(), diskScript(t), rootfs, out, size, []string{"vdi", Raw, "qcow2", "vhdx", "qcow2"}, &log)
			if err != nil {
				t.Fatalf("Build: %v\n%s", err, log.String())
			}
			if after := snapshot(t, rootfs); after != before {
				t.Errorf("Build changed the rootfs:\nbefore:\n%safter:\n%s", before, after)
			}
			for _, f := range []string{"qcow2", "vhdx", "vdi", Raw} {
				want := filepath.Join(out, "disk."+f)
				if got[f] != want {
					t.Errorf("Build()[%q] = %q, want %q", f, got[f], want)
				}
				format, vsize, err := Info(context.Background(), want)
				if err != nil {
					t.Fatal(err)
				}
				if format != f || vsize != 512*mib {
					t.Errorf("Info(%s) = %s, %d; want %s, %d", want, format, vsize, f, 512*mib)
				}
			}
			if len(got) != 4 {
				t.Errorf("Build returned %v, want 4 formats", got)
			}
			if entries, _ := os.ReadDir(out); len(entries) != 4 {
				t.Errorf("output directory holds %v, want the 4 disks only", entries)
			}

			raw := got[Raw]
			esp := raw + "@@1M" // mtools: the FAT file system at offset 1 MiB
			entry := run1(t, "mtype", "-i", esp, "::/loader/entries/hwk.conf")
			for _, want := range []string{
				"linux /vmlinuz-" + tc.kver + "\n",
				"initrd /initrd.img-" + tc.kver + "\n",
				" rw console=tty0 console=ttyS0,115200\n",
			} {
				if !strings.Contains(entry, want) {
					t.Errorf("hwk.conf = %q, want it to contain %q", entry, want)
				}
			}
			m := regexp.MustCompile(`root=PARTUUID=([0-9a-f-]+) `).FindStringSubmatch(entry)
			if m == nil {
				t.Fatalf("hwk.conf = %q, want root=PARTUUID=", entry)
			}
			part := run1(t, "sgdisk", "-i", "2", raw)
			for _, want := range []string{
				"Partition unique GUID: " + strings.ToUpper(m[1]) + "\n",
				"Partition GUID code: 4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709", // x86-64 root
				"First sector: 526336 ",                                     // after 1 MiB and the 256 MiB ESP
			} {
				if !strings.Contains(part, want) {
					t.Errorf("sgdisk -i 2:\n%s\nwant it to contain %q", part, want)
				}
			}
			if esp := run1(t, "sgdisk", "-i", "1", raw); !strings.Contains(esp, "C12A7328-F81F-11D2-BA4B-00A0C93EC93B") {
				t.Errorf("partition 1 is not an ESP:\n%s", esp)
			}
			if v := run1(t, "sgdisk", "--verify", raw); !strings.Contains(v, "No problems found") {
				t.Errorf("sgdisk --verify:\n%s", v)
			}
			for src, dst := range map[string]string{
				"usr/lib/systemd/boot/efi/systemd-bootx64.efi": "::/EFI/BOOT/BOOTX64.EFI",
				"boot/vmlinuz-" + tc.kver:                      "::/vmlinuz-" + tc.kver,
				"boot/initrd.img-" + tc.kver:                   "::/initrd.img-" + tc.kver,
			} {
				want, err := os.ReadFile(filepath.Join(rootfs, src))
				if err != nil {
					t.Fatal(err)
				}
				if got := run1(t, "mtype", "-i", esp, dst); got != string(want) {
					t.Errorf("%s in the ESP differs from the rootfs's %s", dst, src)
				}
			}

			// e2fsprogs opens a file system inside a file with ?offset=.
			ext4 := raw + "?offset=" + strconv.Itoa(257*mib)
			if got := run1(t, "debugfs", "-R", "cat /etc/hostname", ext4); got != "fake\n" {
				t.Errorf("/etc/hostname in the root file system = %q", got)
			}
			sb := run1(t, "dumpe2fs", "-h", ext4)
			if !strings.Contains(sb, "Filesystem volume name:   hwk-root\n") {
				t.Errorf("dumpe2fs -h: want label hwk-root:\n%s", sb)
			}
			count := regexp.MustCompile(`Block count:\s+(\d+)\n`).FindStringSubmatch(sb)
			bsize := regexp.MustCompile(`Block size:\s+(\d+)\n`).FindStringSubmatch(sb)
			if count == nil || bsize == nil {
				t.Fatalf("dumpe2fs -h: no block count or size:\n%s", sb)
			}
			n, _ := strconv.Atoi(count[1])
			b, _ := strconv.Atoi(bsize[1])
			// The partition: the disk less the first MiB, the ESP and the
			// last MiB.
			if n*b != (512-1-256-1)*mib {
				t.Errorf("the root file system has %d blocks of %d bytes, want it to fill its %d MiB partition", n, b, 512-1-256-1)
			}
		})
	}
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

// TestBootDebianRootfs builds every format from a real node rootfs and
// boots the qcow2 to systemd's multi-user target. HWK_TEST_ROOTFS names
// the rootfs, such as one made with
//
//	debootstrap --variant=minbase --include=systemd,systemd-sysv,udev,dbus,kmod,linux-image-cloud-amd64,systemd-boot-efi,e2fsprogs,iproute2 bookworm ROOTFS http://deb.debian.org/debian
//
// Without it the test skips, unless HWK_REQUIRE_QEMU=1.
func TestBootDebianRootfs(t *testing.T) {
	rootfs := os.Getenv("HWK_TEST_ROOTFS")
	if rootfs == "" {
		if os.Getenv("HWK_REQUIRE_QEMU") == "1" {
			t.Fatal("HWK_REQUIRE_QEMU=1 but HWK_TEST_ROOTFS names no rootfs")
		}
		t.Skip("HWK_TEST_ROOTFS is not set")
	}
	if testing.Short() {
		t.Skip("integration test; -short skips it")
	}
	requireTools(t, "qemu-img", "qemu-system-x86_64", "mkfs.ext4", "mkfs.fat", "mcopy", "sgdisk")
	ctx := context.Background()
	out := t.TempDir()
	const size = 20 * gib
	start := time.Now()
	disks, err := Build(ctx, diskScript(t), rootfs, out, size, Formats, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Build took %s", time.Since(start).Round(time.Millisecond))
	for _, f := range Formats {
		format, vsize, err := Info(ctx, disks[f])
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(disks[f])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes", disks[f], fi.Size())
		if format != f || vsize != size {
			t.Errorf("Info(%s) = %s, %d; want %s, %d", disks[f], format, vsize, f, int64(size))
		}
	}
	if _, err := os.Stat(filepath.Join(out, "disk.raw")); err == nil {
		t.Error("Build left disk.raw behind")
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
