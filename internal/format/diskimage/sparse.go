package diskimage

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"

	"github.com/diskfs/go-diskfs/backend"
)

// sparseChunk is the granularity at which sparseFile remembers what it has
// written: one bit per 4 KiB, 640 KiB of bits for a 20 GiB disk.
const sparseChunk = 4096

var zeroChunk [sparseChunk]byte

// sparseFile is the disk file go-diskfs writes through, kept sparse: the
// file starts as one hole, so a write of zeros to a part never written
// before changes nothing and is dropped; zeros over data already written
// are written, whatever the write order.
type sparseFile struct {
	f    *os.File
	size int64
	// dirty has a bit set for each chunk that may hold a non-zero byte.
	// Why: go-diskfs zeroes what a new file system must read as zeros
	// (every inode table, the journal: some 450 MiB on a 20 GiB disk) and
	// the blocks of a file's holes with plain writes, which would fill the
	// file that mkfs.ext4 left sparse.
	dirty []uint64
}

var _ backend.Storage = (*sparseFile)(nil)

// newSparseFile makes f, which must be new and empty, a hole of size bytes.
func newSparseFile(f *os.File, size int64) (*sparseFile, error) {
	if err := makeSparse(f); err != nil {
		return nil, err
	}
	if err := f.Truncate(size); err != nil {
		return nil, fmt.Errorf("make %s %d bytes long: %w", f.Name(), size, err)
	}
	chunks := (size + sparseChunk - 1) / sparseChunk
	return &sparseFile{f: f, size: size, dirty: make([]uint64, (chunks+63)/64)}, nil
}

func (s *sparseFile) isDirty(c int64) bool { return s.dirty[c/64]&(1<<(c%64)) != 0 }
func (s *sparseFile) setDirty(c int64)     { s.dirty[c/64] |= 1 << (c % 64) }

func (s *sparseFile) WriteAt(p []byte, off int64) (int, error) {
	// go-diskfs's ext4 File.Write loops over every extent of a file and
	// makes empty writes at offsets computed for extents it has no bytes
	// for, which can be negative; an empty write is a no-op wherever it is.
	if len(p) == 0 {
		return 0, nil
	}
	if off < 0 || off+int64(len(p)) > s.size {
		return 0, fmt.Errorf("write of %d bytes at %d is outside the %d-byte disk", len(p), off, s.size)
	}
	// Walk p chunk by chunk, writing runs of chunks that must be written
	// with one WriteAt each.
	runStart, pos := -1, 0
	flush := func(end int) error {
		if runStart < 0 {
			return nil
		}
		_, err := s.f.WriteAt(p[runStart:end], off+int64(runStart))
		runStart = -1
		return err
	}
	for pos < len(p) {
		at := off + int64(pos)
		c := at / sparseChunk
		n := min(len(p)-pos, int((c+1)*sparseChunk-at))
		seg := p[pos : pos+n]
		zero := bytes.Equal(seg, zeroChunk[:n])
		switch {
		case zero && !s.isDirty(c):
			if err := flush(pos); err != nil {
				return pos, err
			}
		default:
			if !zero {
				s.setDirty(c)
			}
			if runStart < 0 {
				runStart = pos
			}
		}
		pos += n
	}
	if err := flush(len(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *sparseFile) ReadAt(p []byte, off int64) (int, error) { return s.f.ReadAt(p, off) }
func (s *sparseFile) Read(p []byte) (int, error)              { return s.f.Read(p) }
func (s *sparseFile) Seek(off int64, whence int) (int64, error) {
	return s.f.Seek(off, whence)
}
func (s *sparseFile) Stat() (fs.FileInfo, error) { return s.f.Stat() }
func (s *sparseFile) Close() error               { return s.f.Close() }
func (s *sparseFile) Path() string               { return s.f.Name() }

// Sys returns no *os.File (backend.ErrNotSuitable), so that go-diskfs
// neither fsyncs through it after each step nor tries block-device ioctls
// on it. The caller closes the file once.
func (s *sparseFile) Sys() (*os.File, error) { return nil, backend.ErrNotSuitable }

func (s *sparseFile) Writable() (backend.WritableFile, error) { return s, nil }
