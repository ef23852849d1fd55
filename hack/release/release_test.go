// Package release checks what goreleaser (.goreleaser.yaml) put in dist/,
// by `make release-snapshot` or, on a tag, `make release-build`: every
// archive, with binaries for the right OS and machine and the Windows node
// programs beside hwk; the checksums; an SBOM per archive; the Scoop and
// winget manifests pointing at the archives by their checksums; the list
// of files the release uploads (assets.sh). It needs dist/: without it the
// test skips, or fails when HWK_REQUIRE_RELEASE=1 (make release-snapshot,
// make release-check).
//
// With HWK_RELEASE_TAG (make release-check) dist/ must be that tag's
// release, not a snapshot: every name carries the tag's version, hwk says
// the tag, and the manifests point at the tag's download URLs.
package release

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type target struct{ os, arch string }

// allTargets are the platforms a release has an archive for.
var allTargets = []target{
	{"windows", "amd64"}, {"windows", "arm64"},
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
}

// targets are the platforms this snapshot was built for: all of them, or
// those HWK_RELEASE_TARGETS names (os/arch, space-separated), as CI
// builds one archive per OS.
func targets(t *testing.T) []target {
	names := strings.Fields(os.Getenv("HWK_RELEASE_TARGETS"))
	if len(names) == 0 {
		return allTargets
	}
	var out []target
	for _, n := range names {
		goos, arch, _ := strings.Cut(n, "/")
		tg := target{goos, arch}
		if !slices.Contains(allTargets, tg) {
			t.Fatalf("HWK_RELEASE_TARGETS: %q is not a release target", n)
		}
		out = append(out, tg)
	}
	return out
}

func dist(t *testing.T) string {
	dir := os.Getenv("HWK_RELEASE_DIST")
	if dir == "" {
		dir = "../../dist"
	}
	if _, err := os.Stat(filepath.Join(dir, "checksums.txt")); err != nil {
		if os.Getenv("HWK_REQUIRE_RELEASE") == "1" {
			t.Fatalf("no release in %s (%v): run make release-snapshot", dir, err)
		}
		t.Skipf("no release in %s: make release-snapshot makes one", dir)
	}
	return dir
}

// tag is the release tag dist/ must have been built from (HWK_RELEASE_TAG),
// or "" for a snapshot.
func tag() string { return os.Getenv("HWK_RELEASE_TAG") }

