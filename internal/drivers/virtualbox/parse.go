package virtualbox

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// machineReadable parses `showvminfo --machinereadable` into its
// key=value pairs, a quoted value over as many lines as it holds; lines of
// other shapes are skipped.
func machineReadable(out string) map[string]string {
	// The format (VBoxManageInfo.cpp): one key=value per line, the key
	// quoted when the caller asks ("SATA-0-0"), string values quoted with
	// only \" and \\ escaped (outputMachineReadableString), so a
	// description holding a newline goes on over the next lines; numbers
	// bare.
	kv := map[string]string{}
	rest := strings.ReplaceAll(out, "\r\n", "\n")
	for rest != "" {
		key, val, n, ok := readKV(rest)
		if !ok {
			// Not a pair (7.0.0-7.0.14's "Encryption:     disabled",
			// " rec_screen0"): skip the line, and read on from the next.
			_, rest, _ = strings.Cut(rest, "\n")
			continue
		}
		kv[key] = val
		rest = rest[n:]
	}
	return kv
}

// readKV reads the key=value pair at the start of s, and how many bytes
// of s it took with its line end: a quoted value goes on to its closing
// quote, over as many lines as it holds, which must end that line.
func readKV(s string) (key, val string, n int, ok bool) {
	// Why one pass over the value: joining its lines one at a time and
	// reading the join again at each takes time in the square of its
	// length, minutes for a description of a few thousand lines.
	line, _, _ := strings.Cut(s, "\n")
	if strings.HasPrefix(line, `"`) {
		k, m, closed := unquote(line)
		if !closed || !strings.HasPrefix(line[m:], "=") {
			return "", "", 0, false
		}
		key, n = k, m+1
	} else {
		k, _, found := strings.Cut(line, "=")
		if !found {
			return "", "", 0, false
		}
		key, n = k, len(k)+1
	}
	if strings.HasPrefix(s[n:], `"`) {
		v, m, closed := unquote(s[n:])
		if !closed || n+m < len(s) && s[n+m] != '\n' {
			return "", "", 0, false
		}
		val, n = v, n+m
	} else {
		val, n = line[n:], len(line)
	}
	if n < len(s) {
		n++ // the line's end
	}
	return key, val, n, true
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

// block is one record of a "Field:   value" report.
type block struct {
	Fields map[string]string
	// Extra are the indented lines of a field that lists several
	// values, by that field.
	Extra map[string][]string
}

// blocks parses the "Field:   value" reports of `natnetwork list`, `list
// hostonlyifs`, `list hdds` and `showmediuminfo`: records separated by
// blank lines. Lines that are not fields (headers, "N networks found",
// indented rules) go with the record under the field before them, in
// Extra.
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
	// A number too long for an int is no version VirtualBox printed:
	// Atoi would give the largest int, which passes every version check.
	var v version
	for i, n := range []*int{&v.Major, &v.Minor, &v.Patch} {
		var err error
		if *n, err = strconv.Atoi(m[i+1]); err != nil {
			return version{}, false
		}
	}
	return v, true
}
