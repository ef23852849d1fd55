package imagearchive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/testing/imagearchivetest"
)

// listingMagic starts a fuzz input that fuzzArchive turns into a tar, rather
// than an archive as it is: a listing whose entries each start with a line
// "== NAME" (a file: the lines up to the next entry are its content),
// "=s NAME TARGET" or "=h NAME TARGET" (a symbolic or hard link). An "@" in
// a file's name stands for the SHA-256 of its content.
// Checksums and digests then hold, so mutations reach the JSON instead of
// stopping at the first header.
const listingMagic = "hwk-archive-listing\n"

// fuzzArchive returns the tar the fuzz input data stands for.
func fuzzArchive(data []byte) []byte { return imagearchivetest.FromListing(listingMagic, data) }

// listing returns the listing of the tar archive b (for seeds): blobs named by
// digest get "@".
func listing(t testing.TB, b []byte) []byte {
	out, err := imagearchivetest.Listing(listingMagic, b, func(name string) bool {
		_, ok := blobDigest(name)
		return ok
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// seedArchives returns real-format archives of every kind Scan reads, kept
// small (gzip layers, one layer per image) so that the fuzzer's inputs
// stay small: it minimizes each new one by running it again and again.
// The first is an OCI layout and the sixth a classic save with links.
func seedArchives(t testing.TB) [][]byte {
	oci := imagearchivetest.OCI(
		imagearchivetest.Image{Refs: []string{"example.com/app:1", "example.com/app:latest"}, Platforms: []string{"linux/amd64"}, Gzip: true, LayerBytes: 16},
		imagearchivetest.Image{Refs: []string{"busybox:1.37"}, Platforms: []string{"linux/amd64", "linux/arm64/v8", "windows/amd64:10.0.20348.2849"}, Gzip: true, LayerBytes: 16},
	)
	dropped := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"a:1"}, Platforms: []string{"linux/amd64", "linux/arm64"}, Drop: []int{1}, Gzip: true, LayerBytes: 16})
	gzLayers := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"mcr.microsoft.com/windows/servercore:ltsc2022"}, Platforms: []string{"windows/amd64:10.0.20348.2655"}, Base: []string{"base"}, Gzip: true, LayerBytes: 16})
	classic := imagearchivetest.Docker(imagearchivetest.Image{Refs: []string{"my/app:dev", "my/app:latest"}, Platforms: []string{"linux/amd64"}, LayerBytes: 16})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(classic)
	_ = zw.Close()
	// A classic save links a layer it holds twice to its first copy.
	var linked bytes.Buffer
	tw := tar.NewWriter(&linked)
	tr := tar.NewReader(bytes.NewReader(classic))
	var layer string
	var manifest []byte
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(tr)
		if h.Name == "manifest.json" {
			manifest = data
			continue
		}
		if layer == "" && strings.HasSuffix(h.Name, "/layer.tar") {
			layer = h.Name
		}
		_ = tw.WriteHeader(h)
		_, _ = tw.Write(data)
	}
	_ = tw.WriteHeader(&tar.Header{Name: "copy/layer.tar", Linkname: "../" + layer, Typeflag: tar.TypeSymlink, Mode: 0o777})
	_ = tw.WriteHeader(&tar.Header{Name: "hard/layer.tar", Linkname: layer, Typeflag: tar.TypeLink, Mode: 0o777})
	manifest = bytes.Replace(manifest, []byte(`"`+layer+`"`), []byte(`"copy/layer.tar"`), 1)
	_ = tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(manifest)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(manifest)
	_ = tw.Close()
	hostile := tarOfEntries(
		&tar.Header{Name: "../escape", Typeflag: tar.TypeReg},
		&tar.Header{Name: "blobs/sha256/x", Linkname: "../../../etc/passwd", Typeflag: tar.TypeSymlink},
	)
	seeds := [][]byte{oci, dropped, gzLayers, classic, gz.Bytes(), linked.Bytes(), hostile, sparseArchive(tar.TypeReg)}
	for _, s := range [][]byte{oci, dropped, gzLayers, classic, linked.Bytes()} {
		seeds = append(seeds, listing(t, s))
	}
	return seeds
}

