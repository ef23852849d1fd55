// Package isoimage writes ISO 9660 images with Rock Ridge and Joliet
// names, so that Linux and Windows guests both see every name as written:
// the cidata seed disks VM drivers attach, and the Windows image build's
// disk. Without Joliet, Windows shows META_DATA for meta-data
// (cloudbase/cloudbase-init#164).
package isoimage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// File is one file of an image: its content in Data, or in the host file
// Source, which is streamed rather than read into memory.
type File struct {
	// Name is the file's path in the image, slash-separated.
	Name   string
	Data   []byte
	Source string
}

// Write makes a new image at path (replacing any file there) with the
// volume label and the files.
func Write(target, label string, files []File) error {
	if len(label) == 0 || len(label) > 32 {
		return fmt.Errorf("iso %s: label %q must be 1 to 32 characters", target, label)
	}
	var size int64 = 1 << 20 // room for the descriptors and directories
	seen := map[string]bool{}
	for _, f := range files {
		clean := strings.TrimPrefix(path.Clean("/"+f.Name), "/")
		if clean == "" || clean != f.Name {
			return fmt.Errorf("iso %s: bad file name %q", target, f.Name)
		}
		if seen[clean] {
			return fmt.Errorf("iso %s: %s twice", target, f.Name)
		}
		seen[clean] = true
		n := int64(len(f.Data))
		if f.Source != "" {
			st, err := os.Stat(f.Source)
			if err != nil {
				return fmt.Errorf("iso %s: %w", target, err)
			}
			n = st.Size()
		}
		size += n + 4096
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	d, err := diskfs.Create(target, size, diskfs.SectorSize(2048))
	if err != nil {
		return fmt.Errorf("create %s: %w", target, err)
	}
	defer d.Close()
	work, err := os.MkdirTemp(filepath.Dir(target), ".iso-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	fs, err := d.CreateFilesystem(disk.FilesystemSpec{Partition: 0, FSType: filesystem.TypeISO9660, VolumeLabel: label, WorkDir: work, Reproducible: true})
	if err != nil {
		return fmt.Errorf("create %s: %w", target, err)
	}
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	dirs := map[string]bool{}
	for _, f := range sorted {
		if dir := path.Dir(f.Name); dir != "." && !dirs[dir] {
			if err := fs.Mkdir("/" + dir); err != nil {
				return fmt.Errorf("%s: mkdir %s: %w", target, dir, err)
			}
			for d := dir; d != "."; d = path.Dir(d) {
				dirs[d] = true
			}
		}
		if err := writeFile(fs, f); err != nil {
			return fmt.Errorf("%s: %s: %w", target, f.Name, err)
		}
	}
	iso, ok := fs.(*iso9660.FileSystem)
	if !ok {
		return errors.New("go-diskfs made no ISO 9660 filesystem")
	}
	if err := iso.Finalize(iso9660.FinalizeOptions{RockRidge: true, Joliet: true, VolumeIdentifier: label}); err != nil {
		return fmt.Errorf("finalize %s: %w", target, err)
	}
	return nil
}

func writeFile(fs filesystem.FileSystem, f File) error {
	out, err := fs.OpenFile("/"+f.Name, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return err
	}
	if f.Source == "" {
		_, err = out.Write(f.Data)
	} else {
		var in *os.File
		if in, err = os.Open(f.Source); err == nil {
			_, err = io.Copy(out, in)
			in.Close()
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// Read returns an image's volume label and every file in it, by slash path:
// how tests and checks see what a guest will find on a disk hwk made.
func Read(image string) (label string, files map[string][]byte, err error) {
	d, err := diskfs.Open(image, diskfs.WithOpenMode(diskfs.ReadOnly), diskfs.WithSectorSize(2048))
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", image, err)
	}
	defer d.Close()
	fs, err := d.GetFilesystem(0)
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", image, err)
	}
	files = map[string][]byte{}
	var walk func(dir string) error
	walk = func(dir string) error {
		entries, err := fs.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := path.Join(dir, e.Name())
			if e.IsDir() {
				if err := walk(p); err != nil {
					return err
				}
				continue
			}
			f, err := fs.OpenFile("/"+p, os.O_RDONLY)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			files[p] = b
		}
		return nil
	}
	if err := walk("."); err != nil {
		return "", nil, fmt.Errorf("read %s: %w", image, err)
	}
	// go-diskfs pads the volume identifier with NULs, not spaces (blkid
	// reads "cidata" either way).
	return strings.TrimRight(fs.Label(), "\x00 "), files, nil
}
