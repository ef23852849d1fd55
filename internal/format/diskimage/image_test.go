package diskimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// imageFormat is one of the writers under test.
type imageFormat struct {
	name  string
	write func(ctx context.Context, raw, out string) error
	// unit is the format's allocation unit: the qcow2 cluster, the VDI
	// block.
	unit int64
	// overhead bounds the file's bytes beyond its allocated units, for a
	// disk of at most a few GiB.
	overhead int64
}

var imageFormats = []imageFormat{
	// Header, L1 table, refcount table and block, and up to a few L2
	// tables (one per 512 MiB), in 64 KiB clusters.
	{"qcow2", WriteQCOW2, qcow2ClusterSize, 64 * qcow2ClusterSize},
	// Header and block map, padded to 1 MiB.
	{"vdi", WriteVDI, vdiBlockSize, vdiDataAlign},
	// Header section, log, metadata region and a BAT of 1 MiB (128 GiB
	// of disk), each a whole MiB.
	{"vhdx", WriteVHDX, vhdxBlockSize, 4 * mibBytes},
}

// dataRun is a write to a test raw disk.
type dataRun struct {
	off  int64
	data []byte
}

// makeRaw writes a sparse raw disk of size bytes holding runs.
func makeRaw(t testing.TB, path string, size int64, runs []dataRun) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := makeSparse(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if _, err := f.WriteAt(r.data, r.off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// usedUnits counts the units of unit bytes of the raw disk at path that
// hold a non-zero byte, reading all of it: what the image must allocate.
func usedUnits(t testing.TB, path string, unit int64) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	for off := int64(0); off < int64(len(b)); off += unit {
		chunk := b[off:min(off+unit, int64(len(b)))]
		if !bytes.Equal(chunk, make([]byte, len(chunk))) {
			n++
		}
	}
	return n
}

func pseudoRandom(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32() | 1) // never 0, so a run is data throughout
	}
	return b
}

// qemuImg runs qemu-img and returns its output and exit status.
func qemuImg(t testing.TB, args ...string) (string, int) {
	t.Helper()
	return runTool(t, "qemu-img", args...)
}

// qemuIO runs qemu-io's commands on image.
func qemuIO(t testing.TB, format, image string, cmds ...string) (string, int) {
	t.Helper()
	args := []string{"-f", format}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	return runTool(t, "qemu-io", append(args, image)...)
}

// runTool runs name and returns its output (stdout and stderr) and exit
// status; a tool that cannot be run fails the test.
func runTool(t testing.TB, name string, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
		return "", 0
	}
}

// checkImage checks with qemu-img that image, written from raw, is sound:
// check finds no corruption and no leak, compare finds it identical to
// raw, info gives the format and raw's size, and map shows as data
// exactly the units of raw that are not zeros.
func checkImage(t testing.TB, ft imageFormat, raw, image string) {
	t.Helper()
	checkImageContents(t, ft, raw, image)
	checkImageAllocation(t, ft, raw, image)
}

// checkImageContents checks image as checkImage does, without the
// allocation's checks.
func checkImageContents(t testing.TB, ft imageFormat, raw, image string) {
	t.Helper()
	if out, code := qemuImg(t, "check", "-f", ft.name, image); code != 0 {
		t.Fatalf("qemu-img check -f %s: exit %d (2: corrupt, 3: leaks)\n%s", ft.name, code, out)
	}
	if out, code := qemuImg(t, "compare", "-f", "raw", "-F", ft.name, raw, image); code != 0 {
		t.Fatalf("qemu-img compare: exit %d (1: different)\n%s", code, out)
	}
	out, code := qemuImg(t, "info", "--output=json", "-f", ft.name, image)
	if code != 0 {
		t.Fatalf("qemu-img info: exit %d\n%s", code, out)
	}
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("qemu-img info: %v\n%s", err, out)
	}
	rfi, err := os.Stat(raw)
	if err != nil {
		t.Fatal(err)
	}
	if info.Format != ft.name || info.VirtualSize != rfi.Size() {
		t.Errorf("qemu-img info: format %q, virtual size %d; want %q, %d", info.Format, info.VirtualSize, ft.name, rfi.Size())
	}
	// Probed, not told: the header alone tells what the file is.
	if format, _, err := Info(context.Background(), image); err != nil || format != ft.name {
		t.Errorf("qemu-img info without -f: %q, %v; want %q", format, err, ft.name)
	}
}

