package diskimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/ext4"

	"github.com/hwk-dev/hwk/internal/hostexec"
)

// requireOracles skips the test when a tool that checks the disk is
// missing, unless HWK_REQUIRE_DISK_ORACLES=1, where it fails: the writer
// needs none of them, only its tests do.
func requireOracles(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join("/usr/sbin", name)); err == nil {
			continue
		}
		pkg := map[string]string{"e2fsck": "e2fsprogs", "debugfs": "e2fsprogs", "dumpe2fs": "e2fsprogs", "sgdisk": "gdisk", "mdir": "mtools", "mtype": "mtools", "fsck.fat": "dosfstools", "qemu-img": "qemu-utils", "qemu-io": "qemu-utils"}[name]
		if os.Getenv("HWK_REQUIRE_DISK_ORACLES") == "1" {
			t.Fatalf("HWK_REQUIRE_DISK_ORACLES=1 but %s is missing (Debian: apt-get install %s)", name, pkg)
		}
		t.Skipf("%s is missing (Debian: apt-get install %s); the disk cannot be checked here", name, pkg)
	}
}

// tarEntry is one entry of a test rootfs tar.
type tarEntry struct {
	hdr  tar.Header
	data []byte
}

func dirEntry(name string, mode int64) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}}
}

func fileEntry(name string, mode int64, data []byte) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data: data}
}

func symlinkEntry(name, target string) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
}

var testMtime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func makeTar(t testing.TB, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		if h.ModTime.IsZero() {
			h.ModTime = testMtime
		}
		if h.Format == tar.FormatUnknown && h.PAXRecords != nil {
			h.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bootEntries returns a made-up kernel pair per version and systemd-boot:
// enough for the writer, which never runs what it copies.
func bootEntries(versions ...string) []tarEntry {
	es := []tarEntry{dirEntry("./boot/", 0o755)}
	for _, v := range versions {
		es = append(es,
			fileEntry("./boot/vmlinuz-"+v, 0o644, randBytes(2*mib+17)),
			fileEntry("./boot/initrd.img-"+v, 0o644, randBytes(3*mib+5)))
	}
	return append(es, fileEntry("./usr/lib/systemd/boot/efi/systemd-bootx64.efi", 0o644, randBytes(100<<10)))
}

// sparseish returns a file mostly of zeros with data at both ends and in the
// middle: its holes must read back as zeros, and the disk file stays
// sparse.
func sparseish(size int) []byte {
	b := make([]byte, size)
	copy(b, randBytes(mib))
	copy(b[size/2:], randBytes(mib))
	copy(b[size-mib-3:], randBytes(mib+3))
	return b
}

func testRootfs() []tarEntry {
	es := []tarEntry{
		dirEntry("./", 0o755),
		dirEntry("./etc/", 0o755),
		fileEntry("./etc/hostname", 0o644, []byte("node\n")),
		fileEntry("./etc/motd", 0o644, []byte("second\n")),
		fileEntry("./etc/zero-mode", 0, []byte("nobody may read this\n")),
		dirEntry("./tmp/", 0o1777),
		dirEntry("./root/", 0o700),
		dirEntry("./dev/", 0o755),
		{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "./dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3}},
		dirEntry("./dev/pts/", 0o755),
		// usr/bin comes with no directory entry of its own.
		fileEntry("./usr/bin/sudo", 0o4755, randBytes(5000)),
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "./usr/bin/wall", Mode: 0o2755, Gid: 5, Size: 3}, data: []byte("abc")},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "./usr/bin/ping", Mode: 0o755, Size: 4,
			PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}},
			data: []byte("ping")},
		fileEntry("./usr/bin/perl5.36.0", 0o755, randBytes(70000)),
		{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "./usr/bin/perl", Linkname: "./usr/bin/perl5.36.0"}},
		symlinkEntry("./bin", "usr/bin"),
		symlinkEntry("./usr/bin/long-link", "../../"+strings.Repeat("a-long-directory-name/", 4)+"target"),
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "./home/u/", Mode: 0o750, Uid: 1000, Gid: 1001}},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "./home/u/notes", Mode: 0o600, Uid: 1000, Gid: 1001, Size: 6,
			ModTime: time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)}, data: []byte("notes\n")},
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "./var/log/journal/", Mode: 0o2755, Gid: 101, PAXRecords: map[string]string{
			"SCHILY.xattr.system.posix_acl_access":  "\x02\x00\x00\x00",
			"SCHILY.xattr.system.posix_acl_default": "\x02\x00\x00\x00",
		}}},
		fileEntry("./var/lib/big", 0o644, sparseish(40*mib)),
		fileEntry("./var/lib/empty", 0o644, nil),
	}
	es = append(es, bootEntries(oldKernel, newKernel)...)
	// /vmlinuz names the older kernel, as Debian's would after a
	// downgrade: the link wins over the version order.
	return append(es, symlinkEntry("./vmlinuz", "boot/vmlinuz-"+oldKernel), symlinkEntry("./initrd.img", "/boot/initrd.img-"+oldKernel))
}

