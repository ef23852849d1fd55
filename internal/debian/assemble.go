package debian

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"pault.ag/go/debian/dependency"
	"pault.ag/go/debian/version"
)

// Deb is a package to assemble: its lock entry and the local .deb.
type Deb struct {
	Package LockedPackage
	Path    string
}

// AssembleOptions tune Assemble.
type AssembleOptions struct {
	// Arch is dpkg's native architecture; amd64 if empty.
	Arch string
	// ModTime is the modification time of the entries no .deb gives one
	// for (the merged-/usr links, passwd and group, the dpkg database);
	// the Unix epoch if zero, so that the output depends on the .debs
	// alone.
	ModTime time.Time
}

// mergedDirs returns the top-level directories bookworm's debootstrap makes
// symlinks into /usr, by architecture (its merge_usr; amd64 has no lib32
// or libx32 link in bookworm).
func mergedDirs(arch string) []string {
	if arch == "amd64" {
		return []string{"bin", "sbin", "lib", "lib64"}
	}
	return []string{"bin", "sbin", "lib"}
}

// pkgState is what Assemble keeps of one package.
type pkgState struct {
	Deb
	name      string // as dpkg names it in its database (NAME[:ARCH])
	version   version.Version
	control   []field
	files     []controlFile // control.tar but control itself
	conffiles map[string]bool
	replaces  []dependency.Possibility // Replaces: (no alternatives)
	triggers  []triggerInterest
	list      []string // shipped paths, in data.tar order
	// dropped are the shipped paths of list another package of the set
	// replaces (its copy is the one in the tar), left out of the
	// package's .list and Conffiles as dpkg leaves them out.
	dropped map[string]bool
}

// owner is who put a non-directory at an output path.
type owner struct {
	pkg     int // index in pkgs; -1 for the assembler's own files
	shipped string
}

// Assemble writes to w one tar stream of a Debian root as dpkg leaves it
// once every package of debs (in unpack order, a lock's) is unpacked and
// none configured, for `dpkg --configure -a` in a Linux kernel to finish.
// It writes nothing to the host's file system. The output is the same bytes
// for the same .debs and options, and has each path once.
func Assemble(ctx context.Context, w io.Writer, debs []Deb, o AssembleOptions) error {
	// Why nothing on the host: the host's owners, modes, symlinks and case
	// rules then do not matter.
	// Why each path once: where two packages ship a file and one declares
	// Replaces: on the other, only the replacing package's copy is
	// written, whichever comes first. A tar with a path twice extracts
	// fine (the last entry wins), but the raw-disk writer cannot replace a
	// file in place and refuses one.
	_, err := assemble(ctx, w, debs, o)
	return err
}

// assemble does Assemble's work, returning the assembler for the tests to
// look into.
func assemble(ctx context.Context, w io.Writer, debs []Deb, o AssembleOptions) (*assembler, error) {
	arch := o.Arch
	if arch == "" {
		arch = "amd64"
	}
	mtime := o.ModTime
	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	mtime = mtime.UTC().Truncate(time.Second)
	a := &assembler{
		tw: tar.NewWriter(w), mtime: mtime,
		dirs: map[string]bool{}, owners: map[string]owner{},
		merged: map[string]bool{}, replacers: map[string][]int{},
	}
	for _, d := range mergedDirs(arch) {
		a.merged[d] = true
	}

	pkgs := make([]*pkgState, len(debs))
	for i, d := range debs {
		p, err := readPackage(d, arch)
		if err != nil {
			return nil, err
		}
		pkgs[i] = p
	}
	a.pkgs = pkgs
	if err := a.scanReplacers(ctx); err != nil {
		return nil, err
	}

	// debootstrap makes the merged-/usr links before anything is
	// unpacked; every later bin/, sbin/, lib/ and lib64/ entry goes
	// under usr/ through them.
	for _, d := range mergedDirs(arch) {
		if err := a.header(&tar.Header{Typeflag: tar.TypeSymlink, Name: d, Linkname: "usr/" + d, Mode: 0o777}, owner{pkg: -1, shipped: "/" + d}); err != nil {
			return nil, err
		}
	}
	for _, d := range append([]string{"usr"}, mergedDirs(arch)...) {
		if d != "usr" {
			d = "usr/" + d
		}
		if err := a.dir(d, 0o755); err != nil {
			return nil, err
		}
	}
	// Why base-passwd's is the only preinst done here: the other preinsts
	// of the node's package set do nothing on a first install
	// (dpkg-maintscript-helper steps for upgrades, checks), except
	// linux-image-*'s, which flags a first install for its postinst
	// (linux-update-symlinks install rather than upgrade): with no earlier
	// links the result is the same, /vmlinuz, /initrd.img and their .old
	// links, with or without running every preinst first (checked by
	// TestStage1ConfiguresInDocker, HWK_STAGE1_PREINST=1).
	if err := a.passwd(pkgs); err != nil {
		return nil, err
	}
	for i, p := range pkgs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := a.unpack(i, p); err != nil {
			return nil, err
		}
	}
	if err := a.database(arch); err != nil {
		return nil, err
	}
	if err := a.tw.Close(); err != nil {
		return nil, fmt.Errorf("write the stage-1 tar: %w", err)
	}
	return a, nil
}

