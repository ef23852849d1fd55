package wsl2

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Preflight implements drivers.Driver: wsl.exe of WSL 2.0 or newer, all
// that removing nodes needs.
func (d *Driver) Preflight(ctx context.Context) (string, error) {
	drivers.Waiting(ctx, "wsl.exe and the WSL distribution's answers")
	f, err := d.facts(ctx)
	if err != nil {
		return "", err
	}
	return judgeWSL(f)
}

// CheckUp implements drivers.UpChecker: NAT mode with localhost
// forwarding, which making and running a node needs.
func (d *Driver) CheckUp(ctx context.Context) error {
	f, err := d.facts(ctx)
	if err != nil {
		return err
	}
	_, err = judgeHost(f)
	return err
}

// Limits implements drivers.Experimental.
func (d *Driver) Limits() string {
	return "never run on a real WSL2 yet; the control plane only, with Windows workers on hyperv; NAT networking mode; one WSL node per host; an elevated terminal to route the node's address (again after WSL or Windows restarts: hwk start)"
}

func (d *Driver) facts(ctx context.Context) (hostFacts, error) {
	f, err := gatherFacts(ctx, d.r, d.profile, d.clustersDir())
	switch {
	case errors.Is(err, errInWSL):
		return f, unavailable(err.Error(), "run hwk.exe from Windows (PowerShell or cmd)")
	case errors.Is(err, errNoWSL) && runtime.GOOS != "windows":
		return f, unavailable("WSL2 is Windows'; this is "+runtime.GOOS, "use the docker or libvirt driver on Linux, virtualbox on macOS")
	case errors.Is(err, errNoWSL):
		return f, unavailable("wsl.exe was not found: WSL is not installed (it needs Windows 10 2004 or later)",
			"run `wsl --install --no-distribution` as administrator, then restart Windows")
	case isCode(err, "WSL_E_WSL_OPTIONAL_COMPONENT_REQUIRED"):
		return f, unavailable("the Windows Subsystem for Linux optional component is off, or waits for a restart of Windows",
			"run `wsl --install --no-distribution` as administrator, then restart Windows")
	}
	var we *Error
	if errors.As(err, &we) {
		return f, unavailable(err.Error(), "`wsl --status` says what WSL needs; `wsl --update` brings it up to date")
	}
	return f, err
}

// wslConfig is %UserProfile%\.wslconfig: keys by "section.key", lower
// case, as WSL reads them (case-insensitively; WslCoreConfig.cpp).
type wslConfig map[string]string

// parseWSLConfig reads .wslconfig's INI as WSL does: [section] lines,
// key = value lines, # and ; comments (which may start anywhere in a
// value), quotes only trimmed, a line without "=" skipped.
func parseWSLConfig(text string) wslConfig {
	// Why WSL's own reading rather than an INI library's: gopkg.in/ini.v1
	// would by default refuse a line without "=", join lines ending in a
	// backslash and unescape quoted values, each a different answer than
	// WSL gives for the same file.
	c := wslConfig{}
	section := ""
	// Why not a bufio.Scanner: one stops silently at a line over its 64
	// KiB limit (a long kernelCommandLine), and the settings after it
	// would go unread.
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.ToLower(strings.TrimSpace(line[1 : len(line)-1]))
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			if i := strings.IndexAny(v, "#;"); i >= 0 {
				v = v[:i]
			}
			c[section+"."+strings.ToLower(strings.TrimSpace(k))] = strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return c
}

// networkingMode returns the mode WSL runs its VM's network in: NAT unless
// .wslconfig sets another (an unknown value is NAT too).
func (c wslConfig) networkingMode() string {
	switch m := strings.ToLower(c["wsl2.networkingmode"]); m {
	case "mirrored", "none", "bridged", "virtioproxy", "consomme":
		return m
	}
	return "nat"
}

var sizeRE = regexp.MustCompile(`(?i)^\s*(\d+)\s*(b|kb|mb|gb|tb)?\s*$`)

// memoryLimit returns .wslconfig's memory limit of the WSL VM in bytes, 0
// when it sets none (then half of Windows' memory). A limit of more
// bytes than an int64 holds limits nothing: it is the largest int64, not
// the number a shift would wrap it to (17179869186GB to 2 GiB).
func (c wslConfig) memoryLimit() int64 {
	m := sizeRE.FindStringSubmatch(c["wsl2.memory"])
	if m == nil {
		return 0
	}
	shift := map[string]uint{"": 0, "b": 0, "kb": 10, "mb": 20, "gb": 30, "tb": 40}[strings.ToLower(m[2])]
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > math.MaxInt64>>shift {
		return math.MaxInt64
	}
	return n << shift
}

// localhostForwarding reports whether Windows forwards its loopback ports
// to WSL's (the default; NAT mode only).
func (c wslConfig) localhostForwarding() bool {
	return !strings.EqualFold(c["wsl2.localhostforwarding"], "false")
}

// hostFacts is what Preflight learns of the host's WSL.
type hostFacts struct {
	// version is WSL's package version ("2.5.7.0"), major its first
	// number; inbox is the wsl.exe that ships with Windows, before the
	// Store package, which knows no --version.
	version string
	major   int
	inbox   bool
	// windowsBuild is Windows' build number, from --version's last line.
	windowsBuild int
	config       wslConfig
	// nodes are the hwk node distributions there are, by cluster.
	nodes map[string]string
}