// oracle runs a checking tool and returns its standard output; sbin is
// searched as well, being off a normal user's PATH.
func oracle(t *testing.T, name string, args ...string) string {
	t.Helper()
	return run1(t, name, args...)
}

func TestWriteRawDisk(t *testing.T) {
	requireOracles(t, "e2fsck", "debugfs", "dumpe2fs", "sgdisk", "mdir", "mtype")
	entries := testRootfs()
	out := filepath.Join(t.TempDir(), "disk.raw")
	size := int64(512*mib + 1000) // rounded down to whole MiB
	start := time.Now()
	res, err := WriteRawDisk(context.Background(), bytes.NewReader(makeTar(t, entries)), out, RawDiskOptions{Size: size, CmdlineExtra: "quiet"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s in %v: %+v", out, time.Since(start), *res)
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 1 {
		t.Errorf("the output directory holds %v, want the disk only", entries)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 512*mib || res.Size != 512*mib {
		t.Errorf("disk is %d bytes (reported %d), want %d", fi.Size(), res.Size, 512*mib)
	}
	if runtime.GOOS == "linux" {
		// 50 MiB of data, a few MiB of metadata; without sparseFile the
		// inode tables and journal alone would be over 40 MiB.
		if used := diskUsage(fi); used > 64*mib {
			t.Errorf("the disk uses %d MiB on the host, want it sparse", used/mib)
		}
	}
	if res.KernelVersion != oldKernel || res.Kernel != "/boot/vmlinuz-"+oldKernel || res.Initrd != "/boot/initrd.img-"+oldKernel {
		t.Errorf("kernel %q %q %q, want /vmlinuz's", res.KernelVersion, res.Kernel, res.Initrd)
	}
	if res.HardLinkCopies != 1 || res.SkippedDevices != 1 {
		t.Errorf("result %+v: want 1 hard link copy, 1 device skipped", *res)
	}
	wantDropped := []string{
		"/usr/bin/ping security.capability: made setuid instead",
		"/var/log/journal system.posix_acl_access: left out",
		"/var/log/journal system.posix_acl_default: left out",
	}
	if len(res.DroppedXattrs) != len(wantDropped) {
		t.Errorf("DroppedXattrs = %q, want %d", res.DroppedXattrs, len(wantDropped))
	} else {
		for i, want := range wantDropped {
			if !strings.HasPrefix(res.DroppedXattrs[i], want) {
				t.Errorf("DroppedXattrs[%d] = %q, want it to start with %q", i, res.DroppedXattrs[i], want)
			}
		}
	}

	// The partition table.
	if v := oracle(t, "sgdisk", "--verify", out); !strings.Contains(v, "No problems found") {
		t.Errorf("sgdisk --verify:\n%s", v)
	}
	p1 := oracle(t, "sgdisk", "-i", "1", out)
	for _, want := range []string{
		"Partition GUID code: C12A7328-F81F-11D2-BA4B-00A0C93EC93B",
		"First sector: 2048 ",
		"Last sector: 526335 ",
		"Partition name: 'EFI system partition'",
	} {
		if !strings.Contains(p1, want) {
			t.Errorf("sgdisk -i 1:\n%s\nwant it to contain %q", p1, want)
		}
	}
	p2 := oracle(t, "sgdisk", "-i", "2", out)
	for _, want := range []string{
		"Partition GUID code: 4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709", // x86-64 root
		"Partition unique GUID: " + strings.ToUpper(res.RootPartUUID) + "\n",
		"First sector: 526336 ", // after 1 MiB and the 256 MiB ESP
		"Last sector: 1046527 ", // the last MiB left for the backup GPT
		"Partition name: 'hwk-root'",
	} {
		if !strings.Contains(p2, want) {
			t.Errorf("sgdisk -i 2:\n%s\nwant it to contain %q", p2, want)
		}
	}

	// The ESP, through mtools.
	esp := out + "@@1M"
	if dir := oracle(t, "mdir", "-i", esp, "-/", "::/"); !strings.Contains(dir, "HWK-ESP") {
		t.Errorf("mdir: want volume label HWK-ESP:\n%s", dir)
	}
	entry := oracle(t, "mtype", "-i", esp, "::/loader/entries/hwk.conf")
	wantEntry := fmt.Sprintf("title hwk node (Linux %[1]s)\nlinux /vmlinuz-%[1]s\ninitrd /initrd.img-%[1]s\noptions root=PARTUUID=%[2]s rw console=tty0 console=ttyS0,115200 quiet\n", oldKernel, res.RootPartUUID)
	if entry != wantEntry {
		t.Errorf("hwk.conf =\n%s\nwant\n%s", entry, wantEntry)
	}
	m := regexp.MustCompile(`root=PARTUUID=([0-9a-f-]{36}) `).FindStringSubmatch(entry)
	if m == nil || !strings.Contains(p2, "Partition unique GUID: "+strings.ToUpper(m[1])+"\n") {
		t.Errorf("hwk.conf's PARTUUID is not partition 2's:\n%s\n%s", entry, p2)
	}
	if got := oracle(t, "mtype", "-i", esp, "::/loader/loader.conf"); got != "default hwk.conf\ntimeout 0\neditor no\n" {
		t.Errorf("loader.conf = %q", got)
	}
	byName := map[string][]byte{}
	for _, e := range entries {
		byName[strings.TrimPrefix(e.hdr.Name, "./")] = e.data
	}
	for dst, src := range map[string]string{
		"::/EFI/BOOT/BOOTX64.EFI":    "usr/lib/systemd/boot/efi/systemd-bootx64.efi",
		"::/vmlinuz-" + oldKernel:    "boot/vmlinuz-" + oldKernel,
		"::/initrd.img-" + oldKernel: "boot/initrd.img-" + oldKernel,
	} {
		if got := oracle(t, "mtype", "-i", esp, dst); got != string(byName[src]) {
			t.Errorf("%s in the ESP (%d bytes) differs from the rootfs's %s (%d bytes)", dst, len(got), src, len(byName[src]))
		}
	}

	// The root file system: e2fsck, then each kind of entry via debugfs.
	ext4 := out + "?offset=" + strconv.Itoa(257*mib)
	e2fsck(t, ext4)
	sb := oracle(t, "dumpe2fs", "-h", ext4)
	for _, want := range []string{"Filesystem volume name:   hwk-root\n", "has_journal", "Block size:               4096\n", "Block count:              " + strconv.Itoa((512-1-256-1)*mib/4096) + "\n"} {
		if !strings.Contains(sb, want) {
			t.Errorf("dumpe2fs -h: want %q:\n%s", want, sb)
		}
	}
	debugfs := func(cmd string) string { return oracle(t, "debugfs", "-R", cmd, ext4) }
	for _, c := range []struct{ path, mode, uid, gid string }{
		{"/", "0755", "0", "0"},
		{"/usr/bin/sudo", "04755", "0", "0"},
		{"/usr/bin/wall", "02755", "0", "5"},
		{"/usr/bin/ping", "04755", "0", "0"},
		{"/tmp", "01777", "0", "0"},
		{"/root", "0700", "0", "0"},
		{"/etc/zero-mode", "0000", "0", "0"},
		{"/home/u", "0750", "1000", "1001"},
		{"/home/u/notes", "0600", "1000", "1001"},
		{"/usr", "0755", "0", "0"}, // made for ./usr/bin/sudo
		{"/usr/bin/perl", "0755", "0", "0"},
		{"/var/log/journal", "02755", "0", "101"},
	} {
		st := debugfs("stat " + c.path)
		re := regexp.MustCompile(`Mode:\s+(\d+)`).FindStringSubmatch(st)
		ow := regexp.MustCompile(`User:\s+(\d+)\s+Group:\s+(\d+)`).FindStringSubmatch(st)
		if re == nil || ow == nil || strings.TrimLeft(re[1], "0") != strings.TrimLeft(c.mode, "0") || ow[1] != c.uid || ow[2] != c.gid {
			t.Errorf("%s: want mode %s owner %s:%s; debugfs stat:\n%s", c.path, c.mode, c.uid, c.gid, st)
		}
	}
	if st := debugfs("stat /home/u/notes"); !strings.Contains(st, "mtime: 0x5e0d5da5") {
		t.Errorf("/home/u/notes: want mtime 2020-01-02T03:04:05Z (0x5e0d5da5):\n%s", st)
	}
	if st := debugfs("stat /etc/hostname"); !strings.Contains(st, fmt.Sprintf("mtime: 0x%08x", testMtime.Unix())) {
		t.Errorf("/etc/hostname: want mtime %v:\n%s", testMtime, st)
	}
	if st := debugfs("stat /etc"); !strings.Contains(st, fmt.Sprintf("mtime: 0x%08x", testMtime.Unix())) {
		t.Errorf("/etc: want mtime %v:\n%s", testMtime, st)
	}
	for name, want := range map[string]string{
		"/bin":               "usr/bin",
		"/usr/bin/long-link": "../../" + strings.Repeat("a-long-directory-name/", 4) + "target",
		"/vmlinuz":           "boot/vmlinuz-" + oldKernel,
	} {
		st := debugfs("stat " + name)
		fast := regexp.MustCompile(`Fast link dest: "([^"]*)"`).FindStringSubmatch(st)
		if fast != nil {
			if fast[1] != want {
				t.Errorf("%s -> %q, want %q", name, fast[1], want)
			}
			continue
		}
		if !strings.Contains(st, "Type: symlink") {
			t.Errorf("%s is not a symlink:\n%s", name, st)
		}
		// A slow symlink's target is its data.
		if got := debugfs("cat " + name); got != want {
			t.Errorf("%s -> %q, want %q", name, got, want)
		}
	}
	for name, want := range map[string][]byte{
		"/etc/hostname":              []byte("node\n"),
		"/etc/motd":                  []byte("second\n"),
		"/usr/bin/perl":              byName["usr/bin/perl5.36.0"],
		"/var/lib/big":               byName["var/lib/big"],
		"/var/lib/empty":             nil,
		"/boot/vmlinuz-" + newKernel: byName["boot/vmlinuz-"+newKernel],
	} {
		if got := debugfs("cat " + name); sha256.Sum256([]byte(got)) != sha256.Sum256(want) {
			t.Errorf("%s: %d bytes differ from the tar's %d", name, len(got), len(want))
		}
	}
	if st := debugfs("stat /usr/bin/perl"); !strings.Contains(st, "Links: 1") {
		t.Errorf("/usr/bin/perl: want a copy with its own inode:\n%s", st)
	}
	if ls := debugfs("ls -l /dev"); strings.Contains(ls, "null") || !strings.Contains(ls, "pts") {
		t.Errorf("/dev: want pts and no null:\n%s", ls)
	}
}

// e2fsck checks the ext4 at spec (a file?offset=N) read-only and fails the
// test unless it is clean.
func e2fsck(t testing.TB, spec string) {
	t.Helper()
	p, err := exec.LookPath("e2fsck")
	if err != nil {
		p = "/usr/sbin/e2fsck"
	}
	cmd := exec.Command(p, "-fn", spec)
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("e2fsck -fn %s: %v\n%s", spec, err, outb)
		return
	}
	t.Logf("e2fsck -fn: %s", hostexec.LastLines(strings.TrimSpace(string(outb)), 1))
}

// TestVersionLess checks the order sort -V gives kernel names.
func TestVersionLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		less bool
	}{
		{"vmlinuz-6.1.0-9-cloud-amd64", "vmlinuz-6.1.0-10-cloud-amd64", true},
		{"vmlinuz-6.1.0-10-cloud-amd64", "vmlinuz-6.1.0-9-cloud-amd64", false},
		{"vmlinuz-6.1.0-10-amd64", "vmlinuz-6.1.0-10-cloud-amd64", true},
		{"vmlinuz-6.10.0", "vmlinuz-6.9.0", false},
		{"vmlinuz-6.1.0", "vmlinuz-6.1.0", false},
		{"vmlinuz-6.1", "vmlinuz-6.1.0", true},
	} {
		if got := versionLess(c.a, c.b); got != c.less {
			t.Errorf("versionLess(%q, %q) = %v, want %v", c.a, c.b, got, c.less)
		}
	}
}

