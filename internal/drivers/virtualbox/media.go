package virtualbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The VDI header (src/VBox/Storage/VDICore.h): a 64-byte text pre-header,
// then the signature and version, then (version 1.1) the header whose
// virtual size sits at byte 0x170 and creation UUID at 0x188.
const (
	vdiSignature     = 0xbeda107f
	vdiSigOffset     = 0x40
	vdiVersionOffset = 0x44
	vdiSizeOffset    = 0x170
	// Why the creation UUID: it is what VirtualBox registers a disk
	// under, so it names the base: an image rebuilt in place gets a new
	// one, and never meets the registration of the old.
	vdiUUIDOffset = 0x188
)

// vdiHeader is what hwk reads of a VDI's header.
type vdiHeader struct {
	UUID string
	// Size is the disk's virtual size (cbDisk, at 0x170).
	Size int64
}

// readVDI reads the header of the VDI at path.
func readVDI(path string) (vdiHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return vdiHeader{}, err
	}
	defer f.Close()
	head := make([]byte, vdiUUIDOffset+16)
	if _, err := io.ReadFull(f, head); err != nil {
		return vdiHeader{}, fmt.Errorf("%s is not a VDI disk: %w", path, err)
	}
	if binary.LittleEndian.Uint32(head[vdiSigOffset:]) != vdiSignature {
		return vdiHeader{}, fmt.Errorf("%s is not a VDI disk (no VDI signature)", path)
	}
	// The offsets read here are those of the version 1 header (1.0 and
	// 1.1 alike); an older header keeps its size elsewhere.
	if major := binary.LittleEndian.Uint32(head[vdiVersionOffset:]) >> 16; major != 1 {
		return vdiHeader{}, fmt.Errorf("%s is a VDI disk of header version %d; hwk reads version 1, which VirtualBox writes", path, major)
	}
	// A size that does not fit an int64 is no disk's: read as one, it
	// would be a size below zero.
	size := binary.LittleEndian.Uint64(head[vdiSizeOffset:])
	if size > math.MaxInt64 {
		return vdiHeader{}, fmt.Errorf("%s is not a VDI disk hwk can use: its header gives a virtual size of %d bytes", path, size)
	}
	u := head[vdiUUIDOffset:]
	// RTUUID's first three fields are little-endian on disk.
	uuid := fmt.Sprintf("%08x-%04x-%04x-%x-%x", binary.LittleEndian.Uint32(u[0:]), binary.LittleEndian.Uint16(u[4:]),
		binary.LittleEndian.Uint16(u[6:]), u[8:10], u[10:16])
	return vdiHeader{UUID: uuid, Size: int64(size)}, nil
}

// medium is a disk as showmediuminfo and list hdds report it.
type medium struct {
	UUID     string
	Parent   string
	Type     string
	Location string
	// Capacity is its virtual size in bytes.
	Capacity int64
}

func mediumFrom(b block) medium {
	m := medium{UUID: b.Fields["UUID"], Parent: b.Fields["Parent UUID"], Type: b.Fields["Type"], Location: b.Fields["Location"]}
	if c, ok := strings.CutSuffix(b.Fields["Capacity"], " MBytes"); ok {
		// A size no disk has, below zero or of more bytes than an int64
		// holds, stays unknown (0) as a missing one does: shifted into
		// bytes it would wrap to a wrong size.
		if mib, err := strconv.ParseInt(c, 10, 64); err == nil && mib >= 0 && mib <= math.MaxInt64>>20 {
			m.Capacity = mib << 20
		}
	}
	return m
}

// basesDir returns the directory of the bases: one name per node image
// disk, by its UUID.
func (d *Driver) basesDir() string { return filepath.Join(d.dirs.Cache, "virtualbox", "bases") }

// ensureBase returns the node image at image as the base every node's disk is
// made on: a link to the image named for its UUID (a copy where links
// cannot be made), which nodes attach as multi-attach. Rebuilding the
// image replaces its file, and the disks made on the old one keep theirs.
func (d *Driver) ensureBase(image string) (*medium, error) {
	h, err := readVDI(image)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	path := filepath.Join(d.basesDir(), h.UUID+".vdi")
	if err := linkOrCopy(image, path); err != nil {
		return nil, fmt.Errorf("base for node image %s: %w", image, err)
	}
	return &medium{UUID: h.UUID, Location: path, Capacity: h.Size}, nil
}

// linkOrCopy makes dst a hard link to src, or a copy where the file
// system has no links; a dst already there of src's size is kept.
func linkOrCopy(src, dst string) error {
	sfi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if dfi, err := os.Stat(dst); err == nil && dfi.Size() == sfi.Size() {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		if err := copyFile(src, tmp); err != nil {
			return err
		}
	}
	return os.Rename(tmp, dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// listMedia lists VirtualBox's registered media of kind (hdds, dvds).
func (d *Driver) listMedia(ctx context.Context, kind string) ([]medium, error) {
	out, err := d.run(ctx, "list", kind)
	if err != nil {
		return nil, err
	}
	var ms []medium
	for _, b := range blocks(out) {
		if b.Fields["UUID"] != "" {
			ms = append(ms, mediumFrom(b))
		}
	}
	return ms, nil
}

// within reports whether path is in dir.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// closeMedia forgets, and deletes, the media VirtualBox still has
// registered in dir (a node's directory, whose VM was removed by hand or
// never made), then forgets the bases no disk is made on any more and
// removes their links, so a cluster's down leaves VirtualBox's media
// registry as it found it.
func (d *Driver) closeMedia(ctx context.Context, dir string) error {
	hdds, err := d.listMedia(ctx, "hdds")
	if err != nil {
		return err
	}
	children := map[string]int{}
	for _, m := range hdds {
		children[m.Parent]++
	}
	for _, m := range hdds {
		if within(m.Location, dir) && children[m.UUID] == 0 {
			if _, err := d.run(ctx, "closemedium", "disk", m.UUID, "--delete"); err != nil && !IsNotFound(err) {
				return err
			}
			children[m.Parent]--
		}
	}
	for _, m := range hdds {
		if within(m.Location, d.basesDir()) && children[m.UUID] == 0 {
			if _, err := d.run(ctx, "closemedium", "disk", m.UUID); err != nil && !IsNotFound(err) {
				return err
			}
			if err := os.Remove(m.Location); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	dvds, err := d.listMedia(ctx, "dvds")
	if err != nil {
		return err
	}
	for _, m := range dvds {
		if within(m.Location, dir) {
			if _, err := d.run(ctx, "closemedium", "dvd", m.UUID); err != nil && !IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}