func tarOfEntries(hs ...*tar.Header) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hs {
		h.Mode = 0o644
		_ = tw.WriteHeader(h)
	}
	_ = tw.Close()
	return b.Bytes()
}

// tarSize returns how many bytes the tar in archive (maybe gzip) holds, up to
// limit.
func tarSize(archive []byte, limit int64) int64 {
	var r io.Reader = bytes.NewReader(archive)
	if len(archive) >= 2 && archive[0] == 0x1f && archive[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return int64(len(archive))
		}
		r = zr
	}
	n, _ := io.Copy(io.Discard, io.LimitReader(r, limit))
	return n
}

// cleanRelative reports whether name is a relative slash-separated path
// with no empty, "." or ".." element.
func cleanRelative(name string) bool {
	for _, el := range strings.Split(name, "/") {
		if el == "" || el == "." || el == ".." {
			return false
		}
	}
	return true
}

// allocated runs fn and returns how many bytes it allocated.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// checkArchive asserts what holds of every archive Scan describes.
func checkArchive(t *testing.T, a *Archive, size int64) {
	t.Helper()
	if len(a.Images) == 0 {
		t.Fatal("Scan described an archive with no images without an error")
	}
	if a.Bytes < 0 || a.Bytes > size {
		t.Fatalf("the archive's entries add up to %d bytes, more than its %d", a.Bytes, size)
	}
	for name := range a.entries {
		if !cleanRelative(name) || escapes(name) || cleanName(name) != name {
			t.Fatalf("entry name %q is not clean and relative", name)
		}
	}
	for d, e := range a.blobs {
		if !validDigest(d) || d != e.digest {
			t.Fatalf("blob %q holds content with digest %s", d, e.digest)
		}
	}
	for _, im := range a.Images {
		if !validDigest(im.Digest) {
			t.Fatalf("image digest %q", im.Digest)
		}
		seen := map[string]bool{}
		for _, r := range im.Refs {
			if n, err := normalizeRef(r); err != nil || n != r || seen[r] {
				t.Fatalf("image %s: name %q is not normalized (%q, %v) or twice", im.Digest, r, n, err)
			}
			seen[r] = true
		}
		for _, m := range im.Manifests {
			if !validDigest(m.Digest) || (m.Config != "" && !validDigest(m.Config)) {
				t.Fatalf("manifest %q, config %q: not digests", m.Digest, m.Config)
			}
			if m.Platform != m.Platform.Normalize() {
				t.Fatalf("platform %+v is not normalized", m.Platform)
			}
			var bytes int64
			for _, b := range m.blobs {
				if e := a.blobs[b]; e != nil {
					bytes += e.size
				} else if m.Missing == "" {
					t.Fatalf("manifest %s lacks blob %s but is not marked missing", m.Digest, b)
				}
			}
			if m.Bytes != bytes {
				t.Fatalf("manifest %s: Bytes %d, its blobs hold %d", m.Digest, m.Bytes, bytes)
			}
			for _, l := range m.Layers {
				if e := a.blobs[l.Digest]; l.Size < 0 || (e != nil && e.size != l.Size) {
					t.Fatalf("layer %s: size %d, the archive holds %+v", l.Digest, l.Size, e)
				}
			}
			if m.Missing == "" && m.raw == nil {
				t.Fatalf("manifest %s is complete without its JSON", m.Digest)
			}
		}
	}
}