// TestWriteRawDiskNewestKernel checks that without /vmlinuz the newest
// kernel by version is taken, not the last by name. The ESP is small
// enough here to copy out for fsck.fat, which reads no offset.
func TestWriteRawDiskNewestKernel(t *testing.T) {
	requireOracles(t, "mtype", "e2fsck", "fsck.fat")
	entries := append([]tarEntry{dirEntry("./", 0o755)}, bootEntries(newKernel, oldKernel)...)
	out := filepath.Join(t.TempDir(), "disk.raw")
	res, err := WriteRawDisk(context.Background(), bytes.NewReader(makeTar(t, entries)), out, RawDiskOptions{Size: 400 * mib, ESPMiB: 40})
	if err != nil {
		t.Fatal(err)
	}
	if res.KernelVersion != newKernel || res.Initrd != "/boot/initrd.img-"+newKernel {
		t.Errorf("kernel %s, initrd %s; want %s", res.KernelVersion, res.Initrd, newKernel)
	}
	entry := oracle(t, "mtype", "-i", out+"@@1M", "::/loader/entries/hwk.conf")
	if !strings.Contains(entry, "linux /vmlinuz-"+newKernel+"\n") {
		t.Errorf("hwk.conf = %q, want the newer kernel", entry)
	}
	e2fsck(t, out+"?offset="+strconv.Itoa(41*mib))

	disk, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	espImg := filepath.Join(t.TempDir(), "esp.img")
	img, err := os.Create(espImg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(img, io.NewSectionReader(disk, mib, 40*mib))
	if cerr := img.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	// fsck.fat -n exits 1 for anything it would change. go-diskfs leaves
	// FSInfo's free cluster count "not known" (0xFFFFFFFF), which the FAT
	// specification allows and fsck.fat would fill in; anything else is a
	// fault.
	fsck, err := exec.LookPath("fsck.fat")
	if err != nil {
		fsck = "/usr/sbin/fsck.fat"
	}
	report, err := exec.Command(fsck, "-n", espImg).CombinedOutput()
	var complaints []string
	for _, l := range strings.Split(strings.TrimSpace(string(report)), "\n")[1:] {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "Free cluster summary uninitialized") &&
			l != "Leaving filesystem unchanged." && !strings.HasPrefix(l, espImg+": ") {
			complaints = append(complaints, l)
		}
	}
	if len(complaints) > 0 || (err != nil && !strings.Contains(string(report), "Free cluster summary uninitialized")) {
		t.Errorf("fsck.fat -n: %v\n%s", err, report)
	}
}

