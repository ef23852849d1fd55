// Package imagearchivetest crafts image archives for tests: OCI layouts
// with single- and multi-platform images, and classic docker saves, each
// with real layers whose digests hold.
package imagearchivetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Image is one image to put in an archive.
type Image struct {
	// Refs are its names (index.json annotations, or RepoTags).
	Refs []string
	// Platforms are os/arch[:osversion] strings; more than one makes a
	// multi-platform index (OCI layouts only).
	Platforms []string
	// Drop leaves the blobs of these platform indexes out, as Docker's
	// containerd store does for platforms it never pulled.
	Drop []int
	// LayerBytes sizes the one layer each platform gets; 0 means 1 KiB.
	LayerBytes int
	// Base are layers below each platform's own, by seed: the same seed
	// makes the same layer, so images that name it share it.
	Base []string
	// Gzip compresses the layers (OCI layouts only), as registries hold
	// them: a layer's digest is then not its diff ID.
	Gzip bool
	// Seed makes each platform's own layer (with the platform); empty
	// is the image's place in the archive.
	Seed string
}

// layers are a platform's layers, base first: their content (as stored)
// and diff IDs.
func (im Image) layers(own string) (stored [][]byte, diffIDs []string) {
	if im.Seed != "" {
		own = im.Seed + "-" + own[strings.Index(own, "-")+1:]
	}
	for _, seed := range append(slices.Clone(im.Base), own) {
		size := im.LayerBytes
		if seed != own {
			size = 0
		}
		l := layer(seed, size)
		diffIDs = append(diffIDs, digest(l))
		if im.Gzip {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			_, _ = zw.Write(l)
			_ = zw.Close()
			l = z.Bytes()
		}
		stored = append(stored, l)
	}
	return stored, diffIDs
}

