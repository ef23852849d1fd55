package debian_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/debian"
	"github.com/hwk-dev/hwk/internal/testing/debtest"
)

const (
	passwdMaster = "root:*:0:0:root:/root:/bin/bash\ndaemon:*:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
	groupMaster  = "root:*:0:\ndaemon:*:1:\nshadow:*:42:\n"
)

// rootDebs look like a tiny bookworm: base-files ships into /bin and a
// conffile, base-passwd its masters, libc6 (Multi-Arch: same) the dynamic
// loader under /lib64, and the triggers of libc-bin and systemd. They use
// each compression a .deb can have (xz, gz, zst).
var rootDebs = []debtest.Deb{
	{Package: "base-files", Version: "12.4+deb12u15", Essential: true, Priority: "required",
		Control: map[string]string{"conffiles": "/etc/host.conf\n", "postinst": "#!/bin/sh\nchown root:root /etc\n"},
		Files: []debtest.File{
			{Path: "/bin", Mode: fs.ModeDir | 0o755},
			{Path: "/etc/host.conf", Body: "multi on\n"},
			{Path: "/etc/debian_version", Body: "12.15\n"},
		}},
	{Package: "base-passwd", Version: "3.6.1", Essential: true, Priority: "required",
		Files: []debtest.File{
			{Path: "/usr/share/base-passwd/passwd.master", Body: passwdMaster},
			{Path: "/usr/share/base-passwd/group.master", Body: groupMaster},
		}},
	{Package: "libc6", Version: "2.36-9+deb12u13", MultiArch: "same", Priority: "optional",
		Control: map[string]string{"postinst": "#!/bin/sh\n", "shlibs": "libc 6 libc6\n", "triggers": "activate-noawait ldconfig\n"},
		Files: []debtest.File{
			{Path: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", Mode: 0o755, Body: "\x7fELF loader"},
			{Path: "/lib64/ld-linux-x86-64.so.2", Mode: fs.ModeSymlink, Link: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
			{Path: "/usr/lib/x86_64-linux-gnu/libc.so.6", Mode: 0o755, Body: "\x7fELF libc"},
		}},
	{Package: "libc-bin", Version: "2.36-9+deb12u13", Essential: true, Priority: "required", Compression: "gz",
		Control: map[string]string{"triggers": "# ldconfig for everyone\ninterest-noawait ldconfig\n"},
		Files:   []debtest.File{{Path: "/sbin/ldconfig", Mode: 0o755, Body: "ldconfig"}}},
	{Package: "systemd", Version: "252.39-1~deb12u1", Priority: "important", Compression: "zst",
		Control: map[string]string{"triggers": "interest-noawait /usr/lib/systemd/catalog\ninterest /usr/lib/sysusers.d\n"},
		Files: []debtest.File{
			{Path: "/usr/lib/systemd/catalog/systemd.catalog", Body: "catalog"},
			{Path: "/bin/systemctl", Mode: 0o755, Body: "systemctl"},
		}},
	{Package: "perl-base", Version: "5.36.0-7+deb12u3", Essential: true, Priority: "required",
		Files: []debtest.File{
			{Path: "/usr/bin/perl", Mode: 0o755, Body: "perl"},
			{Path: "/usr/bin/perl5.36.0", Mode: 0o755, Hardlink: "/usr/bin/perl"},
		}},
}

// writeDebs builds the packages into dir and returns them as Assemble
// takes them.
func writeDebs(t *testing.T, dir string, debs []debtest.Deb) []debian.Deb {
	t.Helper()
	var out []debian.Deb
	for _, d := range debs {
		data, err := d.Build()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(d.Filename()))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, debian.Deb{Path: p, Package: debian.LockedPackage{
			Name: d.Package, Version: d.Version, Architecture: "amd64", MultiArch: d.MultiArch, Filename: d.Filename(),
		}})
	}
	return out
}

type entry struct {
	h    *tar.Header
	body string
}

// assemble runs Assemble and, when it succeeds, checks that the tar has
// each path once, as the raw-disk writer needs it.
func assemble(t *testing.T, debs []debian.Deb) ([]byte, error) {
	t.Helper()
	var b bytes.Buffer
	err := debian.Assemble(context.Background(), &b, debs, debian.AssembleOptions{})
	if err == nil {
		noPathTwice(t, bytes.NewReader(b.Bytes()))
	}
	return b.Bytes(), err
}

