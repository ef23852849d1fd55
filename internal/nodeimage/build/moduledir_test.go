package build

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestModuleDirFetchesMissingModule checks that when neither the wrapper
// module nor the module an image's files come from is on this machine,
// moduleDir writes the wrapper again and fetches the module, checked
// against the wrapper's go.sum.
func TestModuleDirFetchesMissingModule(t *testing.T) {
	// As in a build whose component binaries came from another cache (a
	// copy, as an ordinary user's first build may get them). The module is
	// served by a file:// GOPROXY made here, so the test needs no network.
	const mod, ver = "example.com/tiny", "v1.0.0"
	files := map[string]string{
		"go.mod":  "module " + mod + "\n\ngo 1.22\n",
		"tiny.go": "package tiny\n\nconst Answer = 42\n",
	}
	proxy := t.TempDir()
	at := filepath.Join(proxy, filepath.FromSlash(mod), "@v")
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		w, err := zw.Create(mod + "@" + ver + "/" + n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(files[n]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"list":        ver + "\n",
		ver + ".info": `{"Version":"` + ver + `","Time":"2026-01-02T03:04:05Z"}`,
		ver + ".mod":  files["go.mod"],
		ver + ".zip":  zipped.String(),
	} {
		if err := os.MkdirAll(at, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(at, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// go.sum's hashes, as golang.org/x/mod/sumdb/dirhash's Hash1 makes
	// them: the SHA-256 of the sorted "SHA256(file)  name" lines.
	hash1 := func(prefix string, names ...string) string {
		var summary strings.Builder
		for _, n := range names {
			fmt.Fprintf(&summary, "%x  %s\n", sha256.Sum256([]byte(files[n])), prefix+n)
		}
		sum := sha256.Sum256([]byte(summary.String()))
		return "h1:" + base64.StdEncoding.EncodeToString(sum[:])
	}
	sum := fmt.Sprintf("%s %s %s\n%s %s/go.mod %s\n", mod, ver, hash1(mod+"@"+ver+"/", names...), mod, ver, hash1("", "go.mod"))
	wrapper := "module hwk.test/tiny-wrapper\n\ngo 1.22\n\nrequire " + mod + " " + ver + "\n"

	modcache := t.TempDir()
	// A file URL's path is absolute with a slash first: file:///C:/x on
	// Windows (go help goproxy; cmd/go's urlFromFilePath).
	proxyURL := filepath.ToSlash(proxy)
	if !strings.HasPrefix(proxyURL, "/") {
		proxyURL = "/" + proxyURL
	}
	t.Setenv("GOPROXY", "file://"+proxyURL)
	t.Setenv("GOMODCACHE", modcache)
	t.Setenv("GONOSUMDB", "example.com")
	t.Setenv("GOFLAGS", "")
	b := &builder{
		opts: nodeimage.Options{CacheDir: t.TempDir()},
		recipe: &recipe{Components: []component{{Name: "tiny", Version: "1.0",
			Source: sourceBuild{Module: "tiny-{{.Version}}"}}}},
		recipeModules: []fs.FS{fstest.MapFS{
			"modules/tiny-1.0.mod": {Data: []byte(wrapper)},
			"modules/tiny-1.0.sum": {Data: []byte(sum)},
		}},
	}
	dir, err := b.moduleDir(context.Background(), "tiny", mod)
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := filepath.Rel(modcache, dir); err != nil || strings.HasPrefix(rel, "..") {
		t.Errorf("moduleDir = %s, not in GOMODCACHE %s", dir, modcache)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "tiny.go")); err != nil || string(got) != files["tiny.go"] {
		t.Errorf("the module's tiny.go: %q, %v", got, err)
	}

	// A module the wrapper's go.sum does not vouch for is refused.
	b.recipeModules = []fs.FS{fstest.MapFS{
		"modules/tiny-1.0.mod": {Data: []byte(wrapper)},
		"modules/tiny-1.0.sum": {Data: []byte(strings.Replace(sum, "h1:", "h1:A", 1))},
	}}
	t.Setenv("GOMODCACHE", t.TempDir())
	_, err = b.moduleDir(context.Background(), "tiny", mod)
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("a module whose hash is not the go.sum's: err = %v, want go's checksum mismatch", err)
	}
}
