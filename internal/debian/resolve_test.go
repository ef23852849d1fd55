package debian_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/debian"
	"github.com/hwk-dev/hwk/internal/testing/debtest"
)

var resolveDate = time.Date(2026, 7, 11, 10, 16, 37, 0, time.UTC)

// archiveOf serves debs (plus an apt, which debootstrap's minbase always
// installs, unless debs has one) from a debtest mirror and reads them back
// through Archive, as hack/debianlock does.
func archiveOf(t *testing.T, debs ...debtest.Deb) (*debian.Release, *debian.Index) {
	t.Helper()
	if !slices.ContainsFunc(debs, func(d debtest.Deb) bool { return d.Package == "apt" }) {
		debs = append(debs, debtest.Deb{Package: "apt", Version: "2.6.1", Priority: "important"})
	}
	m := debtest.NewMirror(t, debtest.MirrorOptions{Debs: debs, Date: resolveDate})
	a := m.Archive(t)
	ctx := context.Background()
	rel, err := a.Release(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := a.Packages(ctx, rel, "main", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	return rel, idx
}

func resolveNames(t *testing.T, requested []string, debs ...debtest.Deb) []string {
	t.Helper()
	_, idx := archiveOf(t, debs...)
	pkgs, err := debian.Resolve(idx, requested)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pkgs {
		out = append(out, p.Package+"="+p.Version.String())
	}
	return out
}

func resolveErr(t *testing.T, requested []string, debs ...debtest.Deb) error {
	t.Helper()
	_, idx := archiveOf(t, debs...)
	pkgs, err := debian.Resolve(idx, requested)
	if err == nil {
		t.Fatalf("Resolve succeeded with %d packages, want an error", len(pkgs))
	}
	return err
}

func wantNames(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("resolved\n  %v\nwant\n  %v", got, want)
	}
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q\ndoes not say %q", err, p)
		}
	}
}

func TestResolveSeedsRequiredEssentialAndApt(t *testing.T) {
	got := resolveNames(t, []string{"tool"},
		debtest.Deb{Package: "req", Version: "1", Priority: "required"},
		debtest.Deb{Package: "ess", Version: "1", Essential: true},
		debtest.Deb{Package: "other", Version: "1"},
		debtest.Deb{Package: "tool", Version: "1"},
		debtest.Deb{Package: "req-i386", Version: "1", Architecture: "i386", Priority: "required"},
	)
	wantNames(t, got, "apt=2.6.1", "ess=1", "req=1", "tool=1")
}

func TestResolveAlternatives(t *testing.T) {
	got := resolveNames(t, []string{"a"},
		debtest.Deb{Package: "a", Version: "1", Depends: "missing | b | c, x (>= 2) | c"},
		debtest.Deb{Package: "b", Version: "1"},
		debtest.Deb{Package: "c", Version: "1"},
		debtest.Deb{Package: "x", Version: "1"},
	)
	// missing is skipped for b; x is too old, so c.
	wantNames(t, got, "apt=2.6.1", "b=1", "c=1", "a=1")
}

func TestResolveChosenAlternativeWins(t *testing.T) {
	got := resolveNames(t, []string{"a", "c"},
		debtest.Deb{Package: "a", Version: "1", Depends: "b | c"},
		debtest.Deb{Package: "b", Version: "1"},
		debtest.Deb{Package: "c", Version: "1"},
	)
	wantNames(t, got, "apt=2.6.1", "c=1", "a=1")
}

func TestResolveProvides(t *testing.T) {
	got := resolveNames(t, []string{"a"},
		debtest.Deb{Package: "a", Version: "1", Depends: "mail-agent, awk (>= 2)"},
		debtest.Deb{Package: "mta", Version: "1", Provides: "mail-agent", Conflicts: "mail-agent"},
		debtest.Deb{Package: "awk-old", Version: "1", Provides: "awk (= 1.5)"},
		debtest.Deb{Package: "awk-plain", Version: "1", Provides: "awk"},
		debtest.Deb{Package: "awk-new", Version: "1", Provides: "awk (= 2.5)"},
	)
	// awk-plain's unversioned Provides cannot meet awk (>= 2); mta's
	// conflict with what it provides itself is no conflict.
	wantNames(t, got, "apt=2.6.1", "awk-new=1", "mta=1", "a=1")

	err := resolveErr(t, []string{"a"},
		debtest.Deb{Package: "a", Version: "1", Depends: "awk (>= 2)"},
		debtest.Deb{Package: "awk-plain", Version: "1", Provides: "awk"},
	)
	wantErr(t, err, "a 1 (requested) has Depends: awk (>= 2)", "awk-plain 1 provides it")
}