// TestWriteRawDiskErrors checks that each error tells what to do, and that
// no disk (nor its temporary) is left behind.
func TestWriteRawDiskErrors(t *testing.T) {
	root := []tarEntry{dirEntry("./", 0o755)}
	withBoot := func(es ...tarEntry) []tarEntry {
		return append(append(append([]tarEntry{}, root...), bootEntries(oldKernel)...), es...)
	}
	noInitrd := append([]tarEntry{}, root...)
	for _, e := range bootEntries(oldKernel) {
		if !strings.Contains(e.hdr.Name, "initrd") {
			noInitrd = append(noInitrd, e)
		}
	}
	for _, c := range []struct {
		name    string
		entries []tarEntry
		opts    RawDiskOptions
		want    string
	}{
		{"no kernel", append(root, fileEntry("./usr/lib/systemd/boot/efi/systemd-bootx64.efi", 0o644, []byte("x"))), RawDiskOptions{}, "no kernel in the rootfs's /boot (install linux-image-cloud-amd64 in the rootfs)"},
		{"no initrd", noInitrd, RawDiskOptions{}, "install initramfs-tools in the rootfs, or run update-initramfs -c -k " + oldKernel + " in it"},
		{"no systemd-boot", append(append([]tarEntry{}, root...), bootEntries(oldKernel)[:3]...), RawDiskOptions{}, "install systemd-boot-efi in the rootfs"},
		{"device outside /dev", withBoot(tarEntry{hdr: tar.Header{Typeflag: tar.TypeBlock, Name: "./etc/sda", Mode: 0o600}}), RawDiskOptions{}, "/etc/sda is a device node or FIFO"},
		{"fifo outside /dev", withBoot(tarEntry{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "./run/initctl", Mode: 0o600}}), RawDiskOptions{}, "/run/initctl is a device node or FIFO"},
		{"xattr", withBoot(tarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "./usr/bin/arping", Mode: 0o755, PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "x", "SCHILY.xattr.user.note": "y"}}}), RawDiskOptions{}, "/usr/bin/arping has extended attributes (security.capability, user.note)"},
		{"ACL", withBoot(tarEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "./etc/secret/", Mode: 0o750, PAXRecords: map[string]string{"SCHILY.xattr.system.posix_acl_access": "x"}}}), RawDiskOptions{}, "/etc/secret has extended attributes (system.posix_acl_access)"},
		{"parent is a symlink", withBoot(symlinkEntry("./lib", "usr/lib"), fileEntry("./lib/x", 0o644, []byte("x"))), RawDiskOptions{}, "/lib/x: its directory /lib is not a directory"},
		{"dotdot", withBoot(fileEntry("../escape", 0o644, nil)), RawDiskOptions{}, `"../escape" climbs out`},
		{"hard link first", withBoot(tarEntry{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "./a", Linkname: "./b"}}), RawDiskOptions{}, "hard link to /b, which the tar has not had"},
		{"disk too small", withBoot(), RawDiskOptions{Size: 300 * mib}, "give at least 337641472 bytes"},
		{"ESP too small", withBoot(), RawDiskOptions{ESPMiB: 20}, "FAT32 needs at least 34 MiB"},
		{"ESP full", append(append([]tarEntry{}, root...), fileEntry("./boot/vmlinuz-"+oldKernel, 0o644, []byte("k")), fileEntry("./boot/initrd.img-"+oldKernel, 0o644, make([]byte, 40*mib)), bootEntries()[1]), RawDiskOptions{ESPMiB: 34}, "a larger one may be needed"},
		{"twice", withBoot(fileEntry("./etc/motd", 0o644, []byte("1")), fileEntry("./etc/motd", 0o644, []byte("2"))), RawDiskOptions{}, "/etc/motd is in the rootfs tar twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "disk.raw")
			opts := c.opts
			if opts.Size == 0 {
				opts.Size = 400 * mib
			}
			_, err := WriteRawDisk(context.Background(), bytes.NewReader(makeTar(t, c.entries)), out, opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, c.want)
			}
			if !strings.Contains(err.Error(), out) {
				t.Errorf("err = %v, want it to name %s", err, out)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a failed write left %v behind", entries)
			}
		})
	}
}

func TestWriteRawDiskCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	_, err := WriteRawDisk(ctx, bytes.NewReader(makeTar(t, bootEntries(oldKernel))), filepath.Join(dir, "disk.raw"), RawDiskOptions{Size: 400 * mib})
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("err = %v, want context canceled", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a canceled write left %v behind", entries)
	}
}

// TestSparseFile checks that zeros over a hole are dropped and zeros over
// data written.
func TestSparseFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := newSparseFile(f, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 64<<10)
	write := func(off int, p []byte) {
		t.Helper()
		if n, err := s.WriteAt(p, int64(off)); err != nil || n != len(p) {
			t.Fatalf("WriteAt(%d bytes at %d) = %d, %v", len(p), off, n, err)
		}
		copy(want[off:], p)
	}
	write(100, bytes.Repeat([]byte{1}, 10000)) // chunks 0-2
	write(5000, make([]byte, 200))             // zeros over data
	write(20000, make([]byte, 30000))          // zeros over a hole
	write(4090, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7})
	write(40000, append(make([]byte, 9000), 9)) // mostly zeros, then data
	if _, err := s.WriteAt(nil, -5); err != nil {
		t.Errorf("an empty write anywhere must succeed: %v", err)
	}
	if _, err := s.WriteAt([]byte{1}, 64<<10); err == nil {
		t.Error("a write past the end succeeded")
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("the file differs from what was written")
	}
}

