package diskimage

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/filesystem/ext4"
)

// nodeKind is what a path in the tar became in the root file system.
type nodeKind int

const (
	kindDir nodeKind = iota
	kindFile
	kindSymlink
)

// node is what writeRoot remembers of each path it wrote: enough to
// resolve symlinks (the kernel's, and a hard link's target), to copy a
// hard link's attributes, and to give directories their times last.
type node struct {
	kind   nodeKind
	target string // a symlink's
	mode   fs.FileMode
	uid    int
	gid    int
	mtime  time.Time
	atime  time.Time
}

// rootIndex is the root file system's paths (fs.ValidPath form, "." for
// the root) as the tar left them.
type rootIndex struct {
	fs    *ext4.FileSystem
	nodes map[string]*node
}

// capabilityFallback are the files whose file capabilities
// (security.capability) become the setuid bit: for these the package
// itself falls back to setuid root where setcap fails
// (iputils-ping.postinst).
var capabilityFallback = map[string]bool{
	"usr/bin/ping": true,
	"bin/ping":     true,
}

// bootACLs are the directories whose POSIX ACLs systemd-tmpfiles sets
// again at every boot (the a+ lines of tmpfiles.d/systemd.conf), with
// what is under them: left out, the node gets them back.
var bootACLs = []string{"var/log/journal"}

// xattrFallback returns what becomes of p's extended attribute name: the
// setuid bit for a capability in capabilityFallback, or left out because
// the node sets it again at boot (bootACLs); ok is false for any other,
// an error. why describes what became of the attribute.
func xattrFallback(p, name string, typ byte) (setuid bool, why string, ok bool) {
	// Why: go-diskfs cannot write extended attributes, and a file silently
	// missing its capability or ACL would fail at run time, far from here.
	switch name {
	case "security.capability":
		if capabilityFallback[p] && typ == tar.TypeReg {
			return true, "made setuid instead, as iputils-ping.postinst does where setcap fails", true
		}
	case "system.posix_acl_access", "system.posix_acl_default":
		for _, d := range bootACLs {
			if p == d || strings.HasPrefix(p, d+"/") {
				return false, "left out: systemd-tmpfiles sets it at boot", true
			}
		}
	}
	return false, "", false
}

// xattrPrefixes mark the PAX records carrying extended attributes.
var xattrPrefixes = []string{"SCHILY.xattr.", "LIBARCHIVE.xattr."}

// writeRoot makes an ext4 file system (label hwk-root, 4 KiB blocks, a
// journal) of size bytes at start in disk, fills it from the tar stream r,
// and returns the index of what it wrote, for the ESP. A hard link becomes
// a copy; device nodes outside dev/, extended attributes xattrFallback
// does not take, and a path given twice are errors (see below).
func writeRoot(ctx context.Context, disk backend.Storage, start, size int64, r io.Reader, res *RawDisk) (*rootIndex, error) {
	// Why: go-diskfs's ext4 writer has no hard links, device nodes or
	// extended attributes, and no lchown, so:
	//   - a hard link becomes a copy of its target (same bytes and attributes);
	//   - device nodes and FIFOs under dev/ are left out (the kernel mounts
	//     devtmpfs there); elsewhere they are an error;
	//   - extended attributes are an error, except those xattrFallback
	//     replaces or leaves out;
	//   - a symlink is owned by its directory's owner, whatever the tar
	//     records;
	//   - a path the tar has twice is an error (go-diskfs's Remove is broken);
	//   - a file's holes are allocated blocks of zeros in the file system
	//     (the disk file stays sparse: see sparseFile).
	efs, err := ext4.Create(disk, size, start, 512, &ext4.Params{
		VolumeName: rootLabel,
		// 4 KiB blocks at every size, as mkfs.ext4 for a disk: go-diskfs
		// picks 1 KiB below 512 MiB, so tests would check another shape.
		SectorsPerBlock: 8,
		// mkfs.ext4's default ratio for a file system this size.
		InodeRatio: 16384,
		// go-diskfs cannot lay out the resize inode's reserved GDT blocks
		// with 4 KiB blocks.
		Features: []ext4.FeatureOpt{ext4.WithFeatureReservedGDTBlocksForExpansion(false)},
	})
	if err != nil {
		return nil, fmt.Errorf("make the ext4 file system: %w", err)
	}
	idx := &rootIndex{fs: efs, nodes: map[string]*node{
		".": {kind: kindDir, mode: fs.ModeDir | 0o755},
	}}
	tr := tar.NewReader(r)
	// One buffer for every file: go-diskfs copies each Write anyway.
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the rootfs tar: %w", err)
		}
		if err := idx.add(hdr, tr, buf, res); err != nil {
			return nil, err
		}
	}
	// Last, as tar does, so that no entry added to a directory afterwards
	// can change its times.
	for p, n := range idx.nodes {
		if n.kind != kindDir || n.mtime.IsZero() {
			continue
		}
		if err := efs.Chtimes(p, n.mtime, n.atime, n.mtime); err != nil {
			return nil, fmt.Errorf("set the times of /%s: %w", p, err)
		}
	}
	return idx, nil
}