func readPackage(d Deb, arch string) (*pkgState, error) {
	f, err := openDeb(d.Path)
	if err != nil {
		return nil, fmt.Errorf("package %s %s: %w", d.Package.Name, d.Package.Version, err)
	}
	defer f.Close()
	files, err := f.readControl()
	if err != nil {
		return nil, fmt.Errorf("package %s %s: %w", d.Package.Name, d.Package.Version, err)
	}
	p := &pkgState{Deb: d, conffiles: map[string]bool{}, dropped: map[string]bool{}}
	for _, cf := range files {
		switch cf.name {
		case "control":
			if p.control, err = parseControl(string(cf.data)); err != nil {
				return nil, fmt.Errorf("package %s %s: control: %w", d.Package.Name, d.Package.Version, err)
			}
			continue
		case "conffiles":
			for _, c := range conffileNames(cf.data) {
				p.conffiles[c] = true
			}
		case "triggers":
			if p.triggers, err = triggerInterests(cf.data); err != nil {
				return nil, fmt.Errorf("package %s %s: %w", d.Package.Name, d.Package.Version, err)
			}
		}
		p.files = append(p.files, cf)
	}
	if p.control == nil {
		return nil, fmt.Errorf("package %s %s: %s has no control file: not a valid .deb; delete it from the cache and fetch again", d.Package.Name, d.Package.Version, d.Path)
	}
	if got := fieldOf(p.control, "Package"); got != d.Package.Name {
		return nil, fmt.Errorf("package %s %s: %s is package %q: the lock and the file disagree; relock", d.Package.Name, d.Package.Version, d.Path, got)
	}
	pkgArch := fieldOf(p.control, "Architecture")
	if pkgArch == "all" {
		pkgArch = arch
	}
	p.name = dpkgName(d.Package.Name, pkgArch, fieldOf(p.control, "Multi-Arch"))
	if p.version, err = version.Parse(fieldOf(p.control, "Version")); err != nil {
		return nil, fmt.Errorf("package %s %s: control: Version %q: %w", d.Package.Name, d.Package.Version, fieldOf(p.control, "Version"), err)
	}
	if r := fieldOf(p.control, "Replaces"); strings.TrimSpace(r) != "" {
		rels, err := dependency.Parse(r)
		if err != nil {
			return nil, fmt.Errorf("package %s %s: control: Replaces %q: %w", d.Package.Name, d.Package.Version, r, err)
		}
		for _, rel := range rels.Relations {
			p.replaces = append(p.replaces, rel.Possibilities...)
		}
	}
	return p, nil
}

type assembler struct {
	tw     *tar.Writer
	mtime  time.Time
	pkgs   []*pkgState
	merged map[string]bool
	dirs   map[string]bool
	owners map[string]owner
	// replacers are, by output path (outPath's), the packages that ship
	// a non-directory there and declare Replaces: on another package of
	// the set (see scanReplacers).
	replacers map[string][]int
}

// scanReplacers fills a.replacers from the data.tar names of the packages
// that declare Replaces: on another package of the set, so that unpack can
// leave out a replaced package's copy of a path even when the replaced
// package comes first in unpack order.
func (a *assembler) scanReplacers(ctx context.Context) error {
	// Why: dpkg's result does not depend on that order: unpacking Q over
	// P's file X with Q replacing P takes X over into Q's list; unpacking
	// P when Q already has X keeps Q's X and drops X from P's list
	// (src/main/archives.c, tarobject: does_replace, keepexisting). Only
	// these packages are read ahead, names only, since reading every
	// data.tar twice would double the assembly time; few packages of a
	// set replace another one of it.
	for j, q := range a.pkgs {
		if !a.replacesAny(j) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		err := eachData(q.Path, func(h *tar.Header, _ io.Reader) error {
			rel := cleanRel(h.Name)
			// Directories are shared, not replaced (header keeps
			// the first one of each).
			if rel == "." || h.Typeflag == tar.TypeDir {
				return nil
			}
			out := a.outPath(rel)
			a.replacers[out] = append(a.replacers[out], j)
			return nil
		})
		if err != nil {
			return fmt.Errorf("package %s %s: read the paths it ships to know which files it replaces: %w", q.Package.Name, q.Package.Version, err)
		}
	}
	return nil
}