// checkImageAllocation asserts that image allocates exactly the units of
// raw that are not zeros, and takes little room besides.
func checkImageAllocation(t testing.TB, ft imageFormat, raw, image string) {
	t.Helper()

	mapped := int64(0)
	if ft.name == "vhdx" {
		// QEMU's VHDX driver reports no allocation (map calls every
		// byte data): read the BAT instead.
		mapped = vhdxPresentBlocks(t, image) * vhdxBlockSize
	} else {
		out, code := qemuImg(t, "map", "--output=json", "-f", ft.name, image)
		if code != 0 {
			t.Fatalf("qemu-img map: exit %d\n%s", code, out)
		}
		var extents []struct {
			Start, Length int64
			Data          bool
		}
		if err := json.Unmarshal([]byte(out), &extents); err != nil {
			t.Fatalf("qemu-img map: %v\n%s", err, out)
		}
		for _, e := range extents {
			if e.Data {
				mapped += e.Length
			}
		}
	}
	units := usedUnits(t, raw, ft.unit)
	// The last unit may be cut short by the disk's end.
	if lo, hi := (units-1)*ft.unit, units*ft.unit; mapped > hi || mapped < lo && units > 0 || units == 0 && mapped != 0 {
		t.Errorf("qemu-img map: %d bytes of data; want %d units of %d bytes", mapped, units, ft.unit)
	}
	fi, err := os.Stat(image)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > units*ft.unit+ft.overhead {
		t.Errorf("%s is %d bytes for %d allocated units of %d bytes: more than %d bytes of overhead", image, fi.Size(), units, ft.unit, ft.overhead)
	}
	if fi.Mode().Perm() != 0o644 && os.PathSeparator == '/' {
		t.Errorf("%s has mode %v; want 0644", image, fi.Mode().Perm())
	}
}

// onlyEntries asserts dir holds exactly names: no temporary file left.
func onlyEntries(t testing.TB, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Errorf("%s holds %q; want %q", dir, got, names)
	}
}

// fixedRuns returns a 64 MiB disk's data: runs at odd offsets, one not on a
// cluster, one across a block's end, one at the disk's very end, and 2
// MiB of written zeros, which must not be allocated.
func fixedRuns() []dataRun {
	r := rand.New(rand.NewPCG(1, 2))
	return []dataRun{
		{0, pseudoRandom(r, 512)},
		{3*mibBytes + 12345, pseudoRandom(r, 200<<10)},
		{10 * mibBytes, make([]byte, 2*mibBytes)},
		{13*mibBytes - 7, pseudoRandom(r, 14)},
		{20 * mibBytes, pseudoRandom(r, 64<<10)},
		{33*mibBytes + 4096, make([]byte, 4096)},
		{33*mibBytes + 8192, pseudoRandom(r, 1)},
		{64*mibBytes - 100, pseudoRandom(r, 100)},
	}
}

func TestWriteImage(t *testing.T) {
	requireOracles(t, "qemu-img", "qemu-io")
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, 64*mibBytes, fixedRuns())
	for _, ft := range imageFormats {
		t.Run(ft.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "disk."+ft.name)
			if err := ft.write(context.Background(), raw, out); err != nil {
				t.Fatal(err)
			}
			checkImage(t, ft, raw, out)
			onlyEntries(t, filepath.Dir(out), "disk."+ft.name)
			fi, _ := os.Stat(out)
			t.Logf("%s: %d bytes for a 64 MiB disk, %d units of %d bytes hold data", ft.name, fi.Size(), usedUnits(t, raw, ft.unit), ft.unit)
			// QEMU can go on writing the image, as a guest does: it
			// allocates from where the refcounts say the file ends.
			guest := filepath.Join(t.TempDir(), "guest.raw")
			b, err := os.ReadFile(raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(guest, b, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, f := range []struct{ format, path string }{{"raw", guest}, {ft.name, out}} {
				if out, code := qemuIO(t, f.format, f.path, "write -P 0xab 5M 3M", "write -P 0xcd 0 4k", "write -z 20M 64k", "write -P 0xef 63M 1M"); code != 0 {
					t.Fatalf("qemu-io on %s: exit %d\n%s", f.path, code, out)
				}
			}
			checkImageContents(t, ft, guest, out)

			// Written again over the first.
			if err := ft.write(context.Background(), raw, out); err != nil {
				t.Fatal(err)
			}
			checkImage(t, ft, raw, out)
			onlyEntries(t, filepath.Dir(out), "disk."+ft.name)
		})
	}
}