// cleanName turns a tar name into fs.ValidPath form: "./usr/bin/" and
// "/usr/bin" are "usr/bin", "./" is ".". A name climbing out with ".." is
// refused rather than folded, as tar refuses to extract it.
func cleanName(name string) (string, error) {
	p := path.Clean("/" + name)
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", fmt.Errorf("tar entry %q climbs out of the rootfs (a \"..\" in its name)", name)
		}
	}
	if p == "/" {
		return ".", nil
	}
	return p[1:], nil
}

func parentOf(p string) string {
	d := path.Dir(p)
	if d == "" {
		return "."
	}
	return d
}

// add writes one tar entry.
func (idx *rootIndex) add(hdr *tar.Header, body io.Reader, buf []byte, res *RawDisk) error {
	p, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	fi := hdr.FileInfo()
	n := &node{mode: fi.Mode(), uid: hdr.Uid, gid: hdr.Gid, mtime: hdr.ModTime, atime: hdr.AccessTime}
	if n.atime.IsZero() {
		n.atime = n.mtime
	}
	if err := idx.checkXattrs(p, hdr, n, res); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		if p == "dev" || strings.HasPrefix(p, "dev/") {
			res.SkippedDevices++
			return nil
		}
		return fmt.Errorf("/%s is a device node or FIFO, which an ext4 written by go-diskfs cannot hold: remove it from the rootfs, or make it at boot (a tmpfiles.d line, or a udev rule)", p)
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink:
	case tar.TypeGNUSparse:
		// archive/tar reads the holes of an old GNU sparse file as zeros.
		hdr.Typeflag = tar.TypeReg
	default:
		return fmt.Errorf("/%s: tar entry type %q is not supported (only directories, files, symlinks, hard links and, under /dev, devices)", p, hdr.Typeflag)
	}
	if p != "." {
		if err := idx.parentDir(p); err != nil {
			return err
		}
	}
	old := idx.nodes[p]
	if hdr.Typeflag == tar.TypeDir {
		if old != nil && old.kind != kindDir {
			return fmt.Errorf("/%s: the tar has it as a directory after it had it as something else", p)
		}
		if p != "." {
			if err := idx.fs.Mkdir(p); err != nil {
				return fmt.Errorf("make directory /%s: %w", p, err)
			}
		}
		n.kind = kindDir
		if err := idx.setAttrs(p, n); err != nil {
			return err
		}
		idx.nodes[p] = n
		res.Dirs++
		return nil
	}
	// tar extraction lets a later entry replace an earlier one, but
	// go-diskfs's Remove frees a file's blocks and leaves its inode in use
	// with them (e2fsck: multiply-claimed blocks, an unattached inode).
	if old != nil {
		return fmt.Errorf("/%s is in the rootfs tar twice, which this writer cannot replace in place: make the tar with each path once", p)
	}
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		return idx.symlink(p, hdr.Linkname, n, res)
	case tar.TypeLink:
		return idx.hardLink(p, hdr.Linkname, buf, res)
	default:
		n.kind = kindFile
		if err := idx.writeFile(p, body, hdr.Size, buf); err != nil {
			return err
		}
		if err := idx.setAttrs(p, n); err != nil {
			return err
		}
		idx.nodes[p] = n
		res.Files++
		return nil
	}
}