// noPathTwice fails the test for each path the tar has more than once.
// The disk writer refuses a non-directory twice (internal/format/diskimage cannot
// replace a file in place); directories are checked too, since the
// assembler writes each once.
// It returns how many paths the tar has.
func noPathTwice(t *testing.T, r io.Reader) int {
	t.Helper()
	seen := map[string]bool{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return len(seen)
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if seen[name] {
			t.Errorf("%s (type %c) is in the tar twice", name, h.Typeflag)
		}
		seen[name] = true
	}
}

func mustAssemble(t *testing.T, debs []debtest.Deb) (map[string]entry, []entry) {
	t.Helper()
	out, err := assemble(t, writeDebs(t, t.TempDir(), debs))
	if err != nil {
		t.Fatal(err)
	}
	return readTar(t, out)
}

func readTar(t *testing.T, data []byte) (map[string]entry, []entry) {
	t.Helper()
	byName := map[string]entry{}
	var all []entry
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		e := entry{h, string(b)}
		name := strings.TrimSuffix(h.Name, "/")
		if name == "" || name == "." || strings.HasPrefix(name, "/") || strings.HasPrefix(name, "./") {
			t.Errorf("entry %q is not a plain relative path", h.Name)
		}
		byName[name] = e
		all = append(all, e)
	}
	return byName, all
}

func TestMergedUsrSymlinksFirst(t *testing.T) {
	byName, all := mustAssemble(t, rootDebs)
	for i, d := range []string{"bin", "sbin", "lib", "lib64"} {
		h := all[i].h
		if h.Typeflag != tar.TypeSymlink || h.Name != d || h.Linkname != "usr/"+d {
			t.Errorf("entry %d is %q (type %c) -> %q, want the symlink %s -> usr/%s", i, h.Name, h.Typeflag, h.Linkname, d, d)
		}
	}
	for name := range byName {
		top, _, found := strings.Cut(name, "/")
		if found && (top == "bin" || top == "sbin" || top == "lib" || top == "lib64") {
			t.Errorf("%s is not under usr/", name)
		}
	}
	for _, want := range []string{"usr/bin/systemctl", "usr/sbin/ldconfig", "usr/lib64/ld-linux-x86-64.so.2", "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"} {
		if _, ok := byName[want]; !ok {
			t.Errorf("no %s", want)
		}
	}
}

