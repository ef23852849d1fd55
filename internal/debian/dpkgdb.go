package debian

import (
	"fmt"
	"slices"
	"strings"
)

// field is one field of a control paragraph, its continuation lines kept
// as they are.
type field struct{ name, value string }

// parseControl splits a control paragraph into its fields, in order.
func parseControl(text string) ([]field, error) {
	var out []field
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if line == "" {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if len(out) == 0 {
				return nil, fmt.Errorf("continuation line %q before any field", line)
			}
			out[len(out)-1].value += "\n" + line
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %q is not a field", line)
		}
		out = append(out, field{name: name, value: strings.TrimSpace(value)})
	}
	return out, nil
}

func fieldOf(fs []field, name string) string {
	for _, f := range fs {
		if strings.EqualFold(f.name, name) {
			return f.value
		}
	}
	return ""
}

// conffileNames returns the conffiles a package's conffiles control file
// installs. Lines with a flag before the name (remove-on-upgrade) name
// files the package no longer ships (deb-conffiles(5)).
func conffileNames(data []byte) []string {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "/") {
			out = append(out, line)
		}
	}
	return out
}

// statusParagraph returns the package's paragraph in var/lib/dpkg/status
// as dpkg leaves it after `dpkg --unpack` of a package that was not
// installed: the control fields with "Status: install ok unpacked" after
// Package, and each conffile with the hash "newconffile".
func statusParagraph(control []field, conffiles []string) string {
	var b strings.Builder
	wroteConffiles := false
	writeConffiles := func() {
		wroteConffiles = true
		if len(conffiles) == 0 {
			return
		}
		b.WriteString("Conffiles:\n")
		// Why "newconffile": dpkg (lib/dpkg/dpkg-db.h NEWCONFFILEFLAG;
		// src/main/unpack.c) marks conffiles a package did not have
		// before that way, extracts them as NAME.dpkg-new
		// (src/main/archives.c), and only on configure moves
		// NAME.dpkg-new to NAME and records its md5sum
		// (src/main/configure.c); another hash would make configure
		// compare it with the file on disk and treat a mismatch as a
		// local change.
		for _, c := range conffiles {
			fmt.Fprintf(&b, " %s newconffile\n", c)
		}
	}
	for _, f := range control {
		switch {
		case strings.EqualFold(f.name, "Status"), strings.EqualFold(f.name, "Conffiles"):
			continue
		case strings.EqualFold(f.name, "Description") && !wroteConffiles:
			// Where dpkg writes it: after the relations, before the
			// description.
			writeConffiles()
		}
		if f.value == "" || strings.HasPrefix(f.value, "\n") {
			fmt.Fprintf(&b, "%s:%s\n", f.name, f.value)
		} else {
			fmt.Fprintf(&b, "%s: %s\n", f.name, f.value)
		}
		if strings.EqualFold(f.name, "Package") {
			b.WriteString("Status: install ok unpacked\n")
		}
	}
	if !wroteConffiles {
		writeConffiles()
	}
	return b.String()
}

// triggerInterest is one interest line of a package's triggers control
// file (deb-triggers(5)).
type triggerInterest struct {
	name    string // a trigger name, or a path for a file trigger
	noawait bool
}

// triggerInterests reads the interest lines; activate lines register
// nothing: they only activate when the package is unpacked, and a package
// being configured for the first time runs its postinst configure anyway.
func triggerInterests(data []byte) ([]triggerInterest, error) {
	var out []triggerInterest
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("triggers line %q: want a directive and a name", strings.TrimSpace(line))
		}
		switch f[0] {
		case "interest", "interest-await":
			out = append(out, triggerInterest{name: f[1]})
		case "interest-noawait":
			out = append(out, triggerInterest{name: f[1], noawait: true})
		case "activate", "activate-await", "activate-noawait":
		default:
			return nil, fmt.Errorf("triggers line %q: unknown directive %q", strings.TrimSpace(line), f[0])
		}
	}
	return out, nil
}

// triggerFiles returns var/lib/dpkg/triggers/File and one file per named
// trigger, as dpkg writes them when it unpacks packages with interests
// (dpkg's doc/triggers.txt, "Details - File trigger"). Each of owners is a
// package's name as dpkg writes it: NAME:ARCH for a Multi-Arch: same package.
func triggerFiles(owners []string, interests [][]triggerInterest) map[string]string {
	var fileLines []string
	named := map[string][]string{}
	for i, owner := range owners {
		for _, t := range interests[i] {
			who := owner
			if t.noawait {
				who += "/noawait"
			}
			// File holds "PATH PACKAGE[/noawait]" lines; a named
			// trigger's file holds "PACKAGE[/noawait]" lines.
			if strings.HasPrefix(t.name, "/") {
				fileLines = append(fileLines, t.name+" "+who)
			} else {
				named[t.name] = append(named[t.name], who)
			}
		}
	}
	slices.Sort(fileLines)
	out := map[string]string{"File": joinLines(fileLines), "Unincorp": ""}
	for name, who := range named {
		out[name] = joinLines(who)
	}
	return out
}

func joinLines(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// dpkgName returns how dpkg names a package in its database: NAME:ARCH for a
// Multi-Arch: same package (several architectures may be installed side
// by side), NAME otherwise.
func dpkgName(name, arch, multiArch string) string {
	if multiArch == "same" {
		return name + ":" + arch
	}
	return name
}
