package debian

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/xi2/xz"
	"pault.ag/go/debian/version"
)

// Package is one paragraph of a Packages index, with the fields a
// resolver and a lock need. Relationship fields are kept as written; parse
// them with pault.ag/go/debian/dependency when they are needed (most of an
// index's 63,000 paragraphs never are).
type Package struct {
	Package      string
	Version      version.Version
	Architecture string
	MultiArch    string // Multi-Arch: same, foreign, allowed or empty
	Priority     string
	Essential    bool

	Depends, PreDepends, Provides string
	Conflicts, Breaks, Replaces   string

	Filename string // relative to the mirror root, e.g. pool/main/b/base-files/...
	Size     int64
	SHA256   string
}

// ParseIndex decompresses and parses a Packages index. ext is the index
// file's extension: ".xz", ".gz" or "" (uncompressed). Archive.Packages
// checks the bytes against the InRelease before they get here.
func ParseIndex(r io.Reader, ext string) ([]Package, error) {
	var err error
	switch ext {
	case ".xz":
		// xi2/xz, not ulikunitz/xz: the latter took 17.8 s on bookworm's
		// Packages.xz against 0.8 s.
		if r, err = xz.NewReader(r, 0); err != nil {
			return nil, fmt.Errorf("reading the xz index: %w", err)
		}
	case ".gz":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("reading the gzip index: %w", err)
		}
		defer zr.Close()
		r = zr
	case "":
	default:
		return nil, fmt.Errorf("index compression %q is not supported (only .xz, .gz and none)", ext)
	}
	var out []Package
	err = readParagraphs(r, func(n int, fields map[string]string) error {
		pkg, err := packageOf(fields)
		if err != nil {
			return fmt.Errorf("paragraph %d (%s) of the Packages index: %w", n, fields["Package"], err)
		}
		out = append(out, pkg)
		return nil
	})
	return out, err
}

// indexFields are the fields of a Packages paragraph that are kept; the
// rest (descriptions are most of the 50 MB) are skipped without being
// copied.
var indexFields = map[string]bool{
	"Package": true, "Version": true, "Architecture": true, "Multi-Arch": true, "Priority": true, "Essential": true,
	"Depends": true, "Pre-Depends": true, "Provides": true, "Conflicts": true, "Breaks": true, "Replaces": true,
	"Filename": true, "Size": true, "SHA256": true,
}

// readParagraphs reads deb822 paragraphs and calls each with the kept
// fields of one (numbered from 1). A folded field's lines are joined with
// a space, which is what they mean in every kept field. pault.ag's
// ParagraphReader does the same job but keeps every field, and took about
// twice as long on bookworm's index.
func readParagraphs(r io.Reader, each func(n int, fields map[string]string) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	fields := map[string]string{}
	var key string // the kept field being read, "" if skipping one
	inField, n, line := false, 0, 0
	flush := func() error {
		if len(fields) == 0 && !inField {
			return nil
		}
		n++
		if err := each(n, fields); err != nil {
			return err
		}
		fields, key, inField = map[string]string{}, "", false
		return nil
	}
	for {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line over 1 MiB: rare enough to copy.
			long := append([]byte(nil), b...)
			for errors.Is(err, bufio.ErrBufferFull) {
				b, err = br.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading the index: %w", err)
		}
		if len(b) > 0 {
			line++
		}
		text := bytes.TrimRight(b, " \t\r\n")
		switch {
		case len(b) == 0:
		case len(text) == 0:
			if ferr := flush(); ferr != nil {
				return ferr
			}
		case b[0] == ' ' || b[0] == '\t':
			if !inField {
				return fmt.Errorf("index line %d: a continuation line outside a field", line)
			}
			if key != "" {
				fields[key] += " " + string(bytes.TrimSpace(text))
			}
		case b[0] == '#':
		default:
			i := bytes.IndexByte(text, ':')
			if i <= 0 {
				return fmt.Errorf("index line %d: %q is not a field", line, text)
			}
			inField, key = true, ""
			if name := string(text[:i]); indexFields[name] {
				if _, dup := fields[name]; dup {
					return fmt.Errorf("index line %d: field %s twice in one paragraph", line, name)
				}
				key = name
				fields[name] = string(bytes.TrimSpace(text[i+1:]))
			}
		}
		if errors.Is(err, io.EOF) {
			return flush()
		}
	}
}

// packageOf checks and keeps the fields of one paragraph.
func packageOf(v map[string]string) (Package, error) {
	p := Package{
		Package:      v["Package"],
		Architecture: v["Architecture"],
		MultiArch:    v["Multi-Arch"],
		Priority:     v["Priority"],
		Essential:    v["Essential"] == "yes",
		Depends:      v["Depends"],
		PreDepends:   v["Pre-Depends"],
		Provides:     v["Provides"],
		Conflicts:    v["Conflicts"],
		Breaks:       v["Breaks"],
		Replaces:     v["Replaces"],
		Filename:     v["Filename"],
		SHA256:       strings.ToLower(v["SHA256"]),
	}
	if p.Package == "" {
		return p, errors.New("no Package field")
	}
	var err error
	if p.Version, err = version.Parse(v["Version"]); err != nil {
		return p, fmt.Errorf("bad Version %q: %w", v["Version"], err)
	}
	if p.Size, err = strconv.ParseInt(v["Size"], 10, 64); err != nil || p.Size < 0 {
		return p, fmt.Errorf("bad Size %q", v["Size"])
	}
	if !isSHA256(p.SHA256) {
		return p, fmt.Errorf("bad SHA256 %q (hwk checks each .deb by SHA-256)", v["SHA256"])
	}
	// Filename becomes a URL and, later, a cache path: it must stay
	// under the mirror root.
	if p.Filename == "" || path.IsAbs(p.Filename) || path.Clean(p.Filename) != p.Filename || p.Filename == ".." || strings.HasPrefix(p.Filename, "../") || strings.Contains(p.Filename, "\\") {
		return p, fmt.Errorf("bad Filename %q (it must be a clean path under the mirror root)", p.Filename)
	}
	return p, nil
}
