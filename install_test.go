package hwk

import (
	"bytes"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/releasetest"
)

// release makes v1.2.3 for this host; tamper changes the archive after
// its checksum was taken.
func release(t *testing.T, tamper bool) (*releasetest.Release, string) {
	t.Helper()
	r, archive, err := releasetest.New("v1.2.3", runtime.GOOS, runtime.GOARCH, map[string][]byte{
		"hwk":                           []byte("#!/bin/sh\necho fake hwk v1.2.3\n"),
		"README.md":                     []byte("readme\n"),
		"windows-amd64/hwk-kubelet.exe": []byte("MZ kubelet"),
		"windows-amd64/hwk-seed.exe":    []byte("MZ seed"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if tamper {
		data := append([]byte(nil), r.Assets[archive]...)
		data[len(data)/2] ^= 0xff
		r.Assets[archive] = data
	}
	return r, archive
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
	unlisted.Assets["checksums.txt"] = []byte("0000  other.tar.gz\n")
	srvUnlisted := httptest.NewServer(unlisted)
	defer srvUnlisted.Close()
	if out, err := runInstall(t, srvUnlisted.URL, dir, "v1.2.3"); err == nil || !strings.Contains(out, "does not list "+archive) {
		t.Errorf("an archive checksums.txt does not list: %v\n%s", err, out)
	}
	if out, err := runInstall(t, srv.URL, dir, "1.2.3"); err == nil || !strings.Contains(out, "is not a release tag") {
		t.Errorf("a version without its v: %v\n%s", err, out)
	}

	// A repository with no release yet has no latest one.
	none := httptest.NewServer(&releasetest.Release{})
	defer none.Close()
	if out, err := runInstall(t, none.URL, dir); err == nil || !strings.Contains(out, none.URL+" has no latest release (none is published yet)") {
		t.Errorf("latest with no release: %v\n%s", err, out)
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