func TestWriteImageRandom(t *testing.T) {
	requireOracles(t, "qemu-img")
	seed := uint64(time.Now().UnixNano())
	// To replay a failure.
	if s := os.Getenv("HWK_IMAGE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("HWK_IMAGE_SEED: %v", err)
		}
	}
	t.Logf("seed %d (HWK_IMAGE_SEED=%d replays it)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	for i := range 20 {
		// Up to 8 MiB, in sectors, so mostly not whole clusters or blocks.
		size := (1 + r.Int64N(16<<10)) * sectorSize
		var runs []dataRun
		for range r.IntN(8) {
			off := r.Int64N(size)
			n := 1 + r.Int64N(min(size-off, 300<<10))
			if r.IntN(4) == 0 {
				runs = append(runs, dataRun{off, make([]byte, n)})
			} else {
				runs = append(runs, dataRun{off, pseudoRandom(r, int(n))})
			}
		}
		raw := filepath.Join(dir, fmt.Sprintf("%d.raw", i))
		makeRaw(t, raw, size, runs)
		for _, ft := range imageFormats {
			out := filepath.Join(dir, fmt.Sprintf("%d.%s", i, ft.name))
			if err := ft.write(context.Background(), raw, out); err != nil {
				t.Fatalf("layout %d (%d bytes, %d runs): %v", i, size, len(runs), err)
			}
			checkImage(t, ft, raw, out)
			if t.Failed() {
				t.Fatalf("layout %d: %d bytes, runs at %v", i, size, runOffsets(runs))
			}
		}
	}
}

func runOffsets(runs []dataRun) []string {
	var s []string
	for _, r := range runs {
		s = append(s, fmt.Sprintf("%d+%d", r.off, len(r.data)))
	}
	return s
}

// TestWriteImageOddSize checks that a raw disk of a whole number of
// sectors but not of clusters or blocks is written with its exact size,
// and that one of no whole number of sectors, or empty, is refused, since
// QEMU would round its size up.
func TestWriteImageOddSize(t *testing.T) {
	requireOracles(t, "qemu-img")
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	size := int64(5*mibBytes + 7*sectorSize)
	raw := filepath.Join(dir, "odd.raw")
	makeRaw(t, raw, size, []dataRun{{size - 1000, pseudoRandom(r, 1000)}, {mibBytes, pseudoRandom(r, 10)}})
	bad := filepath.Join(dir, "bad.raw")
	makeRaw(t, bad, 5*mibBytes+100, []dataRun{{0, []byte{1}}})
	empty := filepath.Join(dir, "empty.raw")
	makeRaw(t, empty, 0, nil)
	for _, ft := range imageFormats {
		t.Run(ft.name, func(t *testing.T) {
			outDir := t.TempDir()
			out := filepath.Join(outDir, "disk."+ft.name)
			if err := ft.write(context.Background(), raw, out); err != nil {
				t.Fatal(err)
			}
			checkImage(t, ft, raw, out)
			os.Remove(out)

			err := ft.write(context.Background(), bad, out)
			if err == nil || !strings.Contains(err.Error(), "not a whole number of 512-byte sectors") || !strings.Contains(err.Error(), "write "+ft.name+" "+out) {
				t.Errorf("%d bytes: got %v; want an error about 512-byte sectors led by write %s %s", 5*mibBytes+100, err, ft.name, out)
			}
			err = ft.write(context.Background(), empty, out)
			if err == nil || !strings.Contains(err.Error(), "empty") {
				t.Errorf("empty raw disk: got %v; want an error", err)
			}
			onlyEntries(t, outDir)
		})
	}
}

