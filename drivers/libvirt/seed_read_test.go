package libvirt

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	diskfs "github.com/diskfs/go-diskfs"
)

// readSeedISO reads the named files of a seed image back.
func readSeedISO(path string, names []string) (label string, files map[string][]byte, err error) {
	d, err := diskfs.Open(path, diskfs.WithOpenMode(diskfs.ReadOnly), diskfs.WithSectorSize(2048))
	if err != nil {
		return "", nil, err
	}
	defer d.Close()
	fs, err := d.GetFilesystem(0)
	if err != nil {
		return "", nil, err
	}
	files = map[string][]byte{}
	for _, name := range names {
		f, err := fs.OpenFile("/"+name, os.O_RDONLY)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", name, err)
		}
		var b bytes.Buffer
		_, err = b.ReadFrom(f)
		f.Close()
		if err != nil {
			return "", nil, err
		}
		files[name] = b.Bytes()
	}
	// go-diskfs pads the volume identifier with NULs, not spaces (blkid
	// reads "cidata" either way).
	return strings.TrimRight(fs.Label(), "\x00 "), files, nil
}