func TestResolveRealPackageOverProvider(t *testing.T) {
	// As debootstrap does (openssh-server's lsb-base, which the essential
	// sysvinit-utils provides, is installed all the same).
	got := resolveNames(t, []string{"sshd"},
		debtest.Deb{Package: "sysvinit-utils", Version: "3.06-4", Essential: true, Priority: "required", Provides: "lsb-base (= 11.1.0)"},
		debtest.Deb{Package: "lsb-base", Version: "11.6", Architecture: "all", Depends: "sysvinit-utils (>= 3.05-4~)"},
		debtest.Deb{Package: "sshd", Version: "1", Depends: "lsb-base"},
	)
	wantNames(t, got, "apt=2.6.1", "sysvinit-utils=3.06-4", "lsb-base=11.6", "sshd=1")
}

func TestResolveVersionedDepends(t *testing.T) {
	got := resolveNames(t, []string{"a"},
		debtest.Deb{Package: "a", Version: "1", Depends: "lib (<< 2.0~)"},
		debtest.Deb{Package: "lib", Version: "2.0"},
		debtest.Deb{Package: "lib", Version: "1:0.5"},
		debtest.Deb{Package: "lib", Version: "1.9"},
	)
	// 1:0.5 is the highest version (epoch) but not below 2.0~.
	wantNames(t, got, "apt=2.6.1", "lib=1.9", "a=1")

	got = resolveNames(t, []string{"lib"},
		debtest.Deb{Package: "lib", Version: "2.0"},
		debtest.Deb{Package: "lib", Version: "1:0.5"},
	)
	wantNames(t, got, "apt=2.6.1", "lib=1:0.5")

	err := resolveErr(t, []string{"top"},
		debtest.Deb{Package: "top", Version: "1", Depends: "a"},
		debtest.Deb{Package: "a", Version: "1", Depends: "lib (>= 3)"},
		debtest.Deb{Package: "lib", Version: "2.0"},
	)
	wantErr(t, err, "a 1 (via top ← requested) has Depends: lib (>= 3)", "the index has lib: 2.0", "remove the package that pulls it in")

	err = resolveErr(t, []string{"a", "b"},
		debtest.Deb{Package: "a", Version: "1", Depends: "lib (= 1)"},
		debtest.Deb{Package: "b", Version: "1", Depends: "lib (= 2)"},
		debtest.Deb{Package: "lib", Version: "1"},
		debtest.Deb{Package: "lib", Version: "2"},
	)
	wantErr(t, err, "b 1 (requested) has Depends: lib (= 2)", "lib 1 is already chosen (via a ← requested)")

	err = resolveErr(t, []string{"nosuch"})
	wantErr(t, err, `nosuch (requested) is not in the main/amd64 index http://`, "check its spelling")
}

func TestResolveArchQualifiers(t *testing.T) {
	got := resolveNames(t, []string{"a"},
		debtest.Deb{Package: "a", Version: "1", Depends: "perl:any, libfoo:amd64, python3:native"},
		debtest.Deb{Package: "perl", Version: "5.36", MultiArch: "allowed"},
		debtest.Deb{Package: "libfoo", Version: "1", MultiArch: "same"},
		debtest.Deb{Package: "python3", Version: "3.11", MultiArch: "allowed"},
	)
	wantNames(t, got, "apt=2.6.1", "libfoo=1", "perl=5.36", "python3=3.11", "a=1")

	err := resolveErr(t, []string{"a"},
		debtest.Deb{Package: "a", Version: "1", Depends: "libfoo:i386"},
		debtest.Deb{Package: "libfoo", Version: "1", MultiArch: "same"},
	)
	wantErr(t, err, "libfoo is for another architecture")

	// Another architecture's package in the index is never used.
	err = resolveErr(t, []string{"a"},
		debtest.Deb{Package: "a", Version: "1", Depends: "libbar"},
		debtest.Deb{Package: "libbar", Version: "1", Architecture: "i386"},
	)
	wantErr(t, err, "libbar is not in the index")
}

