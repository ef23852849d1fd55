// Package releasetest serves an hwk release the way GitHub serves release
// assets, for the tests of what installs one (install.sh, the GitHub
// Action): the archive goreleaser makes for a platform and checksums.txt
// under /download/TAG/, and /latest redirecting to the tag's page.
package releasetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Release is one tag's assets, by file name.
type Release struct {
	Tag    string
	Assets map[string][]byte
}

// New makes release tag with the tar.gz archive for goos/goarch holding
// files (name to content, each mode 0755) and checksums.txt listing it and
// the Windows zip, which stands in for the release's other archives. It
// returns the archive's name.
func New(tag, goos, goarch string, files map[string][]byte) (*Release, string, error) {
	data, err := TarGz(files)
	if err != nil {
		return nil, "", err
	}
	version := strings.TrimPrefix(tag, "v")
	archive := fmt.Sprintf("hwk_%s_%s_%s.tar.gz", version, goos, goarch)
	zip := fmt.Sprintf("hwk_%s_windows_amd64.zip", version)
	r := &Release{Tag: tag, Assets: map[string][]byte{archive: data, zip: []byte("PK stand-in")}}
	r.Assets["checksums.txt"] = fmt.Appendf(nil, "%x  %s\n%x  %s\n", sha256.Sum256(data), archive, sha256.Sum256(r.Assets[zip]), zip)
	return r, archive, nil
}

// OfBuild is release tag of the hwk `make build` made (bin), for
// linux/amd64, packed as goreleaser packs it: hwk, README.md (from
// readme) and the Windows node programs make build puts in
// windows-amd64/ beside bin.
func OfBuild(tag, bin, readme string) (*Release, error) {
	files := map[string][]byte{}
	for name, from := range map[string]string{
		"hwk": bin, "README.md": readme,
		"windows-amd64/hwk-kubelet.exe": filepath.Join(filepath.Dir(bin), "windows-amd64", "hwk-kubelet.exe"),
		"windows-amd64/hwk-seed.exe":    filepath.Join(filepath.Dir(bin), "windows-amd64", "hwk-seed.exe"),
	} {
		data, err := os.ReadFile(from)
		if err != nil {
			return nil, fmt.Errorf("release file %s: %w (make build makes them)", name, err)
		}
		files[name] = data
	}
	r, _, err := New(tag, "linux", "amd64", files)
	return r, err
}

// ServeHTTP serves /download/TAG/NAME, and /latest as a redirect to
// /tag/TAG, a page. A Release with no Tag is a repository with no release
// yet: /latest is not found, as GitHub answers then.
func (r *Release) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch p := req.URL.Path; {
	case p == "/latest" && r.Tag == "":
		http.NotFound(w, req)
	case p == "/latest":
		http.Redirect(w, req, "/tag/"+r.Tag, http.StatusFound)
	case p == "/tag/"+r.Tag:
		fmt.Fprintln(w, "the release page")
	case strings.HasPrefix(p, "/download/"+r.Tag+"/"):
		data, ok := r.Assets[strings.TrimPrefix(p, "/download/"+r.Tag+"/")]
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Write(data)
	default:
		http.NotFound(w, req)
	}
}

// TarGz is a gzipped tar of files, in name order, each a regular file of
// mode 0755.
func TarGz(files map[string][]byte) ([]byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