func unavailable(reason, fix string) error {
	return &drivers.UnavailableError{Driver: config.DriverWSL2, Reason: reason, Fix: fix}
}

// judgeWSL returns Preflight's verdict, whether hwk can drive this WSL at
// all (which removing nodes needs too): one line describing what it
// found, or an *UnavailableError with the fix.
func judgeWSL(f hostFacts) (string, error) {
	if err := judgeVersion(f); err != nil {
		return "", err
	}
	mode := f.config.networkingMode()
	if mode == "nat" {
		mode = "NAT"
	}
	d := fmt.Sprintf("WSL %s, %s networking", f.version, mode)
	if f.windowsBuild > 0 {
		d = fmt.Sprintf("WSL %s on Windows build %d, %s networking", f.version, f.windowsBuild, mode)
	}
	return d + " (experimental)", nil
}

// judgeVersion refuses a WSL older than 2.0: the inbox wsl.exe, or a
// Store WSL 1.x.
func judgeVersion(f hostFacts) error {
	switch {
	case f.inbox:
		return unavailable("this is the wsl.exe that ships with Windows, which predates WSL 2.0 (it knows no --version)",
			"run `wsl --update` (or install WSL from the Microsoft Store), then `wsl --shutdown`")
	case f.major < 2:
		return unavailable(fmt.Sprintf("WSL %s is too old: hwk needs 2.0 or newer", f.version), "run `wsl --update`")
	}
	return nil
}

// judgeHost returns CheckUp's verdict, judgeWSL's and then what making and
// running a node needs of WSL's networking.
func judgeHost(f hostFacts) (string, error) {
	detail, err := judgeWSL(f)
	if err != nil {
		return "", err
	}
	if mode := f.config.networkingMode(); mode != "nat" {
		return "", unavailable(fmt.Sprintf("WSL's networking mode is %s: hwk's WSL node needs NAT mode, in which the node keeps an address of its own that the host routes to, whereas in mirrored mode WSL carries no traffic between its distributions and other VMs on the host (microsoft/WSL#11494), so a Windows worker could not reach the control plane", mode),
			"remove `networkingMode=` under [wsl2] in %UserProfile%\\.wslconfig (NAT is the default), then `wsl --shutdown` (this changes every WSL distribution's networking); or put the control plane on the hyperv driver")
	}
	if !f.config.localhostForwarding() {
		return "", unavailable("%UserProfile%\\.wslconfig sets localhostForwarding=false, and the host reaches a WSL node's API server on 127.0.0.1",
			"remove `localhostForwarding=false` under [wsl2] in %UserProfile%\\.wslconfig, then `wsl --shutdown`")
	}
	return detail, nil
}

// judgeNode returns the verdict on making a node of cluster that needs memory
// bytes and whose ports the host must reach: busy are those something
// else already holds (on the host, or in WSL's one network).
func judgeNode(f hostFacts, cluster string, memory int64, busy []uint16) error {
	for c, n := range f.nodes {
		if c != cluster {
			return unavailable(fmt.Sprintf("cluster %s's node %s is a WSL distribution already: all WSL distributions share one VM and one network, so a host has at most one hwk WSL node", c, n),
				fmt.Sprintf("`hwk down --name %s`, or put this cluster's control plane on another driver", c))
		}
	}
	if err := portsTaken(busy); err != nil {
		return err
	}
	if limit := f.config.memoryLimit(); limit > 0 && limit < memory {
		return unavailable(fmt.Sprintf("%%UserProfile%%\\.wslconfig limits WSL's VM to %d MiB, and the node needs %d MiB", limit>>20, memory>>20),
			fmt.Sprintf("raise `memory=` under [wsl2] in %%UserProfile%%\\.wslconfig to %dGB or more, then `wsl --shutdown`", (memory+(1<<30)-1)>>30))
	}
	return nil
}

// portsTaken returns an error naming busy, the ports a node needs that
// something else holds, on the host or in WSL's network; nil when there
// are none.
func portsTaken(busy []uint16) error {
	if len(busy) == 0 {
		return nil
	}
	var ports []string
	for _, p := range busy {
		ports = append(ports, strconv.Itoa(int(p)))
	}
	what := "port " + ports[0] + " is"
	if len(ports) > 1 {
		what = "ports " + strings.Join(ports, ", ") + " are"
	}
	return unavailable(what+" taken, on this host or in WSL's network, which all distributions share (Docker Desktop's or Rancher Desktop's Kubernetes?)",
		"turn off the other Kubernetes (Docker Desktop: Settings > Kubernetes), or put this cluster's control plane on another driver")
}

// windowsBuildRE is the build in --version's last line, whose label is
// translated ("Windows version: 10.0.26100.4349").
var windowsBuildRE = regexp.MustCompile(`10\.0\.(\d+)(?:\.\d+)?\s*$`)

// parseWindowsBuild reads the Windows build from `wsl.exe --version`'s
// output; 0 when it names none.
func parseWindowsBuild(out string) int {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	m := windowsBuildRE.FindStringSubmatch(strings.TrimSpace(lines[len(lines)-1]))
	if m == nil {
		return 0
	}
	// A number too long for an int names no build: Atoi would give the
	// largest int, which passes every build check.
	b, err := strconv.Atoi(m[1])
	if err != nil {
		return 0
	}
	return b
}
