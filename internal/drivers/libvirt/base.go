package libvirt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/internal/state"
)

// tailSize is how much of a base volume's end is compared with the node
// image it was uploaded from. An upload cut short leaves the end of the
// file unwritten, and qcow2 keeps metadata and data up to its last byte.
const tailSize = 1 << 20

// baseName returns the pool volume holding the node image at path: named for
// the image's directory (which names its build) and for the file's size
// and time, so that a rebuilt image never reuses another's volume.
func baseName(path string, fi os.FileInfo) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", filepath.Base(filepath.Dir(path)), fi.Size(), fi.ModTime().UnixNano()))
	return "base_" + filepath.Base(filepath.Dir(path)) + "_" + hex.EncodeToString(sum[:6]) + ".qcow2"
}

// baseVolume returns the pool's copy of the node image at path: uploaded once,
// then shared by every node's overlay as its read-only backing file. hwk's
// cache is in the user's home, which QEMU (its own user under
// qemu:///system) cannot read, hence the copy in the pool. Concurrent
// commands take turns; a copy cut short is found by its end and replaced.
func (d *Driver) baseVolume(ctx context.Context, l *golibvirt.Libvirt, pool golibvirt.StoragePool, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("node image: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("node image: %w", err)
	}
	name := baseName(path, fi)
	lock, err := d.lockBase(ctx, name)
	if err != nil {
		return "", err
	}
	defer lock.Release()

	vol, err := l.StorageVolLookupByName(pool, name)
	switch {
	case err == nil:
		same, err := d.sameTailOrGiveUp(vol, f, fi.Size())
		if err != nil {
			return "", err
		}
		if same {
			return l.StorageVolGetPath(vol)
		}
		// uploadVolume replaces it.
	case !isCode(err, golibvirt.ErrNoStorageVol):
		return "", fmt.Errorf("look up volume %s: %w", name, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	return uploadVolume(l, pool, name, f, fi.Size())
}

// lockBase takes the host-wide turn to upload base volume name, waiting
// for another hwk command that has it.
func (d *Driver) lockBase(ctx context.Context, name string) (*state.Lock, error) {
	path := filepath.Join(d.dirs.Data, "locks", "libvirt-"+name+".lock")
	for {
		lock, err := state.AcquireLock(path, "libvirt volume "+name)
		var locked *state.LockedError
		if !errors.As(err, &locked) {
			return lock, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %w", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// sameTailWait bounds sameTail, which reads a megabyte.
const sameTailWait = 30 * time.Second

// sameTailOrGiveUp runs sameTail on a connection of its own, given up after
// sameTailWait: go-libvirt can deadlock at the end of a stream (a late
// packet's callback holds the lock the finished call needs to deregister,
// seen once in CI). The stuck call and its connection are abandoned, and the
// volume counts as not the same, so it is uploaded again.
func (d *Driver) sameTailOrGiveUp(vol golibvirt.StorageVol, f *os.File, size int64) (bool, error) {
	l, err := d.connect()
	if err != nil {
		return false, err
	}
	type result struct {
		same bool
		err  error
	}
	done := make(chan result, 1)
	go func() {
		same, err := sameTail(l, vol, f, size)
		done <- result{same, err}
	}()
	select {
	case r := <-done:
		l.Disconnect()
		return r.same, r.err
	case <-time.After(sameTailWait):
		return false, nil
	}
}

// sameTail reports whether the volume ends as the file of size bytes
// does. A volume that cannot be read there is not the same.
func sameTail(l *golibvirt.Libvirt, vol golibvirt.StorageVol, f *os.File, size int64) (bool, error) {
	n := min(int64(tailSize), size)
	off := size - n
	want := make([]byte, n)
	if _, err := f.ReadAt(want, off); err != nil {
		return false, fmt.Errorf("node image: %w", err)
	}
	var got bytes.Buffer
	if err := l.StorageVolDownload(vol, &got, uint64(off), uint64(n), 0); err != nil {
		return false, nil
	}
	return bytes.Equal(got.Bytes(), want), nil
}
