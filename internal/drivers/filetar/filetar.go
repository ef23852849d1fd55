// Package filetar packs files a driver places on a node into one tar
// stream for `tar -x -C /` (or the engine's copy API): machines without
// their own disk image take their seed this way.
package filetar

import (
	"archive/tar"
	"bytes"
	"fmt"
	"path"
	"slices"

	"github.com/hwk-dev/hwk/drivers"
)

// Pack makes a tar of files at their absolute paths. Each file's parent
// directories come first, so that extracting makes them with sane modes
// (root's .ssh private) rather than as tar's defaults.
func Pack(files []drivers.File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("file %q: want a clean absolute path", f.Path)
		}
		var parents []string
		for p := path.Dir(f.Path); p != "/" && !dirs[p]; p = path.Dir(p) {
			parents = append(parents, p)
			dirs[p] = true
		}
		slices.Reverse(parents)
		for _, p := range parents {
			mode := int64(0o755)
			if p == "/root/.ssh" {
				mode = 0o700
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p[1:] + "/", Mode: mode}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.Path[1:], Mode: int64(f.Mode.Perm()), Size: int64(len(f.Content))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
