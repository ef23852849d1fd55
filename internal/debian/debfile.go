package debian

import (
	"archive/tar"
	"bytes"
	"compress/bzip2"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/xi2/xz"
)

// debFile is an opened .deb: an ar archive whose members are read in
// place, so a data.tar of hundreds of MB is streamed, never held.
type debFile struct {
	path    string
	f       *os.File
	control arMember // control.tar[.ext]
	data    arMember // data.tar[.ext]
}

type arMember struct {
	name        string
	off, size   int64
	compression string // the name's extension: "", ".gz", ".xz", ".zst", ".bz2"
}

func openDeb(path string) (*debFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	d := &debFile{path: path, f: f}
	if err := d.readAr(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w: the file is not a valid .deb; delete it from the cache and fetch again", path, err)
	}
	return d, nil
}

func (d *debFile) Close() error { return d.f.Close() }

// readAr finds the members: the common ar format, a 60-byte header before
// each member, members padded to an even offset (deb(5)).
func (d *debFile) readAr() error {
	magic := make([]byte, 8)
	if _, err := io.ReadFull(d.f, magic); err != nil || string(magic) != "!<arch>\n" {
		return errors.New("no ar header")
	}
	off := int64(8)
	hdr := make([]byte, 60)
	for {
		if _, err := d.f.ReadAt(hdr, off); err != nil {
			if err == io.EOF {
				break
			}
			return fmt.Errorf("ar member header at %d: %w", off, err)
		}
		if string(hdr[58:60]) != "`\n" {
			return fmt.Errorf("bad ar member header at %d", off)
		}
		name := strings.TrimRight(strings.TrimSpace(string(hdr[0:16])), "/")
		size, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("bad ar member size at %d", off)
		}
		m := arMember{name: name, off: off + 60, size: size}
		switch {
		case strings.HasPrefix(name, "control.tar"):
			m.compression = strings.TrimPrefix(name, "control.tar")
			d.control = m
		case strings.HasPrefix(name, "data.tar"):
			m.compression = strings.TrimPrefix(name, "data.tar")
			d.data = m
		}
		off += 60 + size + size%2
	}
	if d.control.name == "" || d.data.name == "" {
		return errors.New("no control.tar or data.tar member")
	}
	return nil
}

// tarOf opens a member as a tar stream, decompressing it.
func (d *debFile) tarOf(m arMember) (*tar.Reader, func(), error) {
	r := io.NewSectionReader(d.f, m.off, m.size)
	var (
		rd      io.Reader
		closeFn = func() {}
	)
	switch m.compression {
	case "":
		rd = r
	case ".gz":
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", d.path, m.name, err)
		}
		rd, closeFn = z, func() { z.Close() }
	case ".xz":
		// xi2/xz, not ulikunitz/xz: the latter is ~20 times slower on
		// Debian's archives (plan40 T6).
		z, err := xz.NewReader(r, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", d.path, m.name, err)
		}
		rd = z
	case ".zst":
		z, err := zstd.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", d.path, m.name, err)
		}
		rd, closeFn = z, z.Close
	case ".bz2":
		rd = bzip2.NewReader(r)
	default:
		return nil, nil, fmt.Errorf("%s: %s is compressed with %q, which hwk cannot read", d.path, m.name, m.compression)
	}
	return tar.NewReader(rd), closeFn, nil
}

// controlFile is one member of control.tar.
type controlFile struct {
	name string
	mode int64
	data []byte
}

// readControl reads control.tar whole: it holds a few small files.
func (d *debFile) readControl() ([]controlFile, error) {
	tr, closeFn, err := d.tarOf(d.control)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	var out []controlFile
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", d.path, d.control.name, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
		if name == "" || strings.Contains(name, "/") {
			continue
		}
		var b bytes.Buffer
		if _, err := io.Copy(&b, io.LimitReader(tr, 64<<20)); err != nil {
			return nil, fmt.Errorf("%s %s %s: %w", d.path, d.control.name, name, err)
		}
		out = append(out, controlFile{name: name, mode: h.Mode & 0o7777, data: b.Bytes()})
	}
	return out, nil
}
