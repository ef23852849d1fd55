package site

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoDocs are the Markdown files at the repository's root whose links
// GitHub renders; a file that is not there yet is skipped.
var repoDocs = []string{"README.md", "CONTRIBUTING.md", "ARCHITECTURE.md"}

var (
	// mdLinkRe is an inline link or image, [text](dest) or [text](<dest> "title").
	mdLinkRe = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	// mdRefDefRe is a link reference definition, [label]: dest.
	mdRefDefRe   = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	codeSpanRe   = regexp.MustCompile("`+[^`]*`+")
	atxRe        = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextRe     = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	fenceRe      = regexp.MustCompile("^ {0,3}(```+|~~~+)")
	schemeRe     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	inlineLinkRe = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// TestRepoDocLinks checks every relative link of the repository's root
// Markdown files: it leads to a file or directory of the tree, and an
// #anchor into a Markdown file names one of its headings (GitHub's
// anchors). It needs no Hugo.
func TestRepoDocLinks(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range repoDocs {
		path := filepath.Join(root, name)
		if _, err := os.Stat(path); os.IsNotExist(err) && name != "README.md" {
			t.Logf("%s: not there, skipped", name)
			continue
		}
		problems, n, err := checkLinks(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s", p)
		}
		if n == 0 {
			t.Errorf("%s: no relative links found; the check reads nothing", name)
		}
		checked += n
	}
	t.Logf("%d relative links checked", checked)
}

// TestRepoDocLinksCatch: a missing file, a missing anchor and a link
// hidden in code are told apart from links that resolve.
func TestRepoDocLinksCatch(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/page.md", "---\ntitle: x\n---\n\n## After a failed `hwk up`\n\nSetext, too\n---\n\n```sh\n# not a heading\n```\n\n## Pull, push, save, load\n## Pull, push, save, load\n")
	write("README.md", strings.Join([]string{
		"[ok](docs/page.md) [dir](docs/) [self](#top-heading)",
		"# Top heading",
		"[anchor](docs/page.md#after-a-failed-hwk-up) [setext](docs/page.md#setext-too)",
		"[dup](docs/page.md#pull-push-save-load-1) [web](https://example.com/x) [mail](mailto:a@b) [over",
		"lines](docs/page.md)",
		"`[in code](nowhere.md)`",
		"```",
		"[in a fence](nowhere.md)",
		"```",
		"[gone](missing.md) [bad anchor](docs/page.md#not-there) [fenced](docs/page.md#not-a-heading)",
		"[self bad](#nope) [out](../x.md)",
		"[ref]: docs/gone.md",
	}, "\n"))
	problems, n, err := checkLinks(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"missing.md", "#not-there", "#not-a-heading", "#nope", "outside", "docs/gone.md"}
	if len(problems) != len(want) {
		t.Fatalf("problems:\n%s\nwant one for each of %q", strings.Join(problems, "\n"), want)
	}
	for i, w := range want {
		if !strings.Contains(problems[i], w) {
			t.Errorf("problem %d is %q, want one about %s", i, problems[i], w)
		}
	}
	if n != 13 {
		t.Errorf("%d relative links checked, want 13", n)
	}
}

// checkLinks returns a line per relative link of the Markdown file at
// path that leads nowhere, and how many relative links it checked.
func checkLinks(path string) (problems []string, checked int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	// Links by line; a link's text may go on over lines.
	lines := proseLines(string(data), false)
	prose := strings.Join(lines, "\n")
	dests := make([][]string, len(lines))
	for _, m := range mdLinkRe.FindAllStringSubmatchIndex(prose, -1) {
		n := strings.Count(prose[:m[0]], "\n")
		dests[n] = append(dests[n], prose[m[2]:m[3]])
	}
	for i, line := range lines {
		if m := mdRefDefRe.FindStringSubmatch(line); m != nil {
			dests[i] = append(dests[i], m[1])
		}
	}
	anchors := map[string]map[string]bool{}
	for i := range lines {
		for _, dest := range dests[i] {
			dest = strings.TrimSuffix(strings.TrimPrefix(dest, "<"), ">")
			if schemeRe.MatchString(dest) || strings.HasPrefix(dest, "//") {
				continue
			}
			checked++
			where := fmt.Sprintf("%s:%d: link %q", filepath.Base(path), i+1, dest)
			target, frag, _ := strings.Cut(dest, "#")
			target, uerr := url.PathUnescape(target)
			if uerr != nil {
				problems = append(problems, where+": bad path")
				continue
			}
			file := path
			if target != "" {
				file = filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
				if rel, _ := filepath.Rel(filepath.Dir(path), file); rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					problems = append(problems, where+": outside the repository")
					continue
				}
				if _, err := os.Stat(file); err != nil {
					problems = append(problems, where+": no such file or directory")
					continue
				}
			}
			if frag == "" || !strings.EqualFold(filepath.Ext(file), ".md") {
				continue
			}
			if anchors[file] == nil {
				text, err := os.ReadFile(file)
				if err != nil {
					return nil, 0, err
				}
				anchors[file] = headingAnchors(string(text))
			}
			if !anchors[file][frag] {
				problems = append(problems, fmt.Sprintf("%s: no heading of %s makes the anchor #%s", where, filepath.Base(file), frag))
			}
		}
	}
	return problems, checked, nil
}

// proseLines is text's lines with front matter and fenced code blanked,
// and code spans blanked too or, with keepCode, kept without their
// backticks (a heading's `hwk up` is "hwk up" in its anchor); the line
// numbers stay.
func proseLines(text string, keepCode bool) []string {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	out := make([]string, len(lines))
	fence := ""
	for i, line := range lines {
		switch {
		case i == 0 && strings.TrimSpace(line) == "---":
			// Front matter, up to the next --- line.
			j := i + 1
			for j < len(lines) && strings.TrimSpace(lines[j]) != "---" {
				j++
			}
			if j < len(lines) {
				fence = "front matter"
			}
		case fence == "front matter":
			if strings.TrimSpace(line) == "---" {
				fence = ""
			}
		case fence != "":
			if t := strings.TrimSpace(line); len(t) >= len(fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
		default:
			if m := fenceRe.FindStringSubmatch(line); m != nil {
				fence = m[1]
				continue
			}
			out[i] = codeSpanRe.ReplaceAllStringFunc(line, func(s string) string {
				if keepCode {
					return strings.Trim(s, "`")
				}
				return strings.Repeat(" ", len(s))
			})
		}
	}
	return out
}

// headingAnchors is the set of anchors GitHub makes for the headings of a
// Markdown text: lower case, spaces to '-', punctuation but '-' and '_'
// dropped, and -1, -2... for a repeated one.
func headingAnchors(text string) map[string]bool {
	lines := proseLines(text, true)
	seen := map[string]int{}
	out := map[string]bool{}
	add := func(h string) {
		a := slug(h)
		if n, ok := seen[a]; ok {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n+1)
		} else {
			seen[a] = 0
		}
		out[a] = true
	}
	for i, line := range lines {
		if m := atxRe.FindStringSubmatch(line); m != nil {
			add(m[2])
			continue
		}
		if i > 0 && setextRe.MatchString(line) && strings.TrimSpace(lines[i-1]) != "" &&
			!atxRe.MatchString(lines[i-1]) && !setextRe.MatchString(lines[i-1]) {
			add(lines[i-1])
		}
	}
	return out
}

// slug is GitHub's anchor of a heading's text.
func slug(h string) string {
	h = inlineLinkRe.ReplaceAllString(strings.TrimSpace(h), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
