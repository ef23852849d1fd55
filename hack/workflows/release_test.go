package workflows

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReleaseWorkflow runs release.yml as the push of tag v0.1.0 would:
// goreleaser builds everything the tag publishes (six platforms), the
// check step reads it as that tag's release, and the upload step asks
// the gh stand-in for a draft release of every file. The test checks the
// upload: the archives, checksums.txt (whose sums must be those of the
// uploaded archives and SBOMs), an SBOM per archive and the Scoop and
// winget manifests, each uploaded once.
func TestReleaseWorkflow(t *testing.T) {
	actBinary(t)
	repo := newRepo(t)
	const tag = "v0.1.0"
	if err := git(repo.Dir, "tag", tag); err != nil {
		t.Fatal(err)
	}
	run := &Run{Repo: repo, Workflow: ".github/workflows/release.yml", Event: "push",
		EventJSON: map[string]any{"ref": "refs/tags/" + tag}}
	res := execute(t, run)
	mustPass(t, run, res, "release")
	if t.Failed() {
		t.FailNow()
	}

	var calls []map[string]any
	for _, rec := range records(t, filepath.Join(repo.Record, "gh.jsonl")) {
		if argv := stringsOf(rec["argv"]); len(argv) >= 2 && argv[0] == "release" && argv[1] == "create" {
			calls = append(calls, rec)
		}
	}
	if len(calls) != 1 {
		t.Fatalf("gh release create was asked %d times, want once", len(calls))
	}
	argv := stringsOf(calls[0]["argv"])
	t.Logf("gh stand-in: gh %s", strings.Join(argv[:min(len(argv), 10)], " "))
	for _, want := range []string{tag, "--draft", "--verify-tag"} {
		if !slices.Contains(argv, want) {
			t.Errorf("gh release create without %s: %q", want, argv)
		}
	}
	version := strings.TrimPrefix(tag, "v")
	want := []string{"checksums.txt", "hwk.json",
		"hwk-dev.hwk.yaml", "hwk-dev.hwk.installer.yaml", "hwk-dev.hwk.locale.en-US.yaml"}
	for _, p := range []string{"darwin_amd64", "darwin_arm64", "linux_amd64", "linux_arm64"} {
		want = append(want, "hwk_"+version+"_"+p+".tar.gz", "hwk_"+version+"_"+p+".tar.gz.cdx.json")
	}
	for _, p := range []string{"windows_amd64", "windows_arm64"} {
		want = append(want, "hwk_"+version+"_"+p+".zip", "hwk_"+version+"_"+p+".zip.cdx.json")
	}
	sums := map[string]string{}
	var got []string
	files, _ := calls[0]["files"].([]any)
	for _, f := range files {
		m, _ := f.(map[string]any)
		name, _ := m["name"].(string)
		sum, _ := m["sha256"].(string)
		size, _ := m["size"].(float64)
		got = append(got, name)
		sums[name] = sum
		t.Logf("  uploads %-45s %10.0f bytes  sha256 %s", name, size, sum)
		if size <= 0 {
			t.Errorf("%s is empty", name)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the upload is\n  %q\nwant\n  %q", got, want)
	}
	// checksums.txt, as uploaded, against what was uploaded beside it.
	f, err := os.Open(filepath.Join(repo.Record, "releases", tag, "checksums.txt"))
	if err != nil {
		t.Fatalf("the gh stand-in kept no checksums.txt: %v", err)
	}
	defer f.Close()
	listed := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Errorf("checksums.txt line %q", sc.Text())
			continue
		}
		listed++
		if sums[name] != sum {
			t.Errorf("checksums.txt says %s is %s; the upload's is %s", name, sum, sums[name])
		}
	}
	if listed != 12 {
		t.Errorf("checksums.txt lists %d files, want the 6 archives and their 6 SBOMs", listed)
	}
}