// BenchmarkWriteRawDisk writes a 1 GiB disk from a tar of about 100 MiB
// of files of mixed sizes (go test -run X -bench WriteRawDisk
// ./internal/format/diskimage/), and checks the first disk it wrote with e2fsck and
// against the tar. make node-image-test writes one from the real node
// root (TestWriteRawDiskFromNodeTar).
func BenchmarkWriteRawDisk(b *testing.B) {
	if _, err := exec.LookPath("e2fsck"); err != nil {
		if _, err := os.Stat("/usr/sbin/e2fsck"); err != nil {
			if os.Getenv("HWK_REQUIRE_DISK_ORACLES") == "1" {
				b.Fatal("HWK_REQUIRE_DISK_ORACLES=1 but there is no e2fsck (Debian: apt-get install e2fsprogs)")
			}
			b.Skip("no e2fsck to check the disk with (Debian: apt-get install e2fsprogs)")
		}
	}
	es := append([]tarEntry{dirEntry("./", 0o755)}, bootEntries(oldKernel)...)
	total := 0
	for i := 0; total < 100*mib; i++ {
		size := []int{0, 300, 4 << 10, 20 << 10, 200 << 10, 3 * mib}[i%6]
		es = append(es, fileEntry(fmt.Sprintf("./usr/share/d%d/f%d", i%40, i), 0o644, randBytes(size)))
		total += size
	}
	tb := makeTar(b, es)
	b.SetBytes(int64(total))
	checked := false
	for b.Loop() {
		out := filepath.Join(b.TempDir(), "disk.raw")
		res, err := WriteRawDisk(context.Background(), bytes.NewReader(tb), out, RawDiskOptions{Size: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		if !checked {
			b.StopTimer()
			fi, _ := os.Stat(out)
			b.Logf("%d files, %d MiB of data (tar %d MiB): %d MiB on the host", res.Files, total/mib, len(tb)/mib, diskUsage(fi)/mib)
			e2fsck(b, out+"?offset="+strconv.Itoa(257*mib))
			compareWithTar(b, out, 257*mib, res.Size-258*mib, tar.NewReader(bytes.NewReader(tb)))
			checked = true
			b.StartTimer()
		}
		os.Remove(out)
	}
}

// TestWriteRawDiskFromNodeTar writes a disk from a node image's
// rootfs.tar.gz when HWK_DISK_FROM_NODE_TAR names one (read only). That
// tar leaves out the kernel paths, so made-up boot files are added at
// its end.
func TestWriteRawDiskFromNodeTar(t *testing.T) {
	src := os.Getenv("HWK_DISK_FROM_NODE_TAR")
	if src == "" {
		t.Skip("HWK_DISK_FROM_NODE_TAR is not set")
	}
	requireOracles(t, "e2fsck", "sgdisk")
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		tr := tar.NewReader(zr)
		tw := tar.NewWriter(pw)
		seen := map[string]bool{}
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			seen[strings.TrimPrefix(hdr.Name, "./")] = true
			if err := tw.WriteHeader(hdr); err != nil {
				pw.CloseWithError(err)
				return
			}
			if _, err := io.Copy(tw, tr); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		// systemd-boot is in the tar already.
		for _, e := range bootEntries(oldKernel)[1:] {
			if seen[strings.TrimPrefix(e.hdr.Name, "./")] {
				continue
			}
			h := e.hdr
			h.ModTime = testMtime
			if err := tw.WriteHeader(&h); err != nil {
				pw.CloseWithError(err)
				return
			}
			if _, err := tw.Write(e.data); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(tw.Close())
	}()
	out := filepath.Join(t.TempDir(), "disk.raw")
	start := time.Now()
	res, err := WriteRawDisk(context.Background(), pr, out, RawDiskOptions{Size: 20 << 30})
	pr.CloseWithError(err)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	fi, _ := os.Stat(out)
	t.Logf("%s: %d dirs, %d files, %d symlinks, %d hard link copies, %d devices skipped, extended attributes dropped %q; 20 GiB disk in %v, %d MiB on the host",
		src, res.Dirs, res.Files, res.Symlinks, res.HardLinkCopies, res.SkippedDevices, res.DroppedXattrs, took.Round(time.Millisecond), diskUsage(fi)/mib)
	if v := oracle(t, "sgdisk", "--verify", out); !strings.Contains(v, "No problems found") {
		t.Errorf("sgdisk --verify:\n%s", v)
	}
	e2fsck(t, out+"?offset="+strconv.Itoa(257*mib))

	// e2fsck checks the structure, not what the files hold: read every
	// file and symlink back and compare it with the tar.
	start = time.Now()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if err := zr.Reset(f); err != nil {
		t.Fatal(err)
	}
	n := compareWithTar(t, out, 257*mib, res.Size-258*mib, tar.NewReader(zr))
	t.Logf("%d files and symlinks read back and equal to the tar's, in %v", n, time.Since(start).Round(time.Millisecond))
}

// compareWithTar reads each regular file and symlink of tr back from the
// ext4 at start in the disk file path, through go-diskfs's reader, and
// fails the test where it differs. A hard link is compared with its
// target's bytes. It returns how many entries it compared.
func compareWithTar(t testing.TB, path string, start, size int64, tr *tar.Reader) int {
	t.Helper()
	b, err := file.OpenFromPath(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	efs, err := ext4.Read(b, size, start, 512)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string][32]byte{}
	n, bad := 0, 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeLink:
			want, ok := sums[strings.TrimPrefix(hdr.Linkname, "./")]
			if hdr.Typeflag == tar.TypeReg {
				h := sha256.New()
				if _, err := io.Copy(h, tr); err != nil {
					t.Fatal(err)
				}
				copy(want[:], h.Sum(nil))
				sums[name], ok = want, true
			}
			g, err := efs.OpenFile(name, os.O_RDONLY)
			if err != nil || !ok {
				t.Errorf("/%s: %v (target known: %v)", name, err, ok)
				bad++
				continue
			}
			h := sha256.New()
			_, err = io.Copy(h, g)
			g.Close()
			if err != nil || [32]byte(h.Sum(nil)) != want {
				t.Errorf("/%s: read back %v, differs from the tar", name, err)
				bad++
			}
			n++
		case tar.TypeSymlink:
			if got, err := efs.ReadLink(name); err != nil || got != hdr.Linkname {
				t.Errorf("/%s -> %q, %v; want %q", name, got, err, hdr.Linkname)
				bad++
			}
			n++
		}
		if bad > 20 {
			t.Fatal("too many differences")
		}
	}
	return n
}

