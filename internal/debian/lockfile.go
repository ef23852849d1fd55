package debian

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// NewLock resolves requested against idx (see Resolve) and pins the result
// together with the archive state rel describes. mirror and suite are what
// the index was read from (Archive.Mirror and Archive.Suite).
func NewLock(rel *Release, idx *Index, mirror, suite string, requested []string) (*Lock, error) {
	if len(rel.Signers) == 0 {
		return nil, errors.New("making a lock: the Release has no pinned signer; read it with Archive.Release, which verifies it")
	}
	req := slices.Sorted(slices.Values(requested))
	req = slices.Compact(req)
	pkgs, err := Resolve(idx, req)
	if err != nil {
		return nil, fmt.Errorf("resolving %s %s %s/%s: %w", mirror, suite, idx.Component, idx.Arch, err)
	}
	l := &Lock{
		Mirror: mirror, Suite: suite, Component: idx.Component, Arch: idx.Arch,
		InRelease: LockedRelease{SHA256: rel.SHA256, Date: rel.Date.UTC().Format(time.RFC3339), Signer: rel.Signers[0].Fingerprint},
		Requested: req,
	}
	if l.Requested == nil {
		l.Requested = []string{}
	}
	for _, p := range pkgs {
		l.Packages = append(l.Packages, LockedPackage{
			Name: p.Package, Version: p.Version.String(), Architecture: p.Architecture, MultiArch: p.MultiArch,
			Filename: p.Filename, Size: p.Size, SHA256: p.SHA256,
		})
	}
	return l, nil
}

// WriteLock writes l as YAML after header, a comment (each line gets a
// "# "), which should say what the lock is for and how to make it again.
func WriteLock(w io.Writer, l *Lock, header string) error {
	data, err := yaml.Marshal(l)
	if err != nil {
		return fmt.Errorf("encoding the lock: %w", err)
	}
	var b bytes.Buffer
	for line := range strings.SplitSeq(strings.TrimRight(header, "\n"), "\n") {
		if line == "" {
			b.WriteString("#\n")
			continue
		}
		b.WriteString("# " + line + "\n")
	}
	b.Write(data)
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("writing the lock: %w", err)
	}
	return nil
}

// ReadLock reads a lock WriteLock wrote and checks that every entry is
// one a build can fetch and verify.
func ReadLock(r io.Reader) (*Lock, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading the lock: %w", err)
	}
	var l Lock
	if err := yaml.UnmarshalStrict(data, &l); err != nil {
		return nil, fmt.Errorf("the lock does not parse: %w: make it again rather than editing it by hand", err)
	}
	return &l, l.check()
}

func (l *Lock) check() error {
	if l.Mirror == "" || l.Suite == "" || l.Component == "" || l.Arch == "" {
		return errors.New("the lock lacks its mirror, suite, component or arch: make it again")
	}
	if !isSHA256(l.InRelease.SHA256) || l.InRelease.Signer == "" {
		return errors.New("the lock's inRelease lacks a SHA-256 or a signer: make it again")
	}
	if _, err := time.Parse(time.RFC3339, l.InRelease.Date); err != nil {
		return fmt.Errorf("the lock's inRelease date %q is not RFC 3339: make it again", l.InRelease.Date)
	}
	if len(l.Packages) == 0 {
		return errors.New("the lock has no packages: make it again")
	}
	seen := map[string]bool{}
	for _, p := range l.Packages {
		if p.Name == "" || p.Version == "" || p.Architecture == "" || p.Size <= 0 || !isSHA256(p.SHA256) {
			return fmt.Errorf("the lock's entry for %q lacks a version, architecture, size or SHA-256: make it again", p.Name)
		}
		if p.Filename == "" || path.IsAbs(p.Filename) || path.Clean(p.Filename) != p.Filename || strings.HasPrefix(p.Filename, "../") || strings.Contains(p.Filename, "\\") {
			return fmt.Errorf("the lock's entry for %s has a bad filename %q (it must be a clean path under the mirror root): make it again", p.Name, p.Filename)
		}
		if seen[p.Name] {
			return fmt.Errorf("the lock lists %s twice: make it again", p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// Equal reports whether two locks pin the same archive state, requests and
// packages in the same order.
func (l *Lock) Equal(o *Lock) bool {
	return l.Mirror == o.Mirror && l.Suite == o.Suite && l.Component == o.Component && l.Arch == o.Arch &&
		l.InRelease == o.InRelease && slices.Equal(l.Requested, o.Requested) && slices.Equal(l.Packages, o.Packages)
}

// Diff lists how to gets from l: "added X 1.0", "removed Y 2.0",
// "Z 1.2 → 1.3", a changed file at the same version, a changed request
// list, archive or order. It is empty when the two are Equal.
func (l *Lock) Diff(to *Lock) []string {
	var out []string
	field := func(name, a, b string) {
		if a != b {
			out = append(out, fmt.Sprintf("%s %s → %s", name, a, b))
		}
	}
	field("mirror", l.Mirror, to.Mirror)
	field("suite", l.Suite, to.Suite)
	field("component", l.Component, to.Component)
	field("arch", l.Arch, to.Arch)
	field("InRelease dated", l.InRelease.Date, to.InRelease.Date)
	field("InRelease SHA-256", l.InRelease.SHA256, to.InRelease.SHA256)
	field("InRelease signer", l.InRelease.Signer, to.InRelease.Signer)
	for _, n := range to.Requested {
		if !slices.Contains(l.Requested, n) {
			out = append(out, "requested "+n)
		}
	}
	for _, n := range l.Requested {
		if !slices.Contains(to.Requested, n) {
			out = append(out, "no longer requested "+n)
		}
	}
	old, cur := map[string]LockedPackage{}, map[string]LockedPackage{}
	for _, p := range l.Packages {
		old[p.Name] = p
	}
	for _, p := range to.Packages {
		cur[p.Name] = p
	}
	var oldOrder, curOrder []string
	for _, p := range l.Packages {
		if _, ok := cur[p.Name]; !ok {
			out = append(out, fmt.Sprintf("removed %s %s", p.Name, p.Version))
		} else {
			oldOrder = append(oldOrder, p.Name)
		}
	}
	for _, p := range to.Packages {
		o, ok := old[p.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("added %s %s", p.Name, p.Version))
			continue
		case o.Version != p.Version:
			out = append(out, fmt.Sprintf("%s %s → %s", p.Name, o.Version, p.Version))
		case o != p:
			out = append(out, fmt.Sprintf("%s %s: same version, other file or fields (%s, %s → %s, %s)", p.Name, p.Version, o.Filename, short(o.SHA256), p.Filename, short(p.SHA256)))
		}
		curOrder = append(curOrder, p.Name)
	}
	if !slices.Equal(oldOrder, curOrder) {
		out = append(out, "the unpack order changed")
	}
	return out
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}
