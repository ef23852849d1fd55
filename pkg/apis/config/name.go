package config

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxClusterNameLength leaves room for "-linux-NN" in node names, and
// keeps the kubeconfig context (hwk-NAME) a valid DNS label too.
const MaxClusterNameLength = 32

// NameError is a cluster name that fails CheckName. Its message is the
// rule, so that every command and `up`'s config say the same thing.
type NameError struct {
	Name   string
	Reason string
}

func (e *NameError) Error() string { return e.Reason }

// CheckName returns a *NameError unless name is a valid cluster name: a
// DNS label of lowercase letters, digits and '-', at most
// MaxClusterNameLength characters, and no Windows device name. It is the
// one rule, applied wherever a name enters hwk before any path is made.
func CheckName(name string) error {
	// Why: names enter through the config's name, --name on every command
	// and the Action's input. Such a name cannot be empty, hold a path
	// separator or "..", look like an option, or differ from itself on a
	// case-insensitive filesystem.
	const rule = "use lowercase letters, digits and '-', starting and ending with a letter or digit"
	switch {
	case name == "":
		return &NameError{name, "the cluster name is empty; " + rule + ", e.g. " + DefaultName}
	case !dnsLabel.MatchString(name):
		return &NameError{name, fmt.Sprintf("%q is not a valid cluster name; %s", Shorten(name), rule)}
	case len(name) > MaxClusterNameLength:
		return &NameError{name, fmt.Sprintf("%q is %d characters; use at most %d", Shorten(name), len(name), MaxClusterNameLength)}
	case ReservedOnWindows(name):
		return &NameError{name, fmt.Sprintf("%q is a device name on Windows (CON, PRN, AUX, NUL, COM0-9, LPT0-9), which no file or directory may have there; choose another, e.g. %s-1", name, name)}
	}
	return nil
}

// ReservedOnWindows reports whether Windows keeps name for a device (CON,
// PRN, AUX, NUL, COM0-9, LPT0-9), with an extension or without, so that no
// file or directory can have it. The answer is the same on every OS.
func ReservedOnWindows(name string) bool {
	// Why: Naming Files, Paths, and Namespaces: "Do not use the following
	// reserved names for the name of a file: CON, PRN, AUX, NUL, COM0-9,
	// LPT0-9 ... Also avoid these names followed immediately by an
	// extension". The same on every OS, so that a name works wherever the
	// config goes.
	base, _, _ := strings.Cut(strings.ToLower(name), ".")
	base = strings.TrimRight(base, " ")
	switch base {
	case "con", "prn", "aux", "nul":
		return true
	}
	if len(base) == 4 && (strings.HasPrefix(base, "com") || strings.HasPrefix(base, "lpt")) {
		return base[3] >= '0' && base[3] <= '9'
	}
	return false
}

// Shorten keeps an over-long value readable in a message (a pasted file
// could be megabytes): its first 40 bytes, cut at a character boundary.
func Shorten(s string) string {
	const keep = 40
	if len(s) <= keep {
		return s
	}
	for i := keep; i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i] + "…"
		}
	}
	return s[:keep] + "…"
}

// imageNameRE is what a cached node image's name may be: it names a
// directory of the cache, and a pulled image's name comes from someone
// else's manifest.
var imageNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)

// CheckImageName refuses a node image name that could not be a directory
// of the cache (a path, "..", an empty name, an option).
func CheckImageName(name string) error {
	// Windows drops a trailing dot from a file name: "x." would be x.
	if !imageNameRE.MatchString(name) || strings.Contains(name, "..") || strings.HasSuffix(name, ".") {
		return fmt.Errorf("%q is not a node image name (lowercase letters, digits, '.', '_' and '-', at most 128)", Shorten(name))
	}
	if ReservedOnWindows(name) {
		return fmt.Errorf("%q is not a node image name: Windows keeps %q for a device, and no directory may have it there", name, strings.SplitN(name, ".", 2)[0])
	}
	return nil
}

// CheckRecordNames checks the names in a saved cluster record that hwk
// builds paths and machine names from: the cluster's, which must be
// cluster (the directory the record is in), and each node's. A record is
// hwk's own file, but one edited by hand or by another program must not
// lead a later command outside the cluster.
func CheckRecordNames(c *Cluster, cluster string) error {
	if err := CheckName(c.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if c.Name != cluster {
		return fmt.Errorf("name: the record is of cluster %q, not %q", c.Name, cluster)
	}
	for i, n := range c.Nodes {
		if !dnsLabel.MatchString(n.Name) || len(n.Name) > maxNodeName || ReservedOnWindows(n.Name) {
			return fmt.Errorf("nodes[%d].name: %q is not a node name hwk makes (a DNS label)", i, Shorten(n.Name))
		}
	}
	return nil
}