// TestResolve checks that symlinks resolve inside the rootfs, absolute
// ones from its root, through symlinked directories, and that a loop ends.
func TestResolve(t *testing.T) {
	idx := &rootIndex{nodes: map[string]*node{
		".":                     {kind: kindDir},
		"boot":                  {kind: kindDir},
		"boot/vmlinuz-1":        {kind: kindFile},
		"boot/initrd.img-1":     {kind: kindFile},
		"vmlinuz":               {kind: kindSymlink, target: "/boot/../boot/vmlinuz-1"},
		"initrd.img":            {kind: kindSymlink, target: "boot/initrd.img-1"},
		"k":                     {kind: kindSymlink, target: "b"},
		"b":                     {kind: kindSymlink, target: "boot"},
		"loop":                  {kind: kindSymlink, target: "loop2"},
		"loop2":                 {kind: kindSymlink, target: "/loop"},
		"boot/up":               {kind: kindSymlink, target: "../../../boot/vmlinuz-1"},
		"boot/dangling":         {kind: kindSymlink, target: "nothing"},
		"boot/dir":              {kind: kindSymlink, target: "."},
		"boot/vmlinuz-relative": {kind: kindSymlink, target: "vmlinuz-1"},
	}}
	for _, c := range []struct {
		p, want string
		ok      bool
	}{
		{"vmlinuz", "boot/vmlinuz-1", true},
		{"initrd.img", "boot/initrd.img-1", true},
		{"k/vmlinuz-1", "boot/vmlinuz-1", true},
		{"boot/up", "boot/vmlinuz-1", true}, // ".." stops at the root, as in the kernel
		{"boot/dir/dir/vmlinuz-relative", "boot/vmlinuz-1", true},
		{"boot", "boot", false},
		{"boot/dangling", "boot/nothing", false},
		{"loop", "loop", false},
	} {
		got, ok := idx.resolve(c.p)
		if ok != c.ok || (c.ok && got != c.want) {
			t.Errorf("resolve(%q) = %q, %v; want %q, %v", c.p, got, ok, c.want, c.ok)
		}
	}
}