func TestListsKeepShippedPaths(t *testing.T) {
	byName, _ := mustAssemble(t, rootDebs)
	if h := byName["usr/lib64/ld-linux-x86-64.so.2"].h; h == nil || h.Typeflag != tar.TypeSymlink {
		t.Fatalf("the loader is not at usr/lib64 in the tar")
	}
	list := byName["var/lib/dpkg/info/libc6:amd64.list"].body
	lines := strings.Split(list, "\n")
	for _, want := range []string{"/.", "/lib64", "/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/usr/lib/x86_64-linux-gnu/libc.so.6"} {
		if !contains(lines, want) {
			t.Errorf("libc6:amd64.list lacks %s:\n%s", want, list)
		}
	}
	if lines[0] != "/." || contains(lines[1:], "/.") || contains(lines, "/") || contains(lines[:len(lines)-1], "") {
		t.Errorf("libc6:amd64.list does not name the root once, as /., first, or has an empty line:\n%s", list)
	}
	if strings.Contains(list, "/usr/lib64") {
		t.Errorf("libc6:amd64.list names the merged path, not the shipped one:\n%s", list)
	}
	if l := byName["var/lib/dpkg/info/systemd.list"].body; !strings.Contains(l, "\n/bin/systemctl\n") {
		t.Errorf("systemd.list lacks /bin/systemctl:\n%s", l)
	}
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

func TestPasswdFirst(t *testing.T) {
	_, all := mustAssemble(t, rootDebs)
	var regular []entry
	for _, e := range all {
		if e.h.Typeflag == tar.TypeReg {
			regular = append(regular, e)
		}
	}
	if len(regular) < 2 || regular[0].h.Name != "etc/passwd" || regular[1].h.Name != "etc/group" {
		t.Fatalf("the first regular files are not etc/passwd and etc/group: %q %q", regular[0].h.Name, regular[1].h.Name)
	}
	if regular[0].body != passwdMaster || regular[1].body != groupMaster {
		t.Errorf("passwd/group are not base-passwd's masters:\n%s\n%s", regular[0].body, regular[1].body)
	}
	if regular[0].h.Mode != 0o644 || regular[0].h.Uid != 0 || regular[0].h.Gid != 0 {
		t.Errorf("etc/passwd: mode %o owner %d:%d, want 644 0:0", regular[0].h.Mode, regular[0].h.Uid, regular[0].h.Gid)
	}
}

func TestMultiArchSameInfoNames(t *testing.T) {
	byName, _ := mustAssemble(t, rootDebs)
	for _, want := range []string{
		"var/lib/dpkg/info/libc6:amd64.list", "var/lib/dpkg/info/libc6:amd64.postinst",
		"var/lib/dpkg/info/libc6:amd64.shlibs", "var/lib/dpkg/info/libc6:amd64.triggers",
		"var/lib/dpkg/info/base-files.list", "var/lib/dpkg/info/base-files.postinst",
		"var/lib/dpkg/info/libc-bin.list", "var/lib/dpkg/info/format",
		"var/lib/dpkg/available", "var/lib/dpkg/diversions", "var/lib/dpkg/statoverride",
	} {
		if _, ok := byName[want]; !ok {
			t.Errorf("no %s", want)
		}
	}
	if _, ok := byName["var/lib/dpkg/info/libc6.list"]; ok {
		t.Error("libc6.list without the architecture")
	}
	if h := byName["var/lib/dpkg/info/libc6:amd64.postinst"].h; h.Mode != 0o755 {
		t.Errorf("postinst mode %o, want 755", h.Mode)
	}
	status := byName["var/lib/dpkg/status"].body
	for _, want := range []string{"Package: libc6\nStatus: install ok unpacked\n", "Package: base-files\nStatus: install ok unpacked\n", "Multi-Arch: same\n"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	if n := strings.Count(status, "Status: install ok unpacked\n"); n != len(rootDebs) {
		t.Errorf("%d packages unpacked in status, want %d", n, len(rootDebs))
	}
}

func TestConffilesNewconffile(t *testing.T) {
	byName, _ := mustAssemble(t, rootDebs)
	status := byName["var/lib/dpkg/status"].body
	para := paragraph(status, "base-files")
	if !strings.Contains(para, "Conffiles:\n /etc/host.conf newconffile\nDescription:") {
		t.Errorf("base-files' status paragraph lacks the newconffile entry before Description:\n%s", para)
	}
	if strings.Contains(paragraph(status, "libc6"), "Conffiles") {
		t.Error("libc6 has no conffiles but a Conffiles field")
	}
	if _, ok := byName["etc/host.conf"]; ok {
		t.Error("the conffile is at its final name; dpkg --unpack leaves it as .dpkg-new")
	}
	if e, ok := byName["etc/host.conf.dpkg-new"]; !ok || e.body != "multi on\n" {
		t.Errorf("no etc/host.conf.dpkg-new with the shipped content")
	}
	if l := byName["var/lib/dpkg/info/base-files.list"].body; !strings.Contains(l, "\n/etc/host.conf\n") {
		t.Errorf("base-files.list lacks /etc/host.conf:\n%s", l)
	}
	if c := byName["var/lib/dpkg/info/base-files.conffiles"].body; c != "/etc/host.conf\n" {
		t.Errorf("info/base-files.conffiles = %q", c)
	}
}

func paragraph(status, name string) string {
	for _, p := range strings.Split(status, "\n\n") {
		if strings.HasPrefix(p, "Package: "+name+"\n") {
			return p
		}
	}
	return ""
}

func TestTriggersRegistered(t *testing.T) {
	byName, _ := mustAssemble(t, rootDebs)
	if got, want := byName["var/lib/dpkg/triggers/File"].body, "/usr/lib/systemd/catalog systemd/noawait\n/usr/lib/sysusers.d systemd\n"; got != want {
		t.Errorf("triggers/File = %q, want %q", got, want)
	}
	if got := byName["var/lib/dpkg/triggers/ldconfig"].body; got != "libc-bin/noawait\n" {
		t.Errorf("triggers/ldconfig = %q: want libc-bin's interest alone (libc6 only activates it)", got)
	}
	if _, ok := byName["var/lib/dpkg/triggers/Unincorp"]; !ok {
		t.Error("no triggers/Unincorp")
	}
}

func TestHardLinksKept(t *testing.T) {
	byName, _ := mustAssemble(t, rootDebs)
	h := byName["usr/bin/perl5.36.0"].h
	if h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "usr/bin/perl" {
		t.Fatalf("usr/bin/perl5.36.0 is not a hard link to usr/bin/perl: %+v", h)
	}
}

func TestStage1Reproducible(t *testing.T) {
	sum := func(dir string) [32]byte {
		out, err := assemble(t, writeDebs(t, dir, rootDebs))
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(out)
	}
	a := sum(t.TempDir())
	b := sum(t.TempDir()) // other paths, other file times on the host
	if a != b {
		t.Errorf("two assemblies of the same .debs differ: %x vs %x", a, b)
	}
	out, _ := assemble(t, writeDebs(t, t.TempDir(), rootDebs))
	_, all := readTar(t, out)
	for _, e := range all {
		if e.h.Uname != "" || e.h.Gname != "" || !e.h.AccessTime.IsZero() || !e.h.ChangeTime.IsZero() {
			t.Errorf("%s carries user names or host times: %+v", e.h.Name, e.h)
		}
	}
}

// TestFileOverlapRefused checks that two packages shipping a file, neither
// replacing the other (or only a version the other is not), is an error in
// either order, as dpkg refuses to unpack the second.
func TestFileOverlapRefused(t *testing.T) {
	a := debtest.Deb{Package: "coreutils", Version: "9.1-1", Files: []debtest.File{{Path: "/bin/kill", Body: "a"}}}
	b := debtest.Deb{Package: "procps", Version: "2:4.0.2-3", Files: []debtest.File{{Path: "/usr/bin/kill", Body: "b"}}}
	for _, replaces := range []string{"", "coreutils (<< 9.1)", "coreutils-old"} {
		b.Replaces = replaces
		for _, order := range [][]debtest.Deb{{a, b}, {b, a}} {
			_, err := assemble(t, writeDebs(t, t.TempDir(), order))
			if err == nil {
				t.Fatalf("Replaces %q, %s first: two packages shipping /usr/bin/kill (one through /bin) were assembled", replaces, order[0].Package)
			}
			for _, want := range []string{"coreutils 9.1-1", "procps 2:4.0.2-3", " /bin/kill ", " /usr/bin/kill ", "neither declares Replaces"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Replaces %q, %s first: error %q lacks %q", replaces, order[0].Package, err, want)
				}
			}
		}
	}
}

// replacesDebs returns procps, which Replaces coreutils, and coreutils, which
// ship the same kill (coreutils through the merged /bin), a conffile
// and, as a symlink in one and a file in the other, pkill.
func replacesDebs() (replaced, replacing debtest.Deb) {
	replaced = debtest.Deb{Package: "coreutils", Version: "9.1-1",
		Control: map[string]string{"conffiles": "/etc/kill.conf\n"},
		Files: []debtest.File{
			{Path: "/bin/kill", Mode: 0o755, Body: "coreutils kill"},
			{Path: "/bin/ls", Mode: 0o755, Body: "ls"},
			{Path: "/etc/kill.conf", Body: "coreutils conf"},
			{Path: "/usr/bin/pkill", Mode: fs.ModeSymlink, Link: "kill"},
		}}
	replacing = debtest.Deb{Package: "procps", Version: "2:4.0.2-3", Replaces: "coreutils (<< 9.2), bsdutils",
		Control: map[string]string{"conffiles": "/etc/kill.conf\n"},
		Files: []debtest.File{
			{Path: "/usr/bin/kill", Mode: 0o755, Body: "procps kill"},
			{Path: "/etc/kill.conf", Body: "procps conf"},
			{Path: "/usr/bin/pkill", Mode: 0o755, Body: "procps pkill"},
		}}
	return replaced, replacing
}

// TestReplacesKeepsReplacingCopy checks dpkg's outcome of Replaces in
// either unpack order: the replacing package's copy is on disk, once, and
// in its list; the replaced package's list and Conffiles no longer have
// it.
func TestReplacesKeepsReplacingCopy(t *testing.T) {
	p, q := replacesDebs()
	for _, order := range [][]debtest.Deb{{p, q}, {q, p}} {
		t.Run(order[0].Package+"-first", func(t *testing.T) {
			byName, _ := mustAssemble(t, order)
			for name, want := range map[string]string{
				"usr/bin/kill":           "procps kill",
				"usr/bin/pkill":          "procps pkill",
				"etc/kill.conf.dpkg-new": "procps conf",
				"usr/bin/ls":             "ls",
			} {
				e, ok := byName[name]
				if !ok || e.h.Typeflag != tar.TypeReg || e.body != want {
					t.Errorf("%s: got %v %q, want a file holding %q", name, ok, e.body, want)
				}
			}
			lines := func(name string) []string {
				return strings.Split(byName["var/lib/dpkg/info/"+name+".list"].body, "\n")
			}
			for _, l := range []string{"/bin/kill", "/usr/bin/pkill", "/etc/kill.conf"} {
				if contains(lines("coreutils"), l) {
					t.Errorf("the replaced %s stays in coreutils.list:\n%s", l, byName["var/lib/dpkg/info/coreutils.list"].body)
				}
			}
			if !contains(lines("coreutils"), "/bin/ls") {
				t.Errorf("coreutils.list lacks /bin/ls, which nothing replaces")
			}
			for _, l := range []string{"/usr/bin/kill", "/usr/bin/pkill", "/etc/kill.conf"} {
				if !contains(lines("procps"), l) {
					t.Errorf("procps.list lacks %s:\n%s", l, byName["var/lib/dpkg/info/procps.list"].body)
				}
			}
			status := byName["var/lib/dpkg/status"].body
			if para := paragraph(status, "coreutils"); strings.Contains(para, "Conffiles") {
				t.Errorf("coreutils keeps the replaced conffile:\n%s", para)
			}
			if para := paragraph(status, "procps"); !strings.Contains(para, "Conffiles:\n /etc/kill.conf newconffile\n") {
				t.Errorf("procps lacks its conffile:\n%s", para)
			}
		})
	}
}

// TestReplacesEachOther checks that when two packages replace each other,
// the later one in unpack order wins, as dpkg lets the one it unpacks
// overwrite the one already there.
func TestReplacesEachOther(t *testing.T) {
	p := debtest.Deb{Package: "mawk", Version: "1.3.4-1", Replaces: "gawk", Files: []debtest.File{{Path: "/usr/bin/awk", Body: "mawk"}}}
	q := debtest.Deb{Package: "gawk", Version: "1:5.2.1-2", Replaces: "mawk", Files: []debtest.File{{Path: "/usr/bin/awk", Body: "gawk"}}}
	for _, order := range [][]debtest.Deb{{p, q}, {q, p}} {
		byName, _ := mustAssemble(t, order)
		last := order[1].Package
		if got := byName["usr/bin/awk"].body; got != last {
			t.Errorf("%s first: usr/bin/awk holds %q, want %q's", order[0].Package, got, last)
		}
		if l := byName["var/lib/dpkg/info/"+order[0].Package+".list"].body; strings.Contains(l, "/usr/bin/awk") {
			t.Errorf("%s first: its list keeps /usr/bin/awk:\n%s", order[0].Package, l)
		}
		if l := byName["var/lib/dpkg/info/"+last+".list"].body; !strings.Contains(l, "/usr/bin/awk") {
			t.Errorf("%s first: %s.list lacks /usr/bin/awk:\n%s", order[0].Package, last, l)
		}
	}
}

// TestReplacedHardLinkTargetRefused checks that a hard link of the replaced
// package to a file another package replaces is refused: it has no file of
// its own package to point to.
func TestReplacedHardLinkTargetRefused(t *testing.T) {
	p, q := replacesDebs()
	p.Files = append(p.Files, debtest.File{Path: "/bin/kill.old", Hardlink: "/bin/kill"})
	_, err := assemble(t, writeDebs(t, t.TempDir(), []debtest.Deb{p, q}))
	if err == nil || !strings.Contains(err.Error(), "/bin/kill.old is a hard link to /bin/kill, which package procps replaces") {
		t.Errorf("a hard link to a replaced file was not refused: %v", err)
	}
}

func TestAssembleRefusesWrongPackage(t *testing.T) {
	debs := writeDebs(t, t.TempDir(), rootDebs[:1])
	debs[0].Package.Name = "base-passwd"
	_, err := assemble(t, debs)
	if err == nil || !strings.Contains(err.Error(), "relock") {
		t.Errorf("a .deb of another package than the lock's was not refused: %v", err)
	}
}
