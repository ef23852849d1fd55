// Package site checks the documentation site: it builds with Debian's
// Hugo without a warning, and every internal link of every page (href and
// src) leads to a page or file the build made, and to an anchor that page
// has. It needs hugo: without it the test skips, or fails when
// HWK_REQUIRE_HUGO=1 (.ci/run).
package site

import (
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	linkRe = regexp.MustCompile(`(?:href|src)="([^"]*)"`)
	idRe   = regexp.MustCompile(`\sid="([^"]*)"`)
)

func TestSite(t *testing.T) {
	hugo, err := exec.LookPath("hugo")
	if err != nil {
		if os.Getenv("HWK_REQUIRE_HUGO") == "1" {
			t.Fatal("hugo is not installed (Debian: apt-get install hugo)")
		}
		t.Skip("hugo is not installed; make site needs it")
	}
	out := t.TempDir()
	build := exec.Command(hugo, "--source", "../../site", "--destination", out)
	log, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("hugo: %v\n%s", err, log)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "WARN") || strings.Contains(line, "ERROR") {
			t.Errorf("hugo: %s", line)
		}
	}

	pages := map[string]string{} // URL path to HTML
	err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		u := "/" + filepath.ToSlash(rel)
		if strings.HasSuffix(u, ".html") {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			pages[u] = string(data)
		} else {
			pages[u] = ""
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("the site has only %d files", len(pages))
	}
	resolve := func(p string) (string, bool) {
		for _, c := range []string{p, path.Join(p, "index.html")} {
			if _, ok := pages[c]; ok {
				return c, true
			}
		}
		return "", false
	}
	links := 0
	for from, html := range pages {
		for _, m := range linkRe.FindAllStringSubmatch(html, -1) {
			u, err := url.Parse(m[1])
			if err != nil {
				t.Errorf("%s: bad link %q", from, m[1])
				continue
			}
			if u.Scheme != "" || u.Host != "" || strings.HasPrefix(m[1], "mailto:") {
				continue
			}
			target := from
			if u.Path != "" {
				target = u.Path
				if !strings.HasPrefix(target, "/") {
					target = path.Join(path.Dir(from), target)
				}
			}
			links++
			page, ok := resolve(target)
			if !ok {
				t.Errorf("%s links to %s, which the site does not have", from, m[1])
				continue
			}
			if u.Fragment != "" && !hasID(pages[page], u.Fragment) {
				t.Errorf("%s links to %s, but %s has no id %q", from, m[1], page, u.Fragment)
			}
		}
	}
	t.Logf("%d files, %d internal links checked", len(pages), links)
}

func hasID(html, id string) bool {
	for _, m := range idRe.FindAllStringSubmatch(html, -1) {
		if m[1] == id {
			return true
		}
	}
	return false
}