// checkRewrite writes the archive of each complete, named manifest (a few)
// and scans it: the node's archive must describe that manifest as the
// source did.
func checkRewrite(t *testing.T, a *Archive, src []byte) {
	t.Helper()
	done := 0
	for i, im := range a.Images {
		for j, m := range im.Manifests {
			if m.Missing != "" || len(im.Refs) == 0 || done == 2 {
				continue
			}
			done++
			p, err := a.Plan([]Selection{{Image: i, Manifest: j}}, nil)
			if err != nil {
				t.Fatalf("Plan of complete manifest %s: %v", m.Digest, err)
			}
			var out bytes.Buffer
			if err := a.Write(&out, bytes.NewReader(src), p); err != nil {
				t.Fatalf("Write of %s: %v", m.Digest, err)
			}
			if p.Bytes > int64(out.Len()) {
				t.Fatalf("plan says %d bytes, the archive is %d", p.Bytes, out.Len())
			}
			b, err := Scan(bytes.NewReader(out.Bytes()))
			if err != nil {
				t.Fatalf("Scan of the written archive of %s: %v", m.Digest, err)
			}
			if len(b.Images) != 1 || len(b.Images[0].Manifests) != 1 {
				t.Fatalf("written archive of %s holds %d images", m.Digest, len(b.Images))
			}
			got := b.Images[0]
			gm := got.Manifests[0]
			if !reflect.DeepEqual(got.Refs, im.Refs) || gm.Digest != m.Digest || gm.Config != m.Config || gm.Platform != m.Platform ||
				!reflect.DeepEqual(gm.Layers, m.Layers) || gm.Missing != "" || gm.Bytes != m.Bytes {
				t.Fatalf("written archive describes\n%+v %+v\nthe source\n%+v %+v", got.Refs, gm, im.Refs, m)
			}
		}
	}
}

func FuzzScan(f *testing.F) {
	for _, s := range seedArchives(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src := fuzzArchive(data)
		var a *Archive
		var err error
		size := tarSize(src, 1<<30)
		used := allocated(func() { a, err = Scan(bytes.NewReader(src)) })
		// Buffers of a few MiB, then at most what the archive holds.
		if limit := 16<<20 + 4*uint64(size); used > limit {
			t.Fatalf("Scan of a %d-byte archive allocated %d bytes", size, used)
		}
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || err.Error() == "" {
				t.Fatalf("Scan error %T %v is not a FormatError", err, err)
			}
			return
		}
		checkArchive(t, a, size)
		checkRewrite(t, a, src)
	})
}

func FuzzFilter(f *testing.F) {
	for _, s := range seedArchives(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src := fuzzArchive(data)
		// The node holds the blobs whose digest ends in 0-7.
		skip := func(d string) bool { return d[len(d)-1] < '8' }
		var out bytes.Buffer
		filtered, err := Filter(&out, bytes.NewReader(src), skip)
		scanned, scanErr := Scan(bytes.NewReader(src))
		if err != nil {
			// Whatever reads dst must never take it for a whole archive.
			if imagearchivetest.WholeTar(out.Bytes()) {
				t.Fatalf("Filter failed (%v) but what it wrote reads as a whole archive", err)
			}
			var fe *FormatError
			if scanErr == nil && !errors.As(err, &fe) && !strings.HasPrefix(err.Error(), "pass on ") {
				t.Fatalf("Filter failed with %v on an archive Scan reads", err)
			}
			return
		}
		if scanErr != nil {
			t.Fatalf("Filter read an archive Scan refuses (%v)", scanErr)
		}
		if !reflect.DeepEqual(filtered.Images, scanned.Images) {
			t.Fatalf("Filter describes\n%+v\nScan\n%+v", filtered.Images, scanned.Images)
		}
		checkArchive(t, filtered.Archive, tarSize(src, 1<<30))
		for d := range filtered.Skipped {
			if !skip(d) || filtered.blobs[d] == nil {
				t.Fatalf("skipped %s, which the node lacks or the archive does not hold", d)
			}
		}
		// What went on is the source's entries, less the skipped blobs, in
		// order and intact.
		type ent struct {
			name, link string
			typ        byte
			data       string
		}
		read := func(b []byte, drop bool) []ent {
			var out []ent
			tr, err := openTar(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			for {
				h, err := tr.Next()
				if err == io.EOF {
					return out
				}
				if err != nil {
					t.Fatalf("read back the filtered archive: %v", err)
				}
				data, _ := io.ReadAll(tr)
				if d, ok := blobDigest(cleanName(h.Name)); drop && ok && h.Typeflag == tar.TypeReg && filtered.Skipped[d] {
					continue
				}
				out = append(out, ent{h.Name, h.Linkname, h.Typeflag, string(data)})
			}
		}
		if got, want := read(out.Bytes(), false), read(src, true); !reflect.DeepEqual(got, want) {
			t.Fatalf("Filter passed on %d entries, want %d", len(got), len(want))
		}
	})
}