// version reads the version goreleaser built dist/ as (metadata.json:
// "0.1.0" for tag v0.1.0, "0.1.1-snapshot-abc1234" for a snapshot) and,
// for a tag, checks it is that tag's.
func version(t *testing.T, dir string) string {
	raw, err := os.ReadFile(filepath.Join(dir, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct{ Tag, Version string }
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatalf("metadata.json: %v", err)
	}
	if meta.Version == "" {
		t.Fatalf("metadata.json has no version: %s", raw)
	}
	if want := tag(); want != "" {
		if meta.Tag != want || "v"+meta.Version != want || strings.Contains(meta.Version, "snapshot") {
			t.Fatalf("dist/ is tag %q version %q; want the release of %s (make release-build on that tag, not a snapshot)", meta.Tag, meta.Version, want)
		}
	}
	return meta.Version
}

// checksums reads checksums.txt: file name to SHA-256.
func checksums(t *testing.T, dir string) map[string]string {
	f, err := os.Open(filepath.Join(dir, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("checksums.txt line %q is not `SHA256  NAME`", sc.Text())
		}
		out[name] = sum
	}
	return out
}

func sha(t *testing.T, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// members reads an archive's files.
func members(t *testing.T, path string) map[string][]byte {
	out := map[string][]byte{}
	if strings.HasSuffix(path, ".zip") {
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			out[f.Name] = data
		}
		return out
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[hdr.Name] = data
	}
}

// machine says which OS and machine an executable is for, from its own
// headers.
func machine(t *testing.T, name string, data []byte) (string, string) {
	r := bytes.NewReader(data)
	if f, err := pe.NewFile(r); err == nil {
		switch f.Machine {
		case pe.IMAGE_FILE_MACHINE_AMD64:
			return "windows", "amd64"
		case pe.IMAGE_FILE_MACHINE_ARM64:
			return "windows", "arm64"
		}
		return "windows", "machine " + hex.EncodeToString([]byte{byte(f.Machine >> 8), byte(f.Machine)})
	}
	if f, err := elf.NewFile(r); err == nil {
		switch f.Machine {
		case elf.EM_X86_64:
			return "linux", "amd64"
		case elf.EM_AARCH64:
			return "linux", "arm64"
		}
		return "linux", f.Machine.String()
	}
	if f, err := macho.NewFile(r); err == nil {
		switch f.Cpu {
		case macho.CpuAmd64:
			return "darwin", "amd64"
		case macho.CpuArm64:
			return "darwin", "arm64"
		}
		return "darwin", f.Cpu.String()
	}
	t.Errorf("%s is neither PE, ELF nor Mach-O", name)
	return "", ""
}

// TestArchives: one archive per target, zip on Windows, each with hwk
// built for that target, the README, and the Windows node programs (PE,
// amd64) in windows-amd64/; each listed in checksums.txt with the digest
// it has.
func TestArchives(t *testing.T) {
	dir := dist(t)
	sums := checksums(t, dir)
	ver := version(t, dir)
	for _, tg := range targets(t) {
		ext := ".tar.gz"
		exe := "hwk"
		if tg.os == "windows" {
			ext, exe = ".zip", "hwk.exe"
		}
		matches, _ := filepath.Glob(filepath.Join(dir, "hwk_*_"+tg.os+"_"+tg.arch+ext))
		want := "hwk_" + ver + "_" + tg.os + "_" + tg.arch + ext
		if len(matches) != 1 || filepath.Base(matches[0]) != want {
			t.Errorf("%s/%s: archives %v, want one %s", tg.os, tg.arch, matches, want)
			continue
		}
		archive := matches[0]
		name := filepath.Base(archive)
		if got := sums[name]; got == "" || got != sha(t, archive) {
			t.Errorf("%s: checksums.txt says %q, the file's SHA-256 is %s", name, got, sha(t, archive))
		}
		files := members(t, archive)
		if os, arch := machine(t, name+"/"+exe, files[exe]); os != tg.os || arch != tg.arch {
			t.Errorf("%s: %s is for %s/%s", name, exe, os, arch)
		}
		for _, prog := range []string{"windows-amd64/hwk-kubelet.exe", "windows-amd64/hwk-seed.exe"} {
			if os, arch := machine(t, name+"/"+prog, files[prog]); os != "windows" || arch != "amd64" {
				t.Errorf("%s: %s is for %s/%s, want windows/amd64 (the node's)", name, prog, os, arch)
			}
		}
		if len(files["README.md"]) == 0 {
			t.Errorf("%s has no README.md", name)
		}
		if tg.os == runtime.GOOS && tg.arch == runtime.GOARCH {
			checkVersion(t, files[exe], "v"+ver)
		}
	}
	// Every file checksums.txt lists is there with that digest.
	for name, sum := range sums {
		if got := sha(t, filepath.Join(dir, name)); got != sum {
			t.Errorf("%s: checksums.txt says %s, the file's SHA-256 is %s", name, sum, got)
		}
	}
}

// checkVersion runs this host's hwk from its archive: it says the
// release's version, as `make build` stamps it ("v" and the full commit).
func checkVersion(t *testing.T, exe []byte, want string) {
	path := filepath.Join(t.TempDir(), "hwk")
	if err := os.WriteFile(path, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("hwk version: %v", err)
	}
	var v struct{ Version, Commit string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("hwk version -o json: %v\n%s", err, out)
	}
	if v.Version != want || len(v.Commit) != 40 {
		t.Errorf("hwk version says %+v; want version %s and the full commit", v, want)
	}
}

// TestSBOMs: a CycloneDX document per archive, naming hwk's own module and
// its dependencies for that archive's platform.
func TestSBOMs(t *testing.T) {
	dir := dist(t)
	archives, _ := filepath.Glob(filepath.Join(dir, "hwk_*"))
	n := 0
	for _, a := range archives {
		if !strings.HasSuffix(a, ".zip") && !strings.HasSuffix(a, ".tar.gz") {
			continue
		}
		n++
		raw, err := os.ReadFile(a + ".cdx.json")
		if err != nil {
			t.Errorf("no SBOM for %s: %v", filepath.Base(a), err)
			continue
		}
		var bom struct {
			BOMFormat string `json:"bomFormat"`
			Metadata  struct {
				Component struct{ Name string } `json:"component"`
			} `json:"metadata"`
			Components []struct{ Name string } `json:"components"`
		}
		if err := json.Unmarshal(raw, &bom); err != nil {
			t.Errorf("%s.cdx.json: %v", filepath.Base(a), err)
			continue
		}
		names := map[string]bool{}
		for _, c := range bom.Components {
			names[c.Name] = true
		}
		if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != "github.com/hwk-dev/hwk" || !names["github.com/spf13/cobra"] || !names["k8s.io/client-go"] {
			t.Errorf("%s.cdx.json: format %q, component %q, %d components (cobra %v, client-go %v)", filepath.Base(a),
				bom.BOMFormat, bom.Metadata.Component.Name, len(bom.Components), names["github.com/spf13/cobra"], names["k8s.io/client-go"])
		}
	}
	if want := len(targets(t)); n != want {
		t.Errorf("%d archives, want %d", n, want)
	}
}

// TestManifests: the Scoop and winget manifests install the Windows
// archives of this release, by the digests in checksums.txt; for a tag,
// as that version, from that tag's downloads.
func TestManifests(t *testing.T) {
	dir := dist(t)
	sums := checksums(t, dir)
	ver := version(t, dir)
	// Where the release's files are downloaded from, once published.
	download := "https://github.com/hwk-dev/hwk/releases/download/v" + ver + "/"
	raw, err := os.ReadFile(filepath.Join(dir, "scoop", "hwk.json"))
	if err != nil {
		t.Fatal(err)
	}
	var scoop struct {
		Version      string
		Architecture map[string]struct {
			URL  string
			Bin  []string
			Hash string
		}
	}
	if err := json.Unmarshal(raw, &scoop); err != nil {
		t.Fatal(err)
	}
	// Scoop names amd64 "64bit"; winget has an installer per Windows zip.
	scoopArch := map[string]string{}
	for _, tg := range targets(t) {
		if tg.os == "windows" {
			scoopArch[strings.Replace(tg.arch, "amd64", "64bit", 1)] = "windows_" + tg.arch + ".zip"
		}
	}
	if len(scoop.Architecture) != len(scoopArch) {
		t.Errorf("scoop architectures %v, want %v", slices.Sorted(maps.Keys(scoop.Architecture)), slices.Sorted(maps.Keys(scoopArch)))
	}
	for arch, want := range scoopArch {
		a := scoop.Architecture[arch]
		name := a.URL[strings.LastIndex(a.URL, "/")+1:]
		if !strings.HasSuffix(name, want) || a.Hash != sums[name] || len(a.Bin) != 1 || a.Bin[0] != "hwk.exe" {
			t.Errorf("scoop %s: %+v; want %s with its checksum %s", arch, a, want, sums[name])
		}
		if tag() != "" && a.URL != download+name {
			t.Errorf("scoop %s: URL %s, want %s", arch, a.URL, download+name)
		}
	}
	if scoop.Version != ver {
		t.Errorf("scoop manifest version %q, want %q", scoop.Version, ver)
	}
	installers, _ := filepath.Glob(filepath.Join(dir, "winget", "manifests", "*", "*", "*", "*", "*.installer.yaml"))
	if len(installers) != 1 {
		t.Fatalf("winget installer manifests: %v", installers)
	}
	raw, err = os.ReadFile(installers[0])
	if err != nil {
		t.Fatal(err)
	}
	var winget struct {
		PackageIdentifier string `yaml:"PackageIdentifier"`
		PackageVersion    string `yaml:"PackageVersion"`
		InstallerType     string `yaml:"InstallerType"`
		Installers        []struct {
			Architecture    string `yaml:"Architecture"`
			InstallerURL    string `yaml:"InstallerUrl"`
			InstallerSha256 string `yaml:"InstallerSha256"`
		} `yaml:"Installers"`
	}
	if err := yaml.Unmarshal(raw, &winget); err != nil {
		t.Fatal(err)
	}
	if winget.PackageIdentifier != "hwk-dev.hwk" || winget.PackageVersion != ver || winget.InstallerType != "zip" || len(winget.Installers) != len(scoopArch) {
		t.Errorf("winget: %+v", winget)
	}
	for _, in := range winget.Installers {
		name := in.InstallerURL[strings.LastIndex(in.InstallerURL, "/")+1:]
		if sums[name] == "" || in.InstallerSha256 != sums[name] {
			t.Errorf("winget %s: %s with %s; checksums.txt says %q", in.Architecture, name, in.InstallerSha256, sums[name])
		}
		if tag() != "" && in.InstallerURL != download+name {
			t.Errorf("winget %s: URL %s, want %s", in.Architecture, in.InstallerURL, download+name)
		}
	}
}

// TestUploads: the files the release workflow uploads (assets.sh) are
// every file a user or a package repository fetches, and nothing else: an
// archive and its SBOM per target, checksums.txt, the Scoop manifest and
// winget's three, each there and not empty, under names that differ (a
// GitHub release names its files by base name), with the changelog that
// becomes the release's notes beside them (for a tag).
func TestUploads(t *testing.T) {
	dir := dist(t)
	ver := version(t, dir)
	script, err := filepath.Abs("assets.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script)
	// assets.sh runs where goreleaser ran, dist/'s parent.
	cmd.Dir = filepath.Dir(dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("assets.sh: %v", err)
	}
	got := strings.Fields(string(out))
	winget := "winget/manifests/h/hwk-dev/hwk/" + ver + "/hwk-dev.hwk"
	want := []string{"checksums.txt", "scoop/hwk.json", winget + ".yaml", winget + ".installer.yaml", winget + ".locale.en-US.yaml"}
	for _, tg := range targets(t) {
		ext := ".tar.gz"
		if tg.os == "windows" {
			ext = ".zip"
		}
		archive := "hwk_" + ver + "_" + tg.os + "_" + tg.arch + ext
		want = append(want, archive, archive+".cdx.json")
	}
	for i, w := range want {
		want[i] = filepath.Join(filepath.Base(dir), w)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("assets.sh lists\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	names := map[string]string{}
	for _, f := range got {
		if st, err := os.Stat(filepath.Join(cmd.Dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: missing or empty (%v)", f, err)
		}
		if other, ok := names[filepath.Base(f)]; ok {
			t.Errorf("%s and %s have the same name in the release", other, f)
		}
		names[filepath.Base(f)] = f
	}
	// goreleaser writes the changelog for a tag only, not a snapshot.
	if tag() != "" {
		if st, err := os.Stat(filepath.Join(dir, "CHANGELOG.md")); err != nil || st.Size() == 0 {
			t.Errorf("CHANGELOG.md, the release notes: missing or empty (%v)", err)
		}
	}
}
