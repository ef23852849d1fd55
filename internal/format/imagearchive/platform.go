package imagearchive

import (
	"fmt"
	"strconv"
	"strings"
)

// Platform is what an image is built for, or what a node runs: the
// fields of an OCI platform that decide whether a container can start.
type Platform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
	// OSVersion is Windows' build, "10.0.20348" or "10.0.20348.2849";
	// empty on Linux.
	OSVersion string `json:"osVersion,omitempty"`
}

// ParsePlatform reads os/arch[/variant][:osversion], the form Docker's
// --platform takes with the Windows build after a colon
// (windows/amd64:10.0.20348).
func ParsePlatform(s string) (Platform, error) {
	var p Platform
	spec, ver, _ := strings.Cut(s, ":")
	parts := strings.Split(spec, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return p, fmt.Errorf("platform %q: want os/arch[/variant][:osversion], e.g. linux/amd64 or windows/amd64:10.0.20348", s)
	}
	p.OS, p.Architecture = strings.ToLower(parts[0]), parts[1]
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	p.OSVersion = ver
	return p.Normalize(), nil
}

func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	if p.OSVersion != "" {
		s += ":" + p.OSVersion
	}
	return s
}

// Describe names the platform the way people know it: Windows builds by
// their Server release (windows/amd64 ltsc2022 (10.0.20348)).
func (p Platform) Describe() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	if p.OS != "windows" {
		return s
	}
	if p.OSVersion == "" {
		return s + " (no os.version)"
	}
	if rel := releaseName(windowsBuild(p.OSVersion)); rel != "" {
		return fmt.Sprintf("%s %s (%s)", s, rel, p.OSVersion)
	}
	return fmt.Sprintf("%s %s", s, p.OSVersion)
}

// Normalize spells architectures the way OCI does (uname's x86_64 and
// aarch64 become amd64 and arm64; arm64's default variant v8 is dropped).
func (p Platform) Normalize() Platform {
	p.OS = strings.ToLower(p.OS)
	switch strings.ToLower(p.Architecture) {
	case "x86_64", "x86-64", "amd64":
		p.Architecture = "amd64"
	case "aarch64", "arm64":
		p.Architecture = "arm64"
		if p.Variant == "v8" || p.Variant == "8" {
			p.Variant = ""
		}
	case "i386", "i686", "386":
		p.Architecture = "386"
	default:
		p.Architecture = strings.ToLower(p.Architecture)
	}
	return p
}

// Windows Server builds. Process isolation (the only kind Kubernetes
// runs) needs the container's build to match the host's: exactly before
// Windows Server 2022; from 2022 on, any build from the last LTSC release
// up to the host's own (containerd/platforms, platform_windows_compat.go).
const (
	buildLTSC2019 = 17763
	buildLTSC2022 = 20348
	buildLTSC2025 = 26100
)

// ltscBuilds are the LTSC releases containerd treats as compatibility
// floors, oldest first: a host from one of them on runs images from the
// newest floor at or below its build up to its own build. 2025 is not a
// floor (yet), so a 2025 host runs 2022 images.
var ltscBuilds = []int{buildLTSC2022}

func releaseName(build int) string {
	switch build {
	case buildLTSC2019:
		return "ltsc2019"
	case buildLTSC2022:
		return "ltsc2022"
	case buildLTSC2025:
		return "ltsc2025"
	}
	return ""
}

// windowsBuild returns the build number of an os.version, 0 when it has none.
func windowsBuild(osVersion string) int {
	parts := strings.Split(osVersion, ".")
	if len(parts) < 3 {
		return 0
	}
	b, err := strconv.Atoi(parts[2])
	if err != nil || b < 0 {
		return 0
	}
	return b
}

func majorMinor(osVersion string) string {
	parts := strings.Split(osVersion, ".")
	if len(parts) < 2 {
		return ""
	}
	return parts[0] + "." + parts[1]
}

// Runs reports whether a node of platform host can run a container built for
// img; when it cannot, it also returns why, in a user's terms.
func Runs(host, img Platform) (bool, string) {
	host, img = host.Normalize(), img.Normalize()
	if host.OS != img.OS {
		return false, fmt.Sprintf("a %s image cannot run on a %s node", img.OS, host.OS)
	}
	if host.Architecture != img.Architecture || (img.Variant != "" && host.Variant != "" && img.Variant != host.Variant) {
		return false, fmt.Sprintf("built for %s, the node is %s", img.Describe(), host.Describe())
	}
	if host.OS != "windows" {
		return true, ""
	}
	hb, ib := windowsBuild(host.OSVersion), windowsBuild(img.OSVersion)
	if ib == 0 {
		return false, "the Windows image has no os.version, so its build cannot be matched to the node's"
	}
	if hb == 0 || majorMinor(host.OSVersion) != majorMinor(img.OSVersion) {
		return false, fmt.Sprintf("built for Windows %s, the node runs %s", img.OSVersion, host.OSVersion)
	}
	low := hb
	for _, b := range ltscBuilds {
		if hb >= b {
			low = b
		}
	}
	switch {
	case ib > hb:
		return false, fmt.Sprintf("built for a newer Windows (%s) than the node's %s; process isolation runs only images of the node's build or older down to its LTSC release",
			describeBuild(ib), describeBuild(hb))
	case ib < low:
		return false, fmt.Sprintf("built for an older Windows (%s) than the node's %s accepts (%s or newer)",
			describeBuild(ib), describeBuild(hb), describeBuild(low))
	}
	return true, ""
}

func describeBuild(b int) string {
	if rel := releaseName(b); rel != "" {
		return fmt.Sprintf("%s, build %d", rel, b)
	}
	return fmt.Sprintf("build %d", b)
}

// Best picks, of the platforms an image is built for, the one a host
// runs: for Windows the newest build it accepts, as containerd prefers.
// It returns -1 when the host runs none of them.
func Best(host Platform, candidates []Platform) int {
	best := -1
	for i, c := range candidates {
		if ok, _ := Runs(host, c); !ok {
			continue
		}
		if best < 0 || windowsBuild(c.OSVersion) > windowsBuild(candidates[best].OSVersion) {
			best = i
		}
	}
	return best
}
