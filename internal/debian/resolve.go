package debian

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"pault.ag/go/debian/dependency"
	"pault.ag/go/debian/version"
)

// MinbaseExtra are the packages debootstrap --variant=minbase installs
// besides every Priority: required (and Essential) package: just apt.
var MinbaseExtra = []string{"apt"}

// preferred maps a package to the one chosen in its place when a relation
// offers both. debootstrap installs usr-is-merged, never usrmerge: a root
// made this way is merged-/usr from the start, and usrmerge's postinst
// (convert-usrmerge) would try to convert it again and break it (trap T1).
var preferred = map[string]string{"usrmerge": "usr-is-merged"}

// avoided are packages never installed, and why; a relation that only
// they could meet is an error.
var avoided = map[string]string{
	"usrmerge": "usrmerge converts a root to merged /usr when configured, and a root made from a lock is merged-/usr already: its scripts would break it; use usr-is-merged",
}

// Resolve returns, in unpack order (see Order), the packages a root needs
// for requested, as debootstrap --variant=minbase --include=REQUESTED picks
// them: idx's Priority: required and Essential: yes packages, apt and
// requested, closed over Pre-Depends and Depends (see satisfy), of idx.Arch
// and "all" only. Conflicts and Breaks within the set are an error.
func Resolve(idx *Index, requested []string) ([]*Package, error) {
	r := newResolver(idx)
	var seeds []string
	for i := range idx.Packages {
		p := &idx.Packages[i]
		if r.usable(p) && (p.Priority == "required" || p.Essential) {
			seeds = append(seeds, p.Package)
		}
	}
	slices.Sort(seeds)
	seeds = slices.Compact(seeds)
	for _, name := range seeds {
		if err := r.seed(name, "Priority: required or Essential"); err != nil {
			return nil, err
		}
	}
	for _, name := range MinbaseExtra {
		if err := r.seed(name, "debootstrap's minbase"); err != nil {
			return nil, err
		}
	}
	for _, name := range requested {
		if err := r.seed(name, "requested"); err != nil {
			return nil, err
		}
	}
	for len(r.queue) > 0 {
		p := r.queue[0]
		r.queue = r.queue[1:]
		for _, field := range []string{"Pre-Depends", "Depends"} {
			rels, err := r.relations(p, field)
			if err != nil {
				return nil, err
			}
			for _, rel := range rels {
				if err := r.satisfy(p, field, rel); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := r.checkConflicts(); err != nil {
		return nil, err
	}
	return r.order()
}

type resolver struct {
	idx       *Index
	arch      *dependency.Arch
	byName    map[string][]*Package // usable versions, highest first
	providers map[string][]*Package // usable packages whose Provides names the key
	chosen    map[string]*Package
	// why records what pulled a package in, for error messages.
	why    map[string]string
	queue  []*Package
	parsed map[*Package]map[string][]dependency.Relation
}

func newResolver(idx *Index) *resolver {
	r := &resolver{
		idx: idx, byName: map[string][]*Package{}, providers: map[string][]*Package{},
		chosen: map[string]*Package{}, why: map[string]string{}, parsed: map[*Package]map[string][]dependency.Relation{},
	}
	r.arch, _ = dependency.ParseArch(idx.Arch)
	for i := range idx.Packages {
		p := &idx.Packages[i]
		if !r.usable(p) {
			continue
		}
		r.byName[p.Package] = append(r.byName[p.Package], p)
		for _, name := range providedNames(p.Provides) {
			r.providers[name] = append(r.providers[name], p)
		}
	}
	for _, ps := range r.byName {
		// Highest version first; at one version the native build before
		// an "all" one, so the pick never depends on the index's order.
		sort.SliceStable(ps, func(i, j int) bool {
			if c := version.Compare(ps[i].Version, ps[j].Version); c != 0 {
				return c > 0
			}
			return ps[i].Architecture != "all" && ps[j].Architecture == "all"
		})
	}
	for _, ps := range r.providers {
		sort.SliceStable(ps, func(i, j int) bool { return providerLess(ps[i], ps[j]) })
	}
	return r
}

// providerLess orders the providers of a virtual package: the more basic
// priority first (what a minimal system already leans on), then by name.
func providerLess(a, b *Package) bool {
	if pa, pb := priorityRank(a.Priority), priorityRank(b.Priority); pa != pb {
		return pa < pb
	}
	if a.Package != b.Package {
		return a.Package < b.Package
	}
	return version.Compare(a.Version, b.Version) > 0
}

func priorityRank(p string) int {
	switch p {
	case "required":
		return 0
	case "important":
		return 1
	case "standard":
		return 2
	case "optional":
		return 3
	}
	return 4
}

// providedNames returns the names a Provides field lists, without parsing the
// whole field: the index has tens of thousands and few are ever needed.
func providedNames(provides string) []string {
	if provides == "" {
		return nil
	}
	var out []string
	for part := range strings.SplitSeq(provides, ",") {
		name := strings.TrimSpace(part)
		if i := strings.IndexAny(name, " (:"); i >= 0 {
			name = name[:i]
		}
		if name != "" {
			out = append(out, name)
		}
	}
	return out
}

func (r *resolver) usable(p *Package) bool {
	return p.Architecture == r.idx.Arch || p.Architecture == "all"
}

// relations parses one relationship field of p (memoized).
func (r *resolver) relations(p *Package, field string) ([]dependency.Relation, error) {
	m := r.parsed[p]
	if m == nil {
		m = map[string][]dependency.Relation{}
		r.parsed[p] = m
	}
	if rels, ok := m[field]; ok {
		return rels, nil
	}
	var text string
	switch field {
	case "Pre-Depends":
		text = p.PreDepends
	case "Depends":
		text = p.Depends
	case "Conflicts":
		text = p.Conflicts
	case "Breaks":
		text = p.Breaks
	case "Provides":
		text = p.Provides
	}
	var rels []dependency.Relation
	if strings.TrimSpace(text) != "" {
		d, err := dependency.Parse(text)
		if err != nil {
			return nil, fmt.Errorf("%s %s: its %s field %q does not parse: %w: the index is damaged; use another mirror", p.Package, p.Version, field, text, err)
		}
		rels = d.Relations
	}
	m[field] = rels
	return rels, nil
}

// seed chooses a package asked for by name: its highest version, or, for
// a virtual package, its first provider.
func (r *resolver) seed(name, why string) error {
	if p := r.chosen[name]; p != nil {
		return nil
	}
	if reason, ok := avoided[name]; ok {
		return fmt.Errorf("%s (%s) cannot be installed: %s", name, why, reason)
	}
	if ps := r.byName[name]; len(ps) > 0 {
		r.choose(ps[0], why)
		return nil
	}
	for _, p := range r.providers[name] {
		if r.chosen[p.Package] != nil {
			return nil
		}
	}
	if ps := r.providers[name]; len(ps) > 0 {
		r.choose(ps[0], why+" (as a provider of "+name+")")
		return nil
	}
	return fmt.Errorf("%s (%s) is not in the %s/%s index %s, not even as a virtual package: check its spelling, or use a suite that has it", name, why, r.idx.Component, r.idx.Arch, r.idx.URL)
}

func (r *resolver) choose(p *Package, why string) {
	r.chosen[p.Package] = p
	r.why[p.Package] = why
	r.queue = append(r.queue, p)
}

// chain returns why a package is in the set: "requested", or "via bar ←
// foo ← requested" for one pulled in by bar, which foo pulled in.
func (r *resolver) chain(name string) string {
	var parts []string
	seen := map[string]bool{name: true}
	for {
		w := r.why[name]
		next, ok := strings.CutPrefix(w, "dependency of ")
		if !ok || seen[next] {
			parts = append(parts, w)
			break
		}
		seen[next] = true
		parts = append(parts, next)
		name = next
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "via " + strings.Join(parts, " ← ")
}

// satisfy makes sure the chosen set meets one relation of p: an
// alternative already chosen meets it (see chosenSatisfier); otherwise it
// chooses the first alternative (see preferred and avoided) the index can
// satisfy, at the highest version that meets the relation, or else a
// package that Provides it.
func (r *resolver) satisfy(p *Package, field string, rel dependency.Relation) error {
	for _, poss := range rel.Possibilities {
		if r.chosenSatisfier(poss) != nil {
			return nil
		}
	}
	var notes []string
	for _, poss := range r.preferenceOrder(rel.Possibilities) {
		if !r.archOK(poss) {
			notes = append(notes, fmt.Sprintf("%s is for another architecture", poss.Name))
			continue
		}
		if reason, ok := avoided[poss.Name]; ok {
			notes = append(notes, reason)
			continue
		}
		if held := r.chosen[poss.Name]; held != nil {
			// One version per package: a name already chosen at a version
			// that does not fit cannot be taken again.
			notes = append(notes, fmt.Sprintf("%s %s is already chosen (%s)", held.Package, held.Version, r.chain(held.Package)))
			continue
		}
		for _, c := range r.byName[poss.Name] {
			if versionOK(c.Version, poss.Version) {
				r.choose(c, "dependency of "+p.Package)
				return nil
			}
		}
		for _, c := range r.providers[poss.Name] {
			if _, avoid := avoided[c.Package]; !avoid && r.chosen[c.Package] == nil && r.provides(c, poss) {
				r.choose(c, "dependency of "+p.Package)
				return nil
			}
		}
		notes = append(notes, r.whyNot(poss))
	}
	return fmt.Errorf("%s %s (%s) has %s: %s, which cannot be satisfied (%s): remove the package that pulls it in from the recipe, or use a suite or mirror where it resolves",
		p.Package, p.Version, r.chain(p.Package), field, rel.String(), strings.Join(notes, "; "))
}

// whyNot explains why nothing in the index satisfies poss.
func (r *resolver) whyNot(poss dependency.Possibility) string {
	var have []string
	for _, c := range r.byName[poss.Name] {
		have = append(have, c.Version.String())
	}
	for _, c := range r.providers[poss.Name] {
		have = append(have, c.Package+" "+c.Version.String()+" provides it")
	}
	if len(have) == 0 {
		return poss.Name + " is not in the index"
	}
	return fmt.Sprintf("the index has %s: %s", poss.Name, strings.Join(have, ", "))
}

// preferenceOrder moves a preferred package ahead of the one it replaces
// when a relation offers both.
func (r *resolver) preferenceOrder(ps []dependency.Possibility) []dependency.Possibility {
	out := slices.Clone(ps)
	for avoid, want := range preferred {
		ia := slices.IndexFunc(out, func(p dependency.Possibility) bool { return p.Name == avoid })
		iw := slices.IndexFunc(out, func(p dependency.Possibility) bool { return p.Name == want })
		if ia >= 0 && iw > ia {
			w := out[iw]
			out = slices.Delete(out, iw, iw+1)
			out = slices.Insert(out, ia, w)
		}
	}
	return out
}

// archOK reports whether a possibility's architecture qualifier can be met
// from a one-architecture index: none, :any and :native can, a foreign
// one cannot.
func (r *resolver) archOK(poss dependency.Possibility) bool {
	if poss.Architectures != nil && len(poss.Architectures.Architectures) > 0 && r.arch != nil && !poss.Architectures.Matches(r.arch) {
		return false
	}
	if poss.Arch == nil {
		return true
	}
	a := poss.Arch
	return a.CPU == "any" && a.OS == "any" || a.CPU == "native" || a.CPU == r.idx.Arch
}

// chosenSatisfier returns the chosen package that satisfies poss, if any.
func (r *resolver) chosenSatisfier(poss dependency.Possibility) *Package {
	if !r.archOK(poss) {
		return nil
	}
	if p := r.chosen[poss.Name]; p != nil && versionOK(p.Version, poss.Version) {
		return p
	}
	if r.realSatisfies(poss) {
		// debootstrap goes by name: a relation that a real package
		// meets installs that package, even when a chosen one Provides
		// the name (openssh-server's lsb-base, which sysvinit-utils
		// provides, is installed all the same).
		return nil
	}
	for _, c := range r.providers[poss.Name] {
		if r.chosen[c.Package] == c && r.provides(c, poss) {
			return c
		}
	}
	return nil
}

// realSatisfies reports whether a real package of the index meets poss.
func (r *resolver) realSatisfies(poss dependency.Possibility) bool {
	for _, c := range r.byName[poss.Name] {
		if versionOK(c.Version, poss.Version) {
			return true
		}
	}
	return false
}

// provides reports whether p's Provides meets poss. An unversioned Provides
// meets only an unversioned relation; a versioned one (always "=")
// meets a relation that its version satisfies.
func (r *resolver) provides(p *Package, poss dependency.Possibility) bool {
	rels, err := r.relations(p, "Provides")
	if err != nil {
		return false
	}
	for _, rel := range rels {
		for _, pr := range rel.Possibilities {
			if pr.Name != poss.Name {
				continue
			}
			if poss.Version == nil {
				return true
			}
			if pr.Version == nil || pr.Version.Operator != "=" {
				continue
			}
			v, err := version.Parse(pr.Version.Number)
			if err == nil && versionOK(v, poss.Version) {
				return true
			}
		}
	}
	return false
}

// versionOK reports whether v meets the relation (nil: any version).
func versionOK(v version.Version, rel *dependency.VersionRelation) bool {
	if rel == nil {
		return true
	}
	want, err := version.Parse(rel.Number)
	if err != nil {
		return false
	}
	c := version.Compare(v, want)
	// pault.ag's parser refuses the obsolete "<" and ">", so only
	// policy's five operators get here.
	switch rel.Operator {
	case "<<":
		return c < 0
	case "<=":
		return c <= 0
	case "=":
		return c == 0
	case ">=":
		return c >= 0
	case ">>":
		return c > 0
	}
	return false
}

// checkConflicts refuses a set in which one package Conflicts with or
// Breaks another (by name or through what the other Provides). A package
// never conflicts with itself: many Conflict with, Provide and Replace
// one virtual name to be its only provider.
func (r *resolver) checkConflicts() error {
	for _, name := range sortedKeys(r.chosen) {
		p := r.chosen[name]
		for _, field := range []string{"Conflicts", "Breaks"} {
			rels, err := r.relations(p, field)
			if err != nil {
				return err
			}
			for _, rel := range rels {
				for _, poss := range rel.Possibilities {
					if !r.archOK(poss) {
						continue
					}
					hits := []*Package{}
					if q := r.chosen[poss.Name]; q != nil && versionOK(q.Version, poss.Version) {
						hits = append(hits, q)
					}
					for _, c := range r.providers[poss.Name] {
						if r.chosen[c.Package] == c && c.Package != poss.Name && r.provides(c, poss) {
							hits = append(hits, c)
						}
					}
					for _, q := range hits {
						if q == p {
							continue
						}
						return fmt.Errorf("%s %s (%s) %s %s, and %s %s (%s) is in the set too: the two cannot be installed together; remove one of them (or what pulls it in) from the recipe",
							p.Package, p.Version, r.chain(p.Package), map[string]string{"Conflicts": "conflicts with", "Breaks": "breaks"}[field], poss.String(), q.Package, q.Version, r.chain(q.Package))
					}
				}
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// order puts the chosen set in unpack order (see Order).
func (r *resolver) order() ([]*Package, error) {
	deps := map[string][]string{}
	for _, name := range sortedKeys(r.chosen) {
		p := r.chosen[name]
		for _, field := range []string{"Pre-Depends", "Depends"} {
			rels, err := r.relations(p, field)
			if err != nil {
				return nil, err
			}
			for _, rel := range rels {
				for _, poss := range rel.Possibilities {
					if q := r.chosenSatisfier(poss); q != nil && q != p {
						deps[name] = append(deps[name], q.Package)
					}
				}
			}
		}
	}
	names := Order(sortedKeys(r.chosen), deps)
	out := make([]*Package, len(names))
	for i, n := range names {
		out[i] = r.chosen[n]
	}
	if len(out) == 0 {
		return nil, errors.New("the resolved set is empty: the index has no Priority: required packages; check the suite and component")
	}
	return out, nil
}

// Order returns names sorted so that each comes after what it depends on
// (deps maps a name to those it pre-depends or depends on; other names are
// ignored), first by name among those ready. A dependency cycle is placed
// as a whole, the same way on every run.
func Order(names []string, deps map[string][]string) []string {
	names = slices.Sorted(slices.Values(names))
	names = slices.Compact(names)
	in := map[string]bool{}
	for _, n := range names {
		in[n] = true
	}
	edges := map[string][]string{}
	for _, n := range names {
		for _, d := range deps[n] {
			if in[d] && d != n && !slices.Contains(edges[n], d) {
				edges[n] = append(edges[n], d)
			}
		}
	}
	scc := components(names, edges)
	size := map[int]int{}
	for _, n := range names {
		size[scc[n]]++
	}
	// Why cycles: Debian has them (libc6 and libgcc-s1). A cycle is placed
	// once everything it depends on outside itself is, and finished
	// before anything else: its member with the fewest unplaced
	// dependencies first, ties by name, so that the order is the same on
	// every run.
	placed := map[string]bool{}
	open := -1 // a cycle partly placed, which is finished first
	out := make([]string, 0, len(names))
	for len(out) < len(names) {
		best, bestCount := "", -1
		for _, n := range names {
			if placed[n] || (open >= 0 && scc[n] != open) {
				continue
			}
			count, blocked := 0, false
			for _, d := range edges[n] {
				if placed[d] {
					continue
				}
				if scc[d] != scc[n] {
					blocked = true
					break
				}
				count++
			}
			if blocked {
				continue
			}
			if bestCount < 0 || count < bestCount {
				best, bestCount = n, count
			}
		}
		placed[best] = true
		out = append(out, best)
		c := scc[best]
		if size[c]--; size[c] > 0 {
			open = c
		} else {
			open = -1
		}
	}
	return out
}

// components numbers the strongly connected components of the graph
// (Tarjan's algorithm): two names share a number when each reaches the
// other.
func components(names []string, edges map[string][]string) map[string]int {
	index, low, comp := map[string]int{}, map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	next, ncomp := 0, 0
	var visit func(n string)
	visit = func(n string) {
		index[n], low[n] = next, next
		next++
		stack = append(stack, n)
		onStack[n] = true
		for _, d := range edges[n] {
			if _, seen := index[d]; !seen {
				visit(d)
				low[n] = min(low[n], low[d])
			} else if onStack[d] {
				low[n] = min(low[n], index[d])
			}
		}
		if low[n] == index[n] {
			for {
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[top] = false
				comp[top] = ncomp
				if top == n {
					break
				}
			}
			ncomp++
		}
	}
	for _, n := range names {
		if _, seen := index[n]; !seen {
			visit(n)
		}
	}
	return comp
}
