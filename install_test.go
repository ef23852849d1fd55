package hwk

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeRelease is a release as the install scripts find it: archives and
// checksums.txt under /download/TAG/, and /latest redirecting to the tag.
type fakeRelease struct {
	files    map[string][]byte // by path under the server
	requests []string
}

func (f *fakeRelease) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests = append(f.requests, r.URL.Path)
	if r.URL.Path == "/latest" {
		http.Redirect(w, r, "/tag/v1.2.3", http.StatusFound)
		return
	}
	if r.URL.Path == "/tag/v1.2.3" {
		fmt.Fprintln(w, "the release page")
		return
	}
	data, ok := f.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(data)
}

func tarGz(t *testing.T, files map[string]string) []byte {
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return b.Bytes()
}

// release makes v1.2.3 for this host; tamper changes the archive after
// its checksum was taken.
func release(t *testing.T, tamper bool) (*fakeRelease, string) {
	archive := fmt.Sprintf("hwk_1.2.3_%s_%s.tar.gz", runtime.GOOS, runtime.GOARCH)
	data := tarGz(t, map[string]string{
		"hwk":                           "#!/bin/sh\necho fake hwk v1.2.3\n",
		"README.md":                     "readme\n",
		"windows-amd64/hwk-kubelet.exe": "MZ kubelet",
		"windows-amd64/hwk-seed.exe":    "MZ seed",
	})
	sum := sha256.Sum256(data)
	sums := fmt.Sprintf("%x  %s\n%x  hwk_1.2.3_windows_amd64.zip\n", sum, archive, sha256.Sum256([]byte("zip")))
	if tamper {
		data = append([]byte(nil), data...)
		data[len(data)/2] ^= 0xff
	}
	return &fakeRelease{files: map[string][]byte{
		"/download/v1.2.3/" + archive:    data,
		"/download/v1.2.3/checksums.txt": []byte(sums),
	}}, archive
}

func runInstall(t *testing.T, url, dir string, args ...string) (string, error) {
	cmd := exec.Command("sh", append([]string{"install.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "HWK_RELEASE_URL="+url, "HWK_INSTALL_DIR="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("sh install.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	return string(out), err
}

// TestInstallSh: install.sh installs a release whose archive matches
// checksums.txt (a given version, and the latest through the release
// page's redirect), and refuses, installing nothing, an archive that does
// not match or that checksums.txt does not list.
func TestInstallSh(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("install.sh is for Linux and macOS")
	}
	good, _ := release(t, false)
	srv := httptest.NewServer(good)
	defer srv.Close()
	for _, args := range [][]string{{"v1.2.3"}, nil} {
		dir := filepath.Join(t.TempDir(), "bin")
		out, err := runInstall(t, srv.URL, dir, args...)
		if err != nil || !strings.Contains(out, "Installed hwk v1.2.3 in "+dir+" (checksum verified)") {
			t.Fatalf("install %v: %v\n%s", args, err, out)
		}
		got, err := exec.Command(filepath.Join(dir, "hwk")).Output()
		if err != nil || string(got) != "fake hwk v1.2.3\n" {
			t.Errorf("the installed hwk says %q (%v)", got, err)
		}
		for _, f := range []string{"hwk-kubelet.exe", "hwk-seed.exe"} {
			if _, err := os.Stat(filepath.Join(dir, "windows-amd64", f)); err != nil {
				t.Errorf("windows-amd64/%s not installed: %v", f, err)
			}
		}
	}

	bad, archive := release(t, true)
	srvBad := httptest.NewServer(bad)
	defer srvBad.Close()
	dir := filepath.Join(t.TempDir(), "bin")
	out, err := runInstall(t, srvBad.URL, dir, "v1.2.3")
	if err == nil || !strings.Contains(out, archive+" has SHA-256") || !strings.Contains(out, "tampered with; nothing was installed") {
		t.Errorf("a tampered archive: %v\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused install made %s (%v)", dir, err)
	}

	unlisted, _ := release(t, false)
	unlisted.files["/download/v1.2.3/checksums.txt"] = []byte("0000  other.tar.gz\n")
	srvUnlisted := httptest.NewServer(unlisted)
	defer srvUnlisted.Close()
	if out, err := runInstall(t, srvUnlisted.URL, dir, "v1.2.3"); err == nil || !strings.Contains(out, "does not list "+archive) {
		t.Errorf("an archive checksums.txt does not list: %v\n%s", err, out)
	}
	if out, err := runInstall(t, srv.URL, dir, "1.2.3"); err == nil || !strings.Contains(out, "is not a release tag") {
		t.Errorf("a version without its v: %v\n%s", err, out)
	}
}

// TestInstallersEmbedded: the embedded scripts are the files at the root.
func TestInstallersEmbedded(t *testing.T) {
	for _, f := range []string{"install.sh", "install.ps1"} {
		emb, err := Installers.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		disk, err := os.ReadFile(f)
		if err != nil || !bytes.Equal(emb, disk) {
			t.Errorf("%s: embedded and on disk differ (%v)", f, err)
		}
	}
}