func FuzzParsePlatform(f *testing.F) {
	for _, s := range []string{
		"linux/amd64", "linux/x86_64", "linux/arm64/v8", "linux/arm/v7", "windows/amd64:10.0.20348",
		"windows/amd64:10.0.20348.2849", "Windows/AMD64:10.0.26100.1742", "windows/amd64:10.0.17763", "linux", "linux/", "/amd64",
		"a/b/c/d", "windows/amd64:", "linux/aarch64/8", "windows/amd64:10.0.x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePlatform(s)
		if err != nil {
			if !strings.Contains(err.Error(), "want os/arch") {
				t.Fatalf("ParsePlatform(%q): unclear error %v", s, err)
			}
			return
		}
		if p.OS == "" || p.Architecture == "" || strings.Contains(p.OS+p.Architecture+p.Variant, "/") {
			t.Fatalf("ParsePlatform(%q) = %+v", s, p)
		}
		if p.Normalize() != p {
			t.Fatalf("ParsePlatform(%q) = %+v, not normalized (%+v)", s, p, p.Normalize())
		}
		again, err := ParsePlatform(p.String())
		if err != nil || again != p {
			t.Fatalf("ParsePlatform(%q) = %+v; its String %q parses as %+v, %v", s, p, p.String(), again, err)
		}
		_ = p.Describe()
		ok, why := Runs(p, p)
		build := windowsBuild(p.OSVersion)
		if want := p.OS != "windows" || build > 0; ok != want {
			t.Fatalf("Runs(%s, itself) = %v (%s), want %v", p, ok, why, want)
		}
		if ok != (why == "") {
			t.Fatalf("Runs(%s, itself) = %v with reason %q", p, ok, why)
		}
		if best := Best(p, []Platform{p}); (best == 0) != ok {
			t.Fatalf("Best(%s, [itself]) = %d, Runs says %v", p, best, ok)
		}
	})
}

// Regressions: what the fuzz targets and their properties found, and the
// limits added with them.

// rawTar returns a tar of hand-made headers, for entries tar.Writer refuses to
// write: each entry is a header (PAX records, when given, in a header of
// their own) and content.
func rawTar(entries ...rawEntry) []byte {
	var b bytes.Buffer
	header := func(name string, typ byte, size int) {
		h := make([]byte, 512)
		copy(h, name)
		copy(h[100:], "0000644\x00")
		copy(h[108:], "0000000\x00")
		copy(h[116:], "0000000\x00")
		copy(h[124:], []byte(strings.Repeat("0", 11-len(strconv.FormatInt(int64(size), 8)))+strconv.FormatInt(int64(size), 8)+"\x00"))
		copy(h[136:], "00000000000\x00")
		h[156] = typ
		copy(h[257:], "ustar\x0000")
		if typ == tar.TypeGNUSparse {
			// Old GNU format; no data, a real size of 8 GiB.
			copy(h[257:], "ustar  \x00")
			copy(h[483:], "77777777777\x00")
		}
		copy(h[148:], "        ")
		sum := 0
		for _, c := range h {
			sum += int(c)
		}
		copy(h[148:], []byte(strings.Repeat("0", 6-len(strconv.FormatInt(int64(sum), 8)))+strconv.FormatInt(int64(sum), 8)+"\x00 "))
		b.Write(h)
	}
	pad := func(n int) { b.Write(make([]byte, (512-n%512)%512)) }
	for _, e := range entries {
		if len(e.pax) > 0 {
			var recs strings.Builder
			for _, kv := range e.pax {
				rec := " " + kv[0] + "=" + kv[1] + "\n"
				n := len(rec) + 1
				for len(strconv.Itoa(n))+len(rec) != n {
					n++
				}
				recs.WriteString(strconv.Itoa(n) + rec)
			}
			header("PaxHeaders/"+e.name, tar.TypeXHeader, recs.Len())
			b.WriteString(recs.String())
			pad(recs.Len())
		}
		header(e.name, e.typ, len(e.data))
		b.WriteString(e.data)
		pad(len(e.data))
	}
	b.Write(make([]byte, 1024))
	return b.Bytes()
}