// TestWriteImageFailureLeavesNothing checks that a write that fails,
// whether it never starts or stops halfway, leaves nothing behind, and an
// existing image alone.
func TestWriteImageFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, 64*mibBytes, fixedRuns())
	for _, ft := range imageFormats {
		t.Run(ft.name, func(t *testing.T) {
			outDir := t.TempDir()
			out := filepath.Join(outDir, "disk."+ft.name)
			if err := ft.write(context.Background(), filepath.Join(dir, "missing.raw"), out); err == nil {
				t.Error("no error for a missing raw disk")
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := ft.write(ctx, raw, out); !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "write "+ft.name+" "+out+": ") {
				t.Errorf("canceled: got %v; want context.Canceled led by write %s %s", err, ft.name, out)
			}
			onlyEntries(t, outDir)
			if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := ft.write(ctx, raw, out); err == nil {
				t.Error("no error when canceled")
			}
			if b, _ := os.ReadFile(out); string(b) != "old" {
				t.Errorf("a failed write changed %s", out)
			}
			onlyEntries(t, outDir, "disk."+ft.name)
			if err := ft.write(context.Background(), raw, filepath.Join(dir, "no", "such", "dir", "x")); err == nil {
				t.Error("no error for an output in a missing directory")
			}
		})
	}
}

// TestDataExtents checks that the extents SEEK_DATA finds cover every
// non-zero block: scanning them gives what reading the whole file gives,
// the only way on Windows.
func TestDataExtents(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, 64*mibBytes, fixedRuns())
	f, err := os.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	exts, err := dataExtents(f, 64*mibBytes)
	if err != nil {
		t.Fatal(err)
	}
	covered := int64(0)
	for _, e := range exts {
		covered += e.len
	}
	t.Logf("%d extents, %d bytes", len(exts), covered)
	for _, bs := range []int{qcow2ClusterSize, vdiBlockSize, 4096} {
		scan := func(exts []extent) (idx []int64, sum [32]byte) {
			h := sha256.New()
			if err := scanBlocks(context.Background(), f, 64*mibBytes, bs, exts, func(i int64, b []byte) error {
				idx = append(idx, i)
				h.Write(b)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			h.Sum(sum[:0])
			return idx, sum
		}
		gotIdx, gotSum := scan(exts)
		wantIdx, wantSum := scan(wholeFile(64 * mibBytes))
		if fmt.Sprint(gotIdx) != fmt.Sprint(wantIdx) || gotSum != wantSum {
			t.Errorf("block size %d: blocks %v from the extents, %v from the whole file", bs, gotIdx, wantIdx)
		}
		if len(wantIdx) == 0 {
			t.Errorf("block size %d: no blocks found", bs)
		}
	}
}

// TestWriteImageLarge checks that a 20 GiB disk with 50 MiB of data is
// written in seconds: only the data is read.
func TestWriteImageLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 20 GiB sparse files")
	}
	requireOracles(t, "qemu-img")
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	const size = 20 << 30
	r := rand.New(rand.NewPCG(5, 6))
	var runs []dataRun
	for i := range int64(50) {
		runs = append(runs, dataRun{i*(size/50) + r.Int64N(size/100), pseudoRandom(r, mibBytes)})
	}
	// Zeros the writers must read and drop.
	runs = append(runs, dataRun{size / 3, make([]byte, 8*mibBytes)})
	makeRaw(t, raw, size, runs)
	for _, ft := range imageFormats {
		t.Run(ft.name, func(t *testing.T) {
			out := filepath.Join(dir, "disk."+ft.name)
			start := time.Now()
			if err := ft.write(context.Background(), raw, out); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			fi, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: 20 GiB raw disk with 50 MiB of data (and 8 MiB of written zeros) written in %v, %d bytes", ft.name, took.Round(time.Millisecond), fi.Size())
			if out, code := qemuImg(t, "check", "-f", ft.name, out); code != 0 {
				t.Fatalf("qemu-img check: exit %d\n%s", code, out)
			}
			// QEMU's VHDX driver reports no allocation, so compare
			// would read all 20 GiB through it; the smaller tests
			// compare VHDX's contents.
			if ft.name != "vhdx" {
				start = time.Now()
				if out, code := qemuImg(t, "compare", "-f", "raw", "-F", ft.name, raw, out); code != 0 {
					t.Fatalf("qemu-img compare: exit %d\n%s", code, out)
				}
				t.Logf("qemu-img compare took %v", time.Since(start).Round(time.Millisecond))
			}
			// A 1 MiB run meets at most two 1 MiB blocks, or 17 clusters.
			if limit := int64(len(runs)-1)*(mibBytes/ft.unit+1)*ft.unit + ft.overhead; fi.Size() > limit {
				t.Errorf("%d bytes for 50 MiB of data; want at most %d", fi.Size(), limit)
			}
		})
	}
}