// TestWriteRawDiskNoBoot checks that a root with no kernel, initramfs or
// boot loader (a stage-1 root) makes a disk for a hypervisor that boots a
// kernel of its own: the root file system is whole, the ESP holds nothing.
func TestWriteRawDiskNoBoot(t *testing.T) {
	requireOracles(t, "e2fsck")
	root := makeTar(t, []tarEntry{dirEntry("./", 0o755), dirEntry("./etc/", 0o755), fileEntry("./etc/motd", 0o644, []byte("hi\n"))})
	out := filepath.Join(t.TempDir(), "disk.raw")
	if _, err := WriteRawDisk(context.Background(), bytes.NewReader(root), out, RawDiskOptions{Size: 400 * mib}); err == nil || !strings.Contains(err.Error(), "no kernel") {
		t.Fatalf("without NoBoot: err = %v, want no kernel", err)
	}
	d, err := WriteRawDisk(context.Background(), bytes.NewReader(root), out, RawDiskOptions{Size: 400 * mib, ESPMiB: minESPMiB, NoBoot: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Kernel != "" || d.Initrd != "" || d.Files != 1 {
		t.Errorf("disk = %+v, want no kernel or initrd and one file", d)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	esp := make([]byte, mib)
	if _, err := f.ReadAt(esp, 1*mib); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(esp, make([]byte, mib)) {
		t.Error("the ESP was written")
	}
	e2fsck(t, out+"?offset="+strconv.Itoa((1+minESPMiB)*mib))
}