func TestPrefersUsrIsMerged(t *testing.T) {
	debs := []debtest.Deb{
		{Package: "init-system-helpers", Version: "1.65.2", Architecture: "all", Priority: "required", Depends: "usrmerge | usr-is-merged"},
		{Package: "usrmerge", Version: "37~deb12u1", Architecture: "all", Priority: "optional"},
		{Package: "usr-is-merged", Version: "37~deb12u1", Architecture: "all", Priority: "optional", Conflicts: "usrmerge"},
	}
	got := resolveNames(t, nil, debs...)
	wantNames(t, got, "apt=2.6.1", "usr-is-merged=37~deb12u1", "init-system-helpers=1.65.2")

	// usrmerge is never installed, whether asked for or the only way to
	// meet a relation.
	err := resolveErr(t, []string{"usrmerge"}, debs...)
	wantErr(t, err, "usrmerge (requested) cannot be installed", "use usr-is-merged")
	err = resolveErr(t, nil, append(slices.Clone(debs[1:]),
		debtest.Deb{Package: "init-system-helpers", Version: "1.65.2", Architecture: "all", Priority: "required", Depends: "usrmerge"})...)
	wantErr(t, err, "init-system-helpers 1.65.2 (Priority: required or Essential) has Depends: usrmerge", "use usr-is-merged")
}

func TestResolveConflictsRefused(t *testing.T) {
	err := resolveErr(t, []string{"a", "b"},
		debtest.Deb{Package: "a", Version: "1", Conflicts: "b"},
		debtest.Deb{Package: "b", Version: "1"},
	)
	wantErr(t, err, "a 1 (requested) conflicts with b, and b 1 (requested) is in the set too", "remove one of them")

	err = resolveErr(t, []string{"a"},
		debtest.Deb{Package: "a", Version: "1", Depends: "old"},
		debtest.Deb{Package: "old", Version: "1", Breaks: "a (<< 2)"},
	)
	wantErr(t, err, "old 1 (via a ← requested) breaks a (<< 2), and a 1 (requested)")

	// A Breaks the set's version does not meet is no conflict, and nor is
	// one on a provided name the breaking package provides itself.
	got := resolveNames(t, []string{"a"},
		debtest.Deb{Package: "a", Version: "2", Depends: "old"},
		debtest.Deb{Package: "old", Version: "1", Breaks: "a (<< 2), virt", Provides: "virt"},
	)
	wantNames(t, got, "apt=2.6.1", "old=1", "a=2")

	err = resolveErr(t, []string{"a", "p"},
		debtest.Deb{Package: "a", Version: "1", Conflicts: "virt"},
		debtest.Deb{Package: "p", Version: "1", Provides: "virt"},
	)
	wantErr(t, err, "a 1 (requested) conflicts with virt, and p 1 (requested)")
}

func TestResolvePreDependsOrder(t *testing.T) {
	got := resolveNames(t, []string{"aa"},
		debtest.Deb{Package: "aa", Version: "1", PreDepends: "zz"},
		debtest.Deb{Package: "zz", Version: "1", Depends: "mm"},
		debtest.Deb{Package: "mm", Version: "1"},
	)
	wantNames(t, got, "apt=2.6.1", "mm=1", "zz=1", "aa=1")
}

func TestResolveCycleOrderedDeterministically(t *testing.T) {
	debs := []debtest.Deb{
		{Package: "libc6", Version: "1", Priority: "required", Depends: "libgcc-s1"},
		{Package: "libgcc-s1", Version: "1", Priority: "required", Depends: "gcc-base, libc6"},
		{Package: "gcc-base", Version: "1", Priority: "required"},
		{Package: "bash", Version: "1", Priority: "required", PreDepends: "libc6"},
	}
	want := []string{"apt=2.6.1", "gcc-base=1", "libc6=1", "libgcc-s1=1", "bash=1"}
	for i := range 4 {
		shuffled := slices.Clone(debs)
		rand.New(rand.NewPCG(uint64(i), 0)).Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		wantNames(t, resolveNames(t, nil, shuffled...), want...)
	}
}

func TestOrder(t *testing.T) {
	got := debian.Order([]string{"c", "b", "a", "d", "a"}, map[string][]string{
		"a": {"b"}, "b": {"a"}, // a cycle: a has fewer unplaced deps than... both one; a by name
		"c": {"a", "outside"}, // names outside the set are ignored
		"d": {"d"},            // and so is a package depending on itself
	})
	if want := []string{"d", "a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("Order = %v, want %v", got, want)
	}
}

var lockDebs = []debtest.Deb{
	{Package: "base-files", Version: "12.4+deb12u15", Priority: "required", Essential: true},
	{Package: "libc6", Version: "2.36-9+deb12u13", MultiArch: "same", Priority: "required", Depends: "libgcc-s1"},
	{Package: "libgcc-s1", Version: "12.2.0-14+deb12u1", MultiArch: "same", Priority: "optional", Depends: "libc6 (>= 2.35)"},
	{Package: "dbus", Version: "1.14.10-1~deb12u1", Depends: "libc6, adduser"},
	{Package: "adduser", Version: "3.134", Architecture: "all", MultiArch: "foreign", Priority: "important"},
}

