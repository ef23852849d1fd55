package debtest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Epoch is the modification time of every member and tar entry debtest
// writes, so that a .deb's bytes (and digest) depend only on its content.
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Deb describes a binary package.
type Deb struct {
	Package, Version string
	Architecture     string // amd64 if empty
	MultiArch        string
	Priority         string // optional if empty
	Essential        bool

	Depends, PreDepends, Provides string
	Conflicts, Breaks, Replaces   string

	// Control holds the other members of control.tar (postinst,
	// conffiles, triggers...), by name.
	Control map[string]string
	// Files is the content of data.tar. Parent directories are added.
	Files []File
	// Compression of control.tar and data.tar: "xz" (Debian's, and the
	// default), "gz", "zst" or "none".
	Compression string
}

// File is one entry of a package's data.tar.
type File struct {
	Path string // absolute, e.g. /usr/bin/true
	// Mode holds the permission bits and, for a directory or a symlink,
	// fs.ModeDir or fs.ModeSymlink; 0 means a 0644 regular file.
	Mode fs.FileMode
	Body string // a regular file's content
	Link string // a symlink's target
	// Hardlink, if set, makes the entry a hard link to this earlier
	// entry's absolute path.
	Hardlink string
}

func (d Deb) arch() string {
	if d.Architecture == "" {
		return "amd64"
	}
	return d.Architecture
}

// Filename is where the archive's pool keeps the .deb, as a Packages
// Filename field gives it.
func (d Deb) Filename() string {
	v := d.Version
	if i := strings.IndexByte(v, ':'); i >= 0 {
		v = v[i+1:] // the epoch is not in file names
	}
	prefix := d.Package[:1]
	if strings.HasPrefix(d.Package, "lib") && len(d.Package) > 3 {
		prefix = d.Package[:4]
	}
	return fmt.Sprintf("pool/main/%s/%s/%s_%s_%s.deb", prefix, d.Package, d.Package, v, d.arch())
}

// Fields returns the control paragraph's fields, in the order dpkg writes
// them, without the trailing blank line.
func (d Deb) Fields() string {
	var b strings.Builder
	add := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	add("Package", d.Package)
	add("Version", d.Version)
	add("Architecture", d.arch())
	add("Multi-Arch", d.MultiArch)
	if d.Essential {
		add("Essential", "yes")
	}
	add("Priority", cmp(d.Priority, "optional"))
	add("Maintainer", "hwk tests <test@example.invalid>")
	add("Provides", d.Provides)
	add("Pre-Depends", d.PreDepends)
	add("Depends", d.Depends)
	add("Breaks", d.Breaks)
	add("Conflicts", d.Conflicts)
	add("Replaces", d.Replaces)
	add("Description", "test package "+d.Package)
	return b.String()
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Build writes the .deb: an ar archive of debian-binary, control.tar.* and
// data.tar.*, as dpkg-deb builds it.
func (d Deb) Build() ([]byte, error) {
	if d.Package == "" || d.Version == "" {
		return nil, fmt.Errorf("a Deb needs a Package and a Version")
	}
	ext, compress, err := compressor(cmp(d.Compression, "xz"))
	if err != nil {
		return nil, err
	}
	control := []File{{Path: "/control", Body: d.Fields()}}
	for _, name := range slices.Sorted(maps.Keys(d.Control)) {
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(name, "inst") || strings.HasSuffix(name, "rm") || name == "config" {
			mode = 0o755
		}
		control = append(control, File{Path: "/" + name, Mode: mode, Body: d.Control[name]})
	}
	ctar, err := tarOf(control, false)
	if err != nil {
		return nil, fmt.Errorf("control.tar of %s: %w", d.Package, err)
	}
	dtar, err := tarOf(d.Files, true)
	if err != nil {
		return nil, fmt.Errorf("data.tar of %s: %w", d.Package, err)
	}
	cz, err := compress(ctar)
	if err != nil {
		return nil, err
	}
	dz, err := compress(dtar)
	if err != nil {
		return nil, err
	}
	return Ar([]ArMember{
		{Name: "debian-binary", Data: []byte("2.0\n")},
		{Name: "control.tar" + ext, Data: cz},
		{Name: "data.tar" + ext, Data: dz},
	}), nil
}

func compressor(name string) (string, func([]byte) ([]byte, error), error) {
	switch name {
	case "xz":
		return ".xz", func(b []byte) ([]byte, error) { return StoredXZ(b), nil }, nil
	case "gz":
		return ".gz", func(b []byte) ([]byte, error) {
			var out bytes.Buffer
			w := gzip.NewWriter(&out)
			if _, err := w.Write(b); err != nil {
				return nil, err
			}
			err := w.Close()
			return out.Bytes(), err
		}, nil
	case "zst":
		return ".zst", func(b []byte) ([]byte, error) {
			w, err := zstd.NewWriter(nil)
			if err != nil {
				return nil, err
			}
			defer w.Close()
			return w.EncodeAll(b, nil), nil
		}, nil
	case "none":
		return "", func(b []byte) ([]byte, error) { return b, nil }, nil
	}
	return "", nil, fmt.Errorf("debtest: compression %q is not one of xz, gz, zst, none", name)
}

// tarOf writes files as dpkg-deb does: paths start with "./", owned by
// root. withDirs adds "./" and each file's missing parent directories.
func tarOf(files []File, withDirs bool) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	seen := map[string]bool{}
	var emitDir func(string) error
	emitDir = func(dir string) error {
		if seen[dir] {
			return nil
		}
		if dir != "." {
			if err := emitDir(path.Dir(dir)); err != nil {
				return err
			}
		}
		seen[dir] = true
		name := "./"
		if dir != "." {
			name = "./" + dir + "/"
		}
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: Epoch, Uname: "root", Gname: "root", Format: tar.FormatGNU})
	}
	for _, f := range files {
		rel := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if withDirs {
			if err := emitDir(path.Dir(rel)); err != nil {
				return nil, err
			}
		}
		h := &tar.Header{Name: "./" + rel, Mode: int64(f.Mode.Perm()), ModTime: Epoch, Uname: "root", Gname: "root", Format: tar.FormatGNU}
		switch {
		case f.Mode&fs.ModeDir != 0:
			if withDirs {
				if err := emitDir(rel); err != nil {
					return nil, err
				}
				continue
			}
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case f.Hardlink != "":
			h.Typeflag, h.Linkname = tar.TypeLink, "./"+strings.TrimPrefix(path.Clean("/"+f.Hardlink), "/")
			if f.Mode == 0 {
				h.Mode = 0o644
			}
		case f.Mode&fs.ModeSymlink != 0:
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Body))
			if f.Mode == 0 {
				h.Mode = 0o644
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(f.Body)); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ArMember is one member of an ar archive.
type ArMember struct {
	Name string // at most 16 bytes: .deb members need no GNU long names
	Data []byte
}

// Ar writes a common-format ar archive, the container of a .deb.
func Ar(members []ArMember) []byte {
	var b bytes.Buffer
	b.WriteString("!<arch>\n")
	for _, m := range members {
		// name/16 mtime/12 uid/6 gid/6 mode/8 size/10 then "`\n".
		fmt.Fprintf(&b, "%-16s%-12d%-6d%-6d%-8o%-10d`\n", m.Name, Epoch.Unix(), 0, 0, 0o100644, len(m.Data))
		b.Write(m.Data)
		if len(m.Data)%2 == 1 {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