// replaces reports whether package j declares a Replaces: on package i that
// i's version meets, as dpkg's does_replace asks. Most Replaces: in a
// release name an older version (dbus-bin: Replaces: dbus (<< 1.13.18-2~),
// beside dbus 1.14): they let j take over nothing of the i in the set,
// and checking the version spares scanReplacers from reading j.
func (a *assembler) replaces(j, i int) bool {
	if i == j {
		return false
	}
	for _, poss := range a.pkgs[j].replaces {
		if poss.Name == a.pkgs[i].Package.Name && versionOK(a.pkgs[i].version, poss.Version) {
			return true
		}
	}
	return false
}

// replacesAny reports whether package j replaces another package of the set.
func (a *assembler) replacesAny(j int) bool {
	for i := range a.pkgs {
		if a.replaces(j, i) {
			return true
		}
	}
	return false
}

// replacedBy returns the package whose copy of the non-directory at output path
// out dpkg keeps instead of package i's, or -1 if i's is the one to write.
// When two packages replace each other, dpkg first asks whether the
// package it unpacks replaces the one already there, so the later one in
// unpack order wins.
func (a *assembler) replacedBy(i int, out string) int {
	for _, j := range a.replacers[out] {
		if !a.replaces(j, i) || (a.replaces(i, j) && j < i) {
			continue
		}
		return j
	}
	return -1
}

// outPath returns where a shipped path goes in the merged-/usr root.
func (a *assembler) outPath(rel string) string {
	top, _, _ := strings.Cut(rel, "/")
	if a.merged[top] {
		return "usr/" + rel
	}
	return rel
}

func (a *assembler) dir(name string, mode int64) error {
	if a.dirs[name] {
		return nil
	}
	return a.header(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}, owner{pkg: -1})
}

// header writes an entry, deduplicating directories and refusing a second
// owner of a path: a file another package replaces never gets here
// (unpack skips it), so every path is in the tar once.
func (a *assembler) header(h *tar.Header, who owner) error {
	name := h.Name
	if h.Typeflag == tar.TypeDir {
		if a.dirs[name] {
			// The first wins: packages agree on nearly every shared
			// directory, and where they do not (a mode), unpack order,
			// fixed by the lock, decides, as it would for dpkg.
			return nil
		}
		if prev, ok := a.owners[name]; ok {
			return fmt.Errorf("%s ships %s as a directory, where %s already put a file or link: the package set is inconsistent; relock", a.who(who), name, a.who(prev))
		}
		a.dirs[name] = true
		h.Name += "/"
	} else {
		if a.dirs[name] {
			return fmt.Errorf("%s ships %s as a file or link, where there is already a directory: the package set is inconsistent; relock", a.who(who), "/"+name)
		}
		if prev, ok := a.owners[name]; ok {
			shipped := who.shipped
			if prev.shipped != who.shipped {
				shipped = prev.shipped + " and " + who.shipped + " (one path in the merged-/usr root)"
			}
			if who.pkg >= 0 && prev.pkg >= 0 && (a.replaces(who.pkg, prev.pkg) || a.replaces(prev.pkg, who.pkg)) {
				// scanReplacers and unpack should have left one
				// of them out; writing both would put the path
				// in the tar twice.
				return fmt.Errorf("%s and %s both ship %s, and one replaces the other, but hwk was about to write both copies: this is a bug in hwk", a.who(prev), a.who(who), shipped)
			}
			return fmt.Errorf("%s and %s both ship %s, and neither declares Replaces: on the other (or on the other's version): dpkg would refuse to unpack it; relock, or leave one of them out", a.who(prev), a.who(who), shipped)
		}
		a.owners[name] = who
	}
	h.Uname, h.Gname = "", ""
	h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
	if h.ModTime.IsZero() {
		h.ModTime = a.mtime
	}
	h.ModTime = h.ModTime.UTC().Truncate(time.Second)
	if err := a.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("write the stage-1 tar entry %s: %w", h.Name, err)
	}
	return nil
}