func makeLock(t *testing.T, debs []debtest.Deb, requested ...string) *debian.Lock {
	t.Helper()
	rel, idx := archiveOf(t, debs...)
	l, err := debian.NewLock(rel, idx, "http://deb.debian.org/debian", "bookworm", requested)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func lockBytes(t *testing.T, l *debian.Lock) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := debian.WriteLock(&b, l, "test lock\n\nmade by TestResolveTwiceSame"); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestResolveTwiceSame(t *testing.T) {
	a := makeLock(t, lockDebs, "dbus", "dbus")
	rev := slices.Clone(lockDebs)
	slices.Reverse(rev)
	b := makeLock(t, rev, "dbus")
	// Two mirrors, two keys and two InReleases: only the archive state
	// differs, and it is made equal here.
	b.InRelease = a.InRelease
	if ab, bb := lockBytes(t, a), lockBytes(t, b); !bytes.Equal(ab, bb) {
		t.Errorf("the same index in another order gave another lock:\n%s\n---\n%s", ab, bb)
	}
	var names []string
	for _, p := range a.Packages {
		names = append(names, p.Name)
	}
	if want := []string{"adduser", "apt", "base-files", "libc6", "libgcc-s1", "dbus"}; !slices.Equal(names, want) {
		t.Errorf("unpack order %v, want %v", names, want)
	}
	if !slices.Equal(a.Requested, []string{"dbus"}) || a.Component != "main" || a.Arch != "amd64" || a.InRelease.Date != "2026-07-11T10:16:37Z" {
		t.Errorf("lock header fields: %+v", a)
	}
	if p := a.Packages[3]; p.MultiArch != "same" || p.Architecture != "amd64" || p.Size <= 0 || len(p.SHA256) != 64 || !strings.HasPrefix(p.Filename, "pool/main/libc/libc6/") {
		t.Errorf("libc6 entry %+v", p)
	}
}

func TestLockRoundTrip(t *testing.T) {
	l := makeLock(t, lockDebs, "dbus")
	data := lockBytes(t, l)
	if !bytes.HasPrefix(data, []byte("# test lock\n#\n# made by TestResolveTwiceSame\n")) {
		t.Errorf("header:\n%s", data)
	}
	back, err := debian.ReadLock(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(l) || len(back.Diff(l)) != 0 {
		t.Errorf("round trip changed the lock: %v", back.Diff(l))
	}
	if again := lockBytes(t, back); !bytes.Equal(again, data) {
		t.Errorf("re-encoding changed the bytes:\n%s\n---\n%s", data, again)
	}

	for name, change := range map[string]func(string) string{
		"unknown field": func(s string) string { return strings.Replace(s, "mirror:", "mirrors:", 1) },
		"bad digest":    func(s string) string { return strings.Replace(s, "sha256: ", "sha256: x", 2) },
		"bad filename":  func(s string) string { return strings.Replace(s, "filename: pool/", "filename: ../pool/", 1) },
		"not yaml":      func(string) string { return "packages: [" },
	} {
		_, err := debian.ReadLock(strings.NewReader(change(string(data))))
		if err == nil || !strings.Contains(err.Error(), "make it again") {
			t.Errorf("%s: ReadLock error %v, want one saying to make it again", name, err)
		}
	}
}

func TestLockDiff(t *testing.T) {
	old := makeLock(t, lockDebs, "dbus")
	debs := slices.Clone(lockDebs)
	debs[3].Version = "1.14.10-1~deb12u2"                                                      // dbus moves on
	debs = slices.DeleteFunc(debs, func(d debtest.Deb) bool { return d.Package == "adduser" }) // dropped
	debs[3].Depends = "libc6, passwd"
	debs = append(debs, debtest.Deb{Package: "passwd", Version: "1:4.13+dfsg1-1+deb12u1"})
	cur := makeLock(t, debs, "dbus", "passwd")
	got := old.Diff(cur)
	for _, want := range []string{
		"InRelease SHA-256 " + old.InRelease.SHA256 + " → " + cur.InRelease.SHA256,
		"requested passwd",
		"removed adduser 3.134",
		"added passwd 1:4.13+dfsg1-1+deb12u1",
		"dbus 1.14.10-1~deb12u1 → 1.14.10-1~deb12u2",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("Diff lacks %q:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if old.Equal(cur) || !old.Equal(old) {
		t.Error("Equal is wrong")
	}
	if d := old.Diff(old); len(d) != 0 {
		t.Errorf("Diff with itself = %v", d)
	}
}