// TestWriteVDIHeader checks that the VDI header holds what VirtualBox
// reads: the pre-header text and signature, version 1.1, a dynamic image
// of 1 MiB blocks, random version 4 UUIDs, and free blocks marked
// 0xffffffff.
func TestWriteVDIHeader(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, 64*mibBytes, fixedRuns())
	out := filepath.Join(dir, "disk.vdi")
	if err := WriteVDI(context.Background(), raw, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if got := string(b[:len(vdiPreHeaderText)]); got != "<<< Oracle VM VirtualBox Disk Image >>>\n" {
		t.Errorf("pre-header %q", got)
	}
	for _, f := range []struct {
		name     string
		off      int
		got      uint64
		want     uint64
		is64bits bool
	}{
		{"signature", 0x40, 0, 0xbeda107f, false},
		{"version", 0x44, 0, 0x00010001, false},
		{"header size", 0x48, 0, 0x180, false},
		{"type", 0x4c, 0, 1, false},
		{"block map offset", 0x154, 0, 0x200, false},
		{"data offset", 0x158, 0, 1 << 20, false},
		{"sector size", 0x168, 0, 512, false},
		{"disk size", 0x170, 0, 64 * mibBytes, true},
		{"block size", 0x178, 0, 1 << 20, false},
		{"blocks", 0x180, 0, 64, false},
		{"blocks allocated", 0x184, 0, uint64(usedUnits(t, raw, vdiBlockSize)), false},
	} {
		got := uint64(le.Uint32(b[f.off:]))
		if f.is64bits {
			got = le.Uint64(b[f.off:])
		}
		if got != f.want {
			t.Errorf("%s at %#x: %#x; want %#x", f.name, f.off, got, f.want)
		}
	}
	create, modify := rtUUID(b[0x188:]), rtUUID(b[0x198:])
	for _, u := range []uuid.UUID{create, modify} {
		if u.Version() != 4 || u.Variant() != uuid.RFC4122 {
			t.Errorf("UUID %s is not a random (version 4) one: its fields are in the wrong order", u)
		}
	}
	if create == modify {
		t.Error("creation and modification UUIDs are the same")
	}
	if !bytes.Equal(b[0x1a8:0x1c8], make([]byte, 32)) {
		t.Error("parent UUIDs are set")
	}
	// Block 0 holds data, block 1 does not; the allocated blocks are
	// numbered in order.
	next := uint32(0)
	for i := range 64 {
		e := le.Uint32(b[0x200+4*i:])
		switch {
		case i == 1 && e != 0xffffffff:
			t.Errorf("block 1 maps to %#x; want 0xffffffff", e)
		case e == 0xffffffff:
		case e != next:
			t.Errorf("block %d maps to %d; want %d", i, e, next)
		default:
			next++
		}
	}
	if int64(len(b)) != 1<<20+int64(next)<<20 {
		t.Errorf("%d bytes; want 1 MiB and %d blocks", len(b), next)
	}
}

// rtUUID returns the VirtualBox RTUUID in b: its first three fields
// little-endian.
func rtUUID(b []byte) uuid.UUID {
	var u uuid.UUID
	copy(u[:], b[:16])
	binary.BigEndian.PutUint32(u[0:], binary.LittleEndian.Uint32(b[0:]))
	binary.BigEndian.PutUint16(u[4:], binary.LittleEndian.Uint16(b[4:]))
	binary.BigEndian.PutUint16(u[6:], binary.LittleEndian.Uint16(b[6:]))
	return u
}