type rawEntry struct {
	name string
	typ  byte
	data string
	pax  [][2]string
}

// sparseArchive holds one sparse file of many GB, all hole.
func sparseArchive(typ byte) []byte {
	if typ == tar.TypeGNUSparse {
		return rawTar(rawEntry{name: "index.json", typ: tar.TypeGNUSparse})
	}
	return rawTar(rawEntry{name: "index.json", typ: tar.TypeReg, pax: [][2]string{
		{"GNU.sparse.major", "0"}, {"GNU.sparse.minor", "1"}, {"GNU.sparse.numblocks", "1"},
		{"GNU.sparse.map", "99999999999,0"}, {"GNU.sparse.size", "100000000000"},
	}})
}

// hostileArchives returns archives with an entry that leads outside them, by
// the name the error must give.
func hostileArchives() map[string][]byte {
	good := imagearchivetest.OCI(imagearchivetest.Image{Refs: []string{"a:1"}, Platforms: []string{"linux/amd64"}})
	with := func(h *tar.Header, data string) []byte {
		return imagearchivetest.WithEntry(good, "index.json", h, data)
	}
	return map[string][]byte{
		"../escape":         with(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg}, "x"),
		"blobs/../../up":    with(&tar.Header{Name: "blobs/../../up", Typeflag: tar.TypeReg}, "x"),
		"/abs":              with(&tar.Header{Name: "/abs", Typeflag: tar.TypeReg}, "x"),
		`..\win`:            with(&tar.Header{Name: `..\win`, Typeflag: tar.TypeReg}, "x"),
		"C:/drive":          with(&tar.Header{Name: "C:/drive", Typeflag: tar.TypeReg}, "x"),
		"blobs/sha256/x":    with(&tar.Header{Name: "blobs/sha256/x", Linkname: "../../../etc/passwd", Typeflag: tar.TypeSymlink}, ""),
		"blobs/sha256/abs":  with(&tar.Header{Name: "blobs/sha256/abs", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink}, ""),
		"blobs/sha256/hard": with(&tar.Header{Name: "blobs/sha256/hard", Linkname: "../outside", Typeflag: tar.TypeLink}, ""),
		"hard-abs":          with(&tar.Header{Name: "hard-abs", Linkname: "/etc/shadow", Typeflag: tar.TypeLink}, ""),
		"escape-dir/":       with(&tar.Header{Name: "../escape-dir/", Typeflag: tar.TypeDir}, ""),
	}
}

