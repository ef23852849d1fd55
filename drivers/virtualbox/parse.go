package virtualbox

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// machineReadable parses `showvminfo --machinereadable`
// (VBoxManageInfo.cpp): one key=value per line, the key quoted when the
// caller asks ("SATA-0-0"), string values quoted with only \" and \\
// escaped (outputMachineReadableString), so a description holding a
// newline goes on over the next lines; numbers bare. Lines of other
// shapes (7.0.0-7.0.14's "Encryption:     disabled", " rec_screen0") are
// skipped.
func machineReadable(out string) map[string]string {
	kv := map[string]string{}
	lines := strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		key, val, ok := splitKV(line)
		// A quoted value left open goes on over the next lines.
		for j := i + 1; !ok && openValue(line) && j < len(lines); j++ {
			line += "\n" + lines[j]
			if key, val, ok = splitKV(line); ok {
				i = j
			}
		}
		if ok {
			kv[key] = val
		}
	}
	return kv
}

// openValue reports whether line is key="... with the value's quote not
// closed.
func openValue(line string) bool {
	_, rest, ok := strings.Cut(line, "=")
	if !ok || !strings.HasPrefix(rest, `"`) {
		return false
	}
	_, _, closed := unquote(rest)
	return !closed
}

func splitKV(line string) (string, string, bool) {
	var key, rest string
	if strings.HasPrefix(line, `"`) {
		k, n, ok := unquote(line)
		if !ok || !strings.HasPrefix(line[n:], "=") {
			return "", "", false
		}
		key, rest = k, line[n+1:]
	} else {
		k, r, ok := strings.Cut(line, "=")
		if !ok {
			return "", "", false
		}
		key, rest = k, r
	}
	if strings.HasPrefix(rest, `"`) {
		v, n, ok := unquote(rest)
		if !ok || n != len(rest) {
			return "", "", false
		}
		return key, v, true
	}
	return key, rest, true
}

// unquote reads the quoted string at the start of s, returning it and how
// many bytes of s it took.
func unquote(s string) (string, int, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), i + 1, true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, false
}

var listVMRE = regexp.MustCompile(`^"(.*)" \{([0-9a-fA-F-]{36})\}$`)

// vmEntry is one line of `list vms`.
type vmEntry struct {
	Name, UUID string
}

// listVMs parses `list vms`: `"name" {uuid}` per machine. A machine whose
// settings cannot be read is listed as "<inaccessible>".
func listVMs(out string) []vmEntry {
	var vms []vmEntry
	for _, line := range strings.Split(out, "\n") {
		m := listVMRE.FindStringSubmatch(strings.TrimRight(line, "\r"))
		if m != nil && m[1] != "<inaccessible>" {
			vms = append(vms, vmEntry{Name: m[1], UUID: m[2]})
		}
	}
	return vms
}

// blocks parses the "Field:   value" reports of `natnetwork list`, `list
// hostonlyifs`, `list hdds` and `showmediuminfo`: records separated by
// blank lines. Lines that are not fields (headers, "N networks found",
// indented rules) go with the record under the field before them, in
// Extra.
type block struct {
	Fields map[string]string
	// Extra are the indented lines of a field that lists several
	// values, by that field.
	Extra map[string][]string
}

func blocks(out string) []block {
	var res []block
	var cur *block
	last := ""
	for _, raw := range strings.Split(out, "\n") {
		line := strings.TrimRight(raw, "\r")
		if strings.TrimSpace(line) == "" {
			cur, last = nil, ""
			continue
		}
		indented := strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")
		key, val, ok := strings.Cut(line, ":")
		if indented && cur != nil && last != "" {
			cur.Extra[last] = append(cur.Extra[last], strings.TrimSpace(line))
			continue
		}
		if !ok || indented || strings.Contains(key, "  ") {
			// A section heading of its own ("Port-forwarding (ipv4)")
			// collects the indented lines after it.
			if cur != nil && !ok {
				last = strings.TrimSpace(line)
			}
			continue
		}
		if cur == nil {
			res = append(res, block{Fields: map[string]string{}, Extra: map[string][]string{}})
			cur = &res[len(res)-1]
		}
		last = strings.TrimSpace(key)
		cur.Fields[last] = strings.TrimSpace(val)
	}
	return res
}

// version is a VirtualBox version.
type version struct{ Major, Minor, Patch int }

func (v version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

func (v version) atLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

var versionRE = regexp.MustCompile(`(?m)^(\d+)\.(\d+)\.(\d+)(?:[_A-Za-z0-9]*)?r\d+`)

// parseVersion reads `VBoxManage --version`: "7.1.4r165100", possibly
// after warnings the Linux wrapper script prints first.
func parseVersion(out string) (version, bool) {
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		return version{}, false
	}
	var v version
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	v.Patch, _ = strconv.Atoi(m[3])
	return v, true
}
