package state

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data so that a reader, or a crash,
// sees either the old file or the new one, never a part. It follows a
// symlink at path, so the link survives. On Unix the file gets perm exactly,
// whatever the umask; on Windows it gets its directory's inherited ACL, and
// a file another process has open is waited for briefly (replace).
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// Why: on Windows Chmod sets only the read-only attribute, so the file
	// keeps its directory's inherited ACL (the user profile's keeps other
	// users out, as kubectl relies on).
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := replace(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	done = true
	return syncDir(dir)
}

// WriteOutput makes path by having write fill a new file beside it, which
// then becomes path with perm (on Windows only its read-only bit): a failed
// or interrupted write leaves neither a part of path nor the temporary file.
// Unlike WriteFileAtomic it does not sync, so a crash may lose the file but
// never leaves a truncated one; it is for outputs that can be made again.
func WriteOutput(path string, perm os.FileMode, write func(f *os.File) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.part")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return err
	}
	// CreateTemp made it 0600.
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return replace(tmp.Name(), path)
}