type blob struct {
	digest string
	data   []byte
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func parse(p string) map[string]string {
	spec, ver, _ := strings.Cut(p, ":")
	parts := strings.Split(spec, "/")
	m := map[string]string{"os": parts[0], "architecture": parts[1]}
	if len(parts) > 2 {
		m["variant"] = parts[2]
	}
	if ver != "" {
		m["os.version"] = ver
	}
	return m
}

// layer is a small tar holding one file whose content depends on seed.
func layer(seed string, size int) []byte {
	if size == 0 {
		size = 1024
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	content := bytes.Repeat([]byte(seed), size/len(seed)+1)[:size]
	_ = tw.WriteHeader(&tar.Header{Name: "data/" + strings.NewReplacer("/", "_", ":", "_").Replace(seed), Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg})
	_, _ = tw.Write(content)
	_ = tw.Close()
	return b.Bytes()
}

func config(plat map[string]string, diffIDs ...string) []byte {
	c := map[string]any{"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs}, "config": map[string]any{}}
	for k, v := range plat {
		c[k] = v
	}
	b, _ := json.Marshal(c)
	return b
}

// OCI writes an OCI image layout tar holding images.
func OCI(images ...Image) []byte {
	var blobs []blob
	add := func(data []byte) (string, int64) {
		d := digest(data)
		blobs = append(blobs, blob{d, data})
		return d, int64(len(data))
	}
	var top []map[string]any
	for n, im := range images {
		var descs []map[string]any
		for i, p := range im.Platforms {
			plat := parse(p)
			stored, diffIDs := im.layers(fmt.Sprintf("%d-%s", n, p))
			mediaType := "application/vnd.oci.image.layer.v1.tar"
			if im.Gzip {
				mediaType += "+gzip"
			}
			var lds []map[string]any
			for _, l := range stored {
				lds = append(lds, map[string]any{"mediaType": mediaType, "digest": digest(l), "size": len(l)})
			}
			cfg := config(plat, diffIDs...)
			cd, cs := digest(cfg), int64(len(cfg))
			mf, _ := json.Marshal(map[string]any{
				"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
				"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
				"layers": lds,
			})
			dropped := false
			for _, d := range im.Drop {
				dropped = dropped || d == i
			}
			var md string
			var ms int64
			if dropped {
				md, ms = digest(mf), int64(len(mf))
			} else {
				for _, l := range stored {
					add(l)
				}
				add(cfg)
				md, ms = add(mf)
			}
			descs = append(descs, map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": ms, "platform": plat})
		}
		target := descs[0]
		if len(descs) > 1 {
			idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": descs})
			d, s := add(idx)
			target = map[string]any{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": d, "size": s}
		}
		for _, ref := range im.Refs {
			t := map[string]any{}
			for k, v := range target {
				t[k] = v
			}
			tag := ref[strings.LastIndex(ref, ":")+1:]
			t["annotations"] = map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag}
			top = append(top, t)
		}
	}
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": top})
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	file(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	file(tw, "index.json", idx)
	seen := map[string]bool{}
	for _, bl := range blobs {
		if seen[bl.digest] {
			continue
		}
		seen[bl.digest] = true
		file(tw, "blobs/sha256/"+strings.TrimPrefix(bl.digest, "sha256:"), bl.data)
	}
	_ = tw.Close()
	return b.Bytes()
}

// Docker writes a classic `docker save` archive (Docker before 25) of
// single-platform images.
func Docker(images ...Image) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	var manifest []map[string]any
	written := map[string]bool{}
	for n, im := range images {
		plat := parse(im.Platforms[0])
		stored, diffIDs := im.layers(fmt.Sprintf("%d-%s", n, im.Platforms[0]))
		cfg := config(plat, diffIDs...)
		cd := strings.TrimPrefix(digest(cfg), "sha256:")
		var paths []string
		for i, l := range stored {
			// Docker names a layer's directory by a v1 ID of its chain.
			dir := strings.TrimPrefix(digest([]byte(strings.Join(diffIDs[:i+1], " "))), "sha256:")
			if !written[dir] {
				written[dir] = true
				file(tw, dir+"/VERSION", []byte("1.0"))
				file(tw, dir+"/json", []byte("{}"))
				file(tw, dir+"/layer.tar", l)
			}
			paths = append(paths, dir+"/layer.tar")
		}
		file(tw, cd+".json", cfg)
		manifest = append(manifest, map[string]any{"Config": cd + ".json", "RepoTags": im.Refs, "Layers": paths})
	}
	mj, _ := json.Marshal(manifest)
	file(tw, "manifest.json", mj)
	_ = tw.Close()
	return b.Bytes()
}

func file(tw *tar.Writer, name string, data []byte) {
	_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(data)
}

// Corrupt flips the first byte of needle (some content of a blob) where it
// first occurs in the archive, so that the tar structure holds and the
// blob's digest does not.
func Corrupt(archive []byte, needle []byte) []byte {
	out := bytes.Clone(archive)
	if i := bytes.Index(out, needle); i >= 0 {
		out[i] ^= 0xff
	}
	return out
}

// WholeTar reports whether b reads as a tar archive to its end: what a
// stream that failed half-way must never do, or its reader (ctr import on
// a node) would take the part as the whole.
func WholeTar(b []byte) bool {
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		_, err := tr.Next()
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// WithEntry is archive with the entry h (of content data, for a file)
// written after the entry named after, or after the first entry when
// after is "": a hostile entry in an otherwise good archive.
func WithEntry(archive []byte, after string, h *tar.Header, data string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tr := tar.NewReader(bytes.NewReader(archive))
	for i := 0; ; i++ {
		gh, err := tr.Next()
		if err != nil {
			break
		}
		content, _ := io.ReadAll(tr)
		_ = tw.WriteHeader(gh)
		_, _ = tw.Write(content)
		if (after == "" && i == 0) || gh.Name == after {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeReg {
				h.Size = int64(len(data))
			}
			_ = tw.WriteHeader(h)
			if h.Typeflag == tar.TypeReg {
				_, _ = tw.Write([]byte(data))
			}
		}
	}
	_ = tw.Close()
	return b.Bytes()
}

// TarOf is a tar archive of files (name to content), in no set order.
func TarOf(files map[string]string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for n, c := range files {
		file(tw, n, []byte(c))
	}
	_ = tw.Close()
	return b.Bytes()
}