func (a *assembler) who(o owner) string {
	if o.pkg < 0 {
		return "the assembler (merged /usr, passwd, dpkg database)"
	}
	p := a.pkgs[o.pkg].Package
	return "package " + p.Name + " " + p.Version
}

func (a *assembler) file(name string, mode int64, uid, gid int, data []byte) error {
	if err := a.header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Uid: uid, Gid: gid, Size: int64(len(data))}, owner{pkg: -1, shipped: "/" + name}); err != nil {
		return err
	}
	if _, err := a.tw.Write(data); err != nil {
		return fmt.Errorf("write the stage-1 tar entry %s: %w", name, err)
	}
	return nil
}

// passwd writes /etc/passwd and /etc/group from base-passwd's masters, in
// place of base-passwd's preinst, before any package's files. It leaves out
// /etc/shadow and /etc/gshadow, as debootstrap does at this stage.
func (a *assembler) passwd(pkgs []*pkgState) error {
	// Why: dpkg --configure -a runs no preinst, and postinsts that run
	// before base-passwd is configured (base-files' chown root:root) need
	// these files. passwd's postinst makes the shadow files (shadowconfig).
	var bp *pkgState
	for _, p := range pkgs {
		if p.Package.Name == "base-passwd" {
			bp = p
		}
	}
	if bp == nil {
		return nil
	}
	want := map[string][]byte{"usr/share/base-passwd/passwd.master": nil, "usr/share/base-passwd/group.master": nil}
	err := eachData(bp.Path, func(h *tar.Header, r io.Reader) error {
		rel := cleanRel(h.Name)
		if _, ok := want[rel]; ok && h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(io.LimitReader(r, 1<<20))
			if err != nil {
				return err
			}
			want[rel] = b
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("package base-passwd %s: %w", bp.Package.Version, err)
	}
	for rel, b := range want {
		if b == nil {
			return fmt.Errorf("package base-passwd %s has no /%s: hwk cannot seed /etc/passwd and /etc/group from it; relock", bp.Package.Version, rel)
		}
	}
	if err := a.dir("etc", 0o755); err != nil {
		return err
	}
	if err := a.file("etc/passwd", 0o644, 0, 0, want["usr/share/base-passwd/passwd.master"]); err != nil {
		return err
	}
	return a.file("etc/group", 0o644, 0, 0, want["usr/share/base-passwd/group.master"])
}

// cleanRel returns a tar name as a path relative to the root, "." for the root.
func cleanRel(name string) string {
	if rel := strings.TrimPrefix(path.Clean("/"+name), "/"); rel != "" {
		return rel
	}
	return "."
}

// eachData calls fn for each entry of the .deb's data.tar.
func eachData(debPath string, fn func(*tar.Header, io.Reader) error) error {
	f, err := openDeb(debPath)
	if err != nil {
		return err
	}
	defer f.Close()
	tr, closeFn, err := f.tarOf(f.data)
	if err != nil {
		return err
	}
	defer closeFn()
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", debPath, f.data.name, err)
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

// unpack streams a package's data.tar into the output as dpkg --unpack
// would place it: merged-/usr paths, conffiles as NAME.dpkg-new, and the
// shipped paths, not the merged ones, in the package's list (plan40 T2:
// usr-is-merged's postinst removes a top-level /lib64 no list owns).
func (a *assembler) unpack(i int, p *pkgState) error {
	p.list = []string{"/."}
	err := eachData(p.Path, func(h *tar.Header, r io.Reader) error {
		rel := cleanRel(h.Name)
		if rel == "." {
			return nil
		}
		shipped := "/" + rel
		p.list = append(p.list, shipped)
		out := a.outPath(rel)
		who := owner{pkg: i, shipped: shipped}
		if h.Typeflag != tar.TypeDir {
			if j := a.replacedBy(i, out); j >= 0 {
				// Another package of the set replaces this
				// one and ships the path: its copy is the one
				// on disk (written on its turn) and the path
				// moves to its list. tar.Reader skips the
				// content.
				p.dropped[shipped] = true
				return nil
			}
		}
		nh := &tar.Header{Name: out, Mode: h.Mode & 0o7777, Uid: h.Uid, Gid: h.Gid, ModTime: h.ModTime}
		switch h.Typeflag {
		case tar.TypeDir:
			nh.Typeflag = tar.TypeDir
			return a.header(nh, who)
		case tar.TypeReg: // tar.Reader reports the old TypeRegA as TypeReg
			nh.Typeflag, nh.Size = tar.TypeReg, h.Size
			if p.conffiles[shipped] {
				nh.Name += ".dpkg-new"
			}
			if err := a.header(nh, who); err != nil {
				return err
			}
			if _, err := io.Copy(a.tw, r); err != nil {
				return fmt.Errorf("package %s %s: %s: %w", p.Package.Name, p.Package.Version, shipped, err)
			}
			return nil
		case tar.TypeSymlink:
			nh.Typeflag, nh.Linkname = tar.TypeSymlink, h.Linkname
			return a.header(nh, who)
		case tar.TypeLink:
			target := cleanRel(h.Linkname)
			if j := a.replacedBy(i, a.outPath(target)); j >= 0 {
				// dpkg would link to whatever is at the target
				// then, the replacing package's file or nothing,
				// depending on unpack order.
				return fmt.Errorf("package %s %s: %s is a hard link to /%s, which package %s replaces: hwk cannot write a link to another package's file; relock, or leave one of them out", p.Package.Name, p.Package.Version, shipped, target, a.pkgs[j].Package.Name)
			}
			nh.Typeflag, nh.Linkname = tar.TypeLink, a.outPath(target)
			if p.conffiles["/"+target] {
				nh.Linkname += ".dpkg-new"
			}
			return a.header(nh, who)
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			nh.Typeflag, nh.Devmajor, nh.Devminor = h.Typeflag, h.Devmajor, h.Devminor
			return a.header(nh, who)
		default:
			return fmt.Errorf("package %s %s: %s has tar type %q, which dpkg does not unpack either", p.Package.Name, p.Package.Version, shipped, h.Typeflag)
		}
	})
	if err != nil {
		if strings.HasPrefix(err.Error(), "package ") {
			return err
		}
		return fmt.Errorf("package %s %s: %w", p.Package.Name, p.Package.Version, err)
	}
	return nil
}

// database writes var/lib/dpkg as dpkg leaves it with every package
// unpacked (see statusParagraph and triggerFiles).
func (a *assembler) database(arch string) error {
	for _, d := range []string{"var", "var/lib", "var/lib/dpkg", "var/lib/dpkg/info", "var/lib/dpkg/triggers", "var/lib/dpkg/updates", "var/lib/dpkg/parts", "var/lib/dpkg/alternatives"} {
		if err := a.dir(d, 0o755); err != nil {
			return err
		}
	}
	byName := slices.Clone(a.pkgs)
	slices.SortStableFunc(byName, func(x, y *pkgState) int { return strings.Compare(x.name, y.name) })
	var status strings.Builder
	owners := make([]string, len(a.pkgs))
	interests := make([][]triggerInterest, len(a.pkgs))
	for i, p := range a.pkgs {
		owners[i], interests[i] = p.name, p.triggers
	}
	for n, p := range byName {
		var conffiles []string
		for c := range p.conffiles {
			if !p.dropped[c] {
				conffiles = append(conffiles, c)
			}
		}
		slices.Sort(conffiles)
		if n > 0 {
			status.WriteString("\n")
		}
		status.WriteString(statusParagraph(p.control, conffiles))

		var list strings.Builder
		for _, l := range p.list {
			if !p.dropped[l] {
				list.WriteString(l + "\n")
			}
		}
		if err := a.file("var/lib/dpkg/info/"+p.name+".list", 0o644, 0, 0, []byte(list.String())); err != nil {
			return err
		}
		files := slices.Clone(p.files)
		slices.SortFunc(files, func(x, y controlFile) int { return strings.Compare(x.name, y.name) })
		for _, cf := range files {
			if err := a.file("var/lib/dpkg/info/"+p.name+"."+cf.name, cf.mode, 0, 0, cf.data); err != nil {
				return err
			}
		}
	}
	if err := a.file("var/lib/dpkg/info/format", 0o644, 0, 0, []byte("1\n")); err != nil {
		return err
	}
	trig := triggerFiles(owners, interests)
	for _, name := range slices.Sorted(maps.Keys(trig)) {
		if err := a.file("var/lib/dpkg/triggers/"+name, 0o644, 0, 0, []byte(trig[name])); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, data string }{
		{"arch", arch + "\n"},
		{"available", ""},
		{"diversions", ""},
		{"statoverride", ""},
		{"status", status.String()},
	} {
		if err := a.file("var/lib/dpkg/"+f.name, 0o644, 0, 0, []byte(f.data)); err != nil {
			return err
		}
	}
	return nil
}