func TestScanRefusesEntriesOutsideTheArchive(t *testing.T) {
	for name, archive := range hostileArchives() {
		t.Run(name, func(t *testing.T) {
			_, err := Scan(bytes.NewReader(archive))
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), "outside the archive") {
				t.Fatalf("Scan = %v, want a FormatError saying the entry leads outside the archive", err)
			}
			// Filter fails before anything of the entry goes on.
			var out bytes.Buffer
			if _, err := Filter(&out, bytes.NewReader(archive), func(string) bool { return false }); err == nil || err.Error() != fe.Error() {
				t.Fatalf("Filter = %v, want %v", err, fe)
			}
			if bytes.Contains(out.Bytes(), []byte("escape")) || bytes.Contains(out.Bytes(), []byte("passwd")) || bytes.Contains(out.Bytes(), []byte("outside")) {
				t.Error("Filter passed the hostile entry on")
			}
		})
	}
	// Links within the archive are what classic saves are made of.
	if _, err := Scan(bytes.NewReader(seedArchives(t)[5])); err != nil {
		t.Errorf("a classic save with links inside it: %v", err)
	}
}

// TestScanRefusesSparseFiles checks that Scan refuses a sparse entry.
func TestScanRefusesSparseFiles(t *testing.T) {
	// Why: a sparse entry's holes read as zeros, so a 2 KiB archive had Scan
	// hash 100 GB.
	for _, typ := range []byte{tar.TypeReg, tar.TypeGNUSparse} {
		archive := sparseArchive(typ)
		_, err := Scan(bytes.NewReader(archive))
		if err == nil || !strings.Contains(err.Error(), `"index.json" is a sparse file`) {
			t.Errorf("type %c: Scan = %v, want a sparse-file error", typ, err)
		}
		if _, err := Filter(io.Discard, bytes.NewReader(archive), func(string) bool { return false }); err == nil || !strings.Contains(err.Error(), "sparse") {
			t.Errorf("type %c: Filter = %v, want a sparse-file error", typ, err)
		}
	}
}

func TestScanRefusesTwoEntriesOfOneName(t *testing.T) {
	archive := seedArchives(t)[0]
	var b bytes.Buffer
	b.Write(archive[:len(archive)-1024]) // without the end of the archive
	tw := tar.NewWriter(&b)
	other := `{"schemaVersion":2,"manifests":[]}`
	_ = tw.WriteHeader(&tar.Header{Name: "./index.json", Mode: 0o644, Size: int64(len(other)), Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte(other))
	_ = tw.Close()
	if _, err := Scan(bytes.NewReader(b.Bytes())); err == nil || !strings.Contains(err.Error(), "two entries named index.json") {
		t.Errorf("Scan = %v, want a duplicate-entry error", err)
	}
}

// TestFilterPoisonsWhenTheDescriptionFails checks that when Filter finds
// the archive unreadable only as it describes it, what it wrote does not
// read as a whole archive.
func TestFilterPoisonsWhenTheDescriptionFails(t *testing.T) {
	// Why: Filter wrote the archive's end before it found the archive
	// unreadable, so the node took it whole.
	archive := imagearchivetest.TarOf(map[string]string{"index.json": `{"manifests":[{"mediaType":"` + mediaOCIIndex + `","digest":"sha256:` + strings.Repeat("a", 64) + `","size":2}]}`})
	var out bytes.Buffer
	if _, err := Filter(&out, bytes.NewReader(archive), func(string) bool { return false }); err == nil || !strings.Contains(err.Error(), "lacks the index") {
		t.Fatalf("Filter = %v", err)
	}
	if imagearchivetest.WholeTar(out.Bytes()) {
		t.Fatal("what a failed Filter wrote reads as a whole archive")
	}
}

// blobTar returns an OCI layout tar of index.json and blobs named by digest.
func blobTar(index string, blobs ...string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	add := func(name, c string) {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(c))
	}
	add("index.json", index)
	for _, c := range blobs {
		add(blobName(digestOf([]byte(c))), c)
	}
	_ = tw.Close()
	return b.Bytes()
}