// checkXattrs applies xattrFallback to the entry's extended attributes.
func (idx *rootIndex) checkXattrs(p string, hdr *tar.Header, n *node, res *RawDisk) error {
	// archive/tar puts every PAX record here, Xattrs included. bsdtar
	// writes each attribute twice, as SCHILY.xattr and LIBARCHIVE.xattr
	// (URL-encoded name).
	var names []string
	for k := range hdr.PAXRecords {
		for _, prefix := range xattrPrefixes {
			if name, ok := strings.CutPrefix(k, prefix); ok && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	var refused []string
	for _, name := range names {
		setuid, why, ok := xattrFallback(p, name, hdr.Typeflag)
		if !ok {
			refused = append(refused, name)
			continue
		}
		if setuid {
			n.mode |= fs.ModeSetuid
		}
		res.DroppedXattrs = append(res.DroppedXattrs, fmt.Sprintf("/%s %s: %s", p, name, why))
	}
	if len(refused) > 0 {
		return fmt.Errorf("/%s has extended attributes (%s), which an ext4 written by go-diskfs cannot hold: drop them from the rootfs tar, or set them at boot (a systemd unit or tmpfiles.d line)", p, strings.Join(refused, ", "))
	}
	return nil
}

// parentDir makes sure p's directory exists as a directory, not through a
// symlink: tar would follow one, writing elsewhere than the entry's name.
func (idx *rootIndex) parentDir(p string) error {
	dir := parentOf(p)
	var missing []string
	for d := dir; d != "."; d = parentOf(d) {
		n := idx.nodes[d]
		if n == nil {
			missing = append(missing, d)
			continue
		}
		if n.kind != kindDir {
			return fmt.Errorf("/%s: its directory /%s is not a directory in the tar (a symlink?); write the entry under the real path", p, d)
		}
		break
	}
	if len(missing) == 0 {
		return nil
	}
	// Made as tar makes a directory it has no entry for: 0755, root.
	if err := idx.fs.Mkdir(dir); err != nil {
		return fmt.Errorf("make directory /%s: %w", dir, err)
	}
	for _, d := range missing {
		idx.nodes[d] = &node{kind: kindDir, mode: fs.ModeDir | 0o755}
		if err := idx.fs.Chmod(d, 0o755); err != nil {
			return fmt.Errorf("make directory /%s: %w", d, err)
		}
		if err := idx.fs.Chown(d, 0, 0); err != nil {
			return fmt.Errorf("make directory /%s: %w", d, err)
		}
	}
	return nil
}

func (idx *rootIndex) setAttrs(p string, n *node) error {
	// go-diskfs's Chmod and Chown follow symlinks, and for "." need no
	// special case.
	if err := idx.fs.Chmod(p, n.mode); err != nil {
		return fmt.Errorf("set the mode of /%s: %w", p, err)
	}
	if err := idx.fs.Chown(p, n.uid, n.gid); err != nil {
		return fmt.Errorf("set the owner of /%s: %w", p, err)
	}
	if n.kind == kindDir {
		return nil
	}
	if err := idx.fs.Chtimes(p, n.mtime, n.atime, n.mtime); err != nil {
		return fmt.Errorf("set the times of /%s: %w", p, err)
	}
	return nil
}

func (idx *rootIndex) symlink(p, target string, n *node, res *RawDisk) error {
	if target == "" {
		return fmt.Errorf("/%s: symlink with an empty target", p)
	}
	if err := idx.fs.Symlink(target, p); err != nil {
		return fmt.Errorf("make symlink /%s -> %s: %w", p, target, err)
	}
	// Chtimes does not follow symlinks; Chmod and Chown would, so a
	// symlink keeps mode 0777 and its directory's owner.
	if err := idx.fs.Chtimes(p, n.mtime, n.atime, n.mtime); err != nil {
		return fmt.Errorf("set the times of /%s: %w", p, err)
	}
	n.kind, n.target = kindSymlink, target
	idx.nodes[p] = n
	res.Symlinks++
	return nil
}

// hardLink writes p as a copy of target, an earlier entry of the tar.
func (idx *rootIndex) hardLink(p, target string, buf []byte, res *RawDisk) error {
	t, err := cleanName(target)
	if err != nil {
		return err
	}
	tn := idx.nodes[t]
	if tn == nil {
		return fmt.Errorf("/%s: hard link to /%s, which the tar has not had before it", p, t)
	}
	switch tn.kind {
	case kindSymlink:
		return idx.symlink(p, tn.target, &node{mtime: tn.mtime, atime: tn.atime}, res)
	case kindDir:
		return fmt.Errorf("/%s: hard link to the directory /%s", p, t)
	}
	src, err := idx.fs.OpenFile(t, os.O_RDONLY)
	if err != nil {
		return fmt.Errorf("/%s: open its hard link target /%s: %w", p, t, err)
	}
	fi, err := src.Stat()
	if err != nil {
		return fmt.Errorf("/%s: %w", p, err)
	}
	if err := idx.writeFile(p, src, fi.Size(), buf); err != nil {
		return err
	}
	n := *tn
	if err := idx.setAttrs(p, &n); err != nil {
		return err
	}
	idx.nodes[p] = &n
	res.HardLinkCopies++
	return nil
}

// writeFile creates p with size bytes from r.
func (idx *rootIndex) writeFile(p string, r io.Reader, size int64, buf []byte) error {
	f, err := idx.fs.OpenFile(p, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return fmt.Errorf("create /%s: %w", p, err)
	}
	defer f.Close()
	if size == 0 {
		return nil
	}
	w, ok := f.(io.WriteSeeker)
	if !ok {
		return fmt.Errorf("create /%s: go-diskfs file cannot seek", p)
	}
	// One byte at the end first, so go-diskfs allocates the whole file in
	// one go: written piecemeal it grows the file one Write at a time,
	// which fragments it into many extents. The zero lands in a hole
	// (sparseFile drops it) and the copy below overwrites it.
	if _, err := w.Seek(size-1, io.SeekStart); err != nil {
		return fmt.Errorf("write /%s: %w", p, err)
	}
	if _, err := w.Write([]byte{0}); err != nil {
		return fmt.Errorf("write /%s (%d bytes): %w", p, size, err)
	}
	if _, err := w.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("write /%s: %w", p, err)
	}
	var written int64
	for written < size {
		n, rerr := r.Read(buf[:min(int64(len(buf)), size-written)])
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return fmt.Errorf("write /%s (%d bytes): %w", p, size, err)
			}
			written += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("read /%s from the rootfs tar: %w", p, rerr)
		}
	}
	if written != size {
		return fmt.Errorf("read /%s from the rootfs tar: %d of %d bytes", p, written, size)
	}
	return nil
}

// resolve follows symlinks in p inside the root file system, as the node
// would see them (an absolute target starts at its root, never the
// host's). It returns the path p names and whether that is a regular file.
func (idx *rootIndex) resolve(p string) (string, bool) {
	rest := strings.Split(p, "/")
	cur := "."
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = parentOf(cur)
			continue
		}
		next := path.Join(cur, c)
		n := idx.nodes[next]
		if n == nil {
			return next, false
		}
		if n.kind == kindSymlink {
			if hops++; hops > 40 {
				return next, false
			}
			if path.IsAbs(n.target) {
				cur = "."
			}
			rest = append(strings.Split(n.target, "/"), rest...)
			continue
		}
		cur = next
	}
	n := idx.nodes[cur]
	return cur, n != nil && n.kind == kindFile
}