// TestScanBoundsWhatIndexesList checks that Scan refuses an archive whose
// indexes list more than it bounds.
func TestScanBoundsWhatIndexesList(t *testing.T) {
	// Why: an index that lists another index hundreds of times, which lists
	// a manifest hundreds of times, made Scan build (and parse the config
	// of) every combination.
	cfg := `{"os":"linux","architecture":"amd64","rootfs":{"diff_ids":[]}}`
	mf := `{"schemaVersion":2,"config":{"mediaType":"` + mediaOCIConfig + `","digest":"` + digestOf([]byte(cfg)) + `","size":` + strconv.Itoa(len(cfg)) + `},"layers":[]}`
	entries := func(d, mediaType string, size, n int) string {
		one := `{"mediaType":"` + mediaType + `","digest":"` + d + `","size":` + strconv.Itoa(size) + `}`
		return `{"schemaVersion":2,"manifests":[` + strings.TrimSuffix(strings.Repeat(one+",", n), ",") + `]}`
	}
	inner := entries(digestOf([]byte(mf)), mediaOCIManifest, len(mf), 300)
	outer := entries(digestOf([]byte(inner)), mediaOCIIndex, len(inner), 300)
	top := `{"schemaVersion":2,"manifests":[{"mediaType":"` + mediaOCIIndex + `","digest":"` + digestOf([]byte(outer)) + `","size":` + strconv.Itoa(len(outer)) + `,"annotations":{"io.containerd.image.name":"a:1"}}]}`
	start := time.Now()
	_, err := Scan(bytes.NewReader(blobTar(top, cfg, mf, inner, outer)))
	if err == nil || !strings.Contains(err.Error(), "list more than") {
		t.Errorf("Scan = %v, want the listing refused", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Scan took %s", d)
	}
}

// TestScanChecksDescriptors checks that a digest that is not one, or a layer
// whose size the manifest misstates, is an error rather than a name to look
// up or a size to report.
func TestScanChecksDescriptors(t *testing.T) {
	layer := "layer content"
	cfg := `{"os":"linux","architecture":"amd64","rootfs":{"diff_ids":["` + digestOf([]byte(layer)) + `"]}}`
	manifest := func(layerSize int) string {
		return `{"schemaVersion":2,"config":{"mediaType":"` + mediaOCIConfig + `","digest":"` + digestOf([]byte(cfg)) + `","size":` + strconv.Itoa(len(cfg)) +
			`},"layers":[{"mediaType":"` + mediaLayerTar + `","digest":"` + digestOf([]byte(layer)) + `","size":` + strconv.Itoa(layerSize) + `}]}`
	}
	index := func(d string, size int) string {
		return `{"schemaVersion":2,"manifests":[{"mediaType":"` + mediaOCIManifest + `","digest":"` + d + `","size":` + strconv.Itoa(size) + `,"annotations":{"io.containerd.image.name":"a:1"}}]}`
	}
	good := manifest(len(layer))
	if _, err := Scan(bytes.NewReader(blobTar(index(digestOf([]byte(good)), len(good)), layer, cfg, good))); err != nil {
		t.Fatalf("the well-formed archive: %v", err)
	}
	for want, archive := range map[string][]byte{
		`"sha256:../../etc/passwd" is not a digest`: blobTar(index("sha256:../../etc/passwd", 1)),
		"negative size": blobTar(index(digestOf([]byte(good)), -1)),
		"gives " + digestOf([]byte(layer)) + " as 999999 bytes, the archive holds 13": blobTar(index(digestOf([]byte(manifest(999999))), len(manifest(999999))), layer, cfg, manifest(999999)),
	} {
		if _, err := Scan(bytes.NewReader(archive)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Scan = %v, want %q", err, want)
		}
	}
}

func TestWindowsBuildIsNeverNegative(t *testing.T) {
	p := mustPlatform(t, "windows/amd64:10.0.-5")
	if ok, _ := Runs(p, p); ok {
		t.Error("a Windows image of build -5 runs on a node of build -5")
	}
}

func mustPlatform(t *testing.T, s string) Platform {
	t.Helper()
	p, err := ParsePlatform(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
