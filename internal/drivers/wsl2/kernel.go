package wsl2

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// need is how much a node depends on a kernel feature.
type need int

const (
	// required means kubelet, kube-proxy, Calico or kubeadm's own
	// preflight fails without it.
	required need = iota
	// recommended means something works worse, or only some workloads
	// fail.
	recommended
)

// feature is one thing of the kernel a Linux node needs.
type feature struct {
	name   string
	config string // its CONFIG_ option
	module string // its module, when built as one
	need   need
	// live is a file that exists only while the feature is in the
	// running kernel (a sysctl it adds); fs is its /proc/filesystems
	// entry. Either proves it is there.
	live, fs string
	// alt is another feature that stands in for this one (the nftables
	// backend of iptables for the legacy one).
	alt string
}

// features are what a kubeadm node with kube-proxy (iptables mode) and
// Calico (VXLAN, iptables dataplane) uses.
var features = []feature{
	// Sources: the matches and targets their rules emit (kube-proxy's
	// pkg/proxy/iptables/proxier.go; felix's iptables/match_builder.go,
	// actions.go, rules/static.go), the modules Calico's docs list for
	// v3.31, and kubeadm's required ones (k8s.io/system-validators,
	// xt_comment and xt_REDIRECT).
	{name: "overlay file system (containerd's snapshotter)", config: "OVERLAY_FS", module: "overlay", fs: "overlay"},
	{name: "veth pairs (Calico's pod interfaces)", config: "VETH", module: "veth"},
	{name: "VXLAN (Calico's overlay)", config: "VXLAN", module: "vxlan"},
	{name: "connection tracking", config: "NF_CONNTRACK", module: "nf_conntrack", live: "proc/sys/net/netfilter/nf_conntrack_max"},
	{name: "NAT", config: "NF_NAT", module: "nf_nat"},
	{name: "x_tables", config: "NETFILTER_XTABLES", module: "x_tables"},
	{name: "iptables (legacy)", config: "IP_NF_IPTABLES", module: "ip_tables", alt: "nft_compat"},
	{name: "iptables on nftables", config: "NFT_COMPAT", module: "nft_compat", alt: "ip_tables"},
	{name: "iptables filter table", config: "IP_NF_FILTER", module: "iptable_filter", alt: "nft_compat"},
	{name: "iptables nat table", config: "IP_NF_NAT", module: "iptable_nat", alt: "nft_compat"},
	{name: "-m comment", config: "NETFILTER_XT_MATCH_COMMENT", module: "xt_comment"},
	{name: "-m conntrack", config: "NETFILTER_XT_MATCH_CONNTRACK", module: "xt_conntrack"},
	{name: "-m mark / -j MARK", config: "NETFILTER_XT_MARK", module: "xt_mark"},
	{name: "-m multiport", config: "NETFILTER_XT_MATCH_MULTIPORT", module: "xt_multiport"},
	{name: "-m addrtype", config: "NETFILTER_XT_MATCH_ADDRTYPE", module: "xt_addrtype"},
	{name: "-m statistic (Service load balancing)", config: "NETFILTER_XT_MATCH_STATISTIC", module: "xt_statistic"},
	{name: "-m set", config: "NETFILTER_XT_SET", module: "xt_set"},
	{name: "IP sets", config: "IP_SET", module: "ip_set"},
	{name: "-m rpfilter", config: "IP_NF_MATCH_RPFILTER", module: "ipt_rpfilter"},
	{name: "-j MASQUERADE", config: "NETFILTER_XT_TARGET_MASQUERADE", module: "xt_MASQUERADE"},
	{name: "-j DNAT/SNAT", config: "NETFILTER_XT_NAT", module: "xt_nat"},
	{name: "-j REDIRECT (kubeadm requires it)", config: "NETFILTER_XT_TARGET_REDIRECT", module: "xt_REDIRECT"},
	{name: "-j REJECT", config: "IP_NF_TARGET_REJECT", module: "ipt_REJECT"},
	{name: "bridge netfilter (net.bridge.bridge-nf-call-iptables)", config: "BRIDGE_NETFILTER", module: "br_netfilter", need: recommended,
		live: "proc/sys/net/bridge/bridge-nf-call-iptables"},
	{name: "-m recent (Services with ClientIP affinity)", config: "NETFILTER_XT_MATCH_RECENT", module: "xt_recent", need: recommended},
	{name: "conntrack over netlink (stale flow clean-up)", config: "NF_CT_NETLINK", module: "nf_conntrack_netlink", need: recommended},
}

// presence is what hwk can tell of a feature without root and without
// loading anything.
type presence string

const (
	// active means in the running kernel (built in, or a loaded module).
	active presence = "active"
	// available means a module the kernel can load.
	available presence = "available"
	missing   presence = "missing"
	// unknown means nothing readable tells either way.
	unknown presence = "unknown"
)

// finding is one feature's presence and what showed it.
type finding struct {
	feature
	presence presence
	evidence string
}

// kernelReport is what the kernel check found.
type kernelReport struct {
	release  string
	findings []finding
	// cgroup2 reports whether /sys/fs/cgroup is cgroup v2; controllers
	// are those its root offers.
	cgroup2     bool
	controllers []string
	// configFile is where the kernel's config was read from, "" when
	// none could be.
	configFile string
}

// kernelSources are what the check reads, gathered once.
type kernelSources struct {
	filesystems map[string]bool
	loaded      map[string]bool
	builtin     map[string]bool
	loadable    map[string]bool
	config      map[string]string
	configFile  string
}

// checkKernel reports which kernel features a node needs are in root, the
// file system of the Linux system the node runs in (its "/", as an fs.FS),
// reading only what any user may read and loading nothing.
func checkKernel(root fs.FS) (*kernelReport, error) {
	// For each feature, in this order: the live state (/proc/filesystems,
	// /proc/modules, /sys/module, sysctls the feature adds), then the
	// module metadata under /lib/modules/RELEASE (modules.builtin,
	// modules.dep), then the kernel's config (/proc/config.gz,
	// /boot/config-RELEASE and the places kubeadm looks). A /sys/module
	// directory proves a feature but its absence proves nothing: built-ins
	// without parameters have none.
	rel, err := fs.ReadFile(root, "proc/sys/kernel/osrelease")
	if err != nil {
		return nil, fmt.Errorf("read the kernel's release: %w", err)
	}
	r := &kernelReport{release: strings.TrimSpace(string(rel))}
	src := gatherSources(root, r.release)
	r.configFile = src.configFile
	byModule := map[string]*finding{}
	for _, f := range features {
		r.findings = append(r.findings, src.find(root, f))
	}
	for i := range r.findings {
		byModule[r.findings[i].module] = &r.findings[i]
	}
	// Either iptables backend will do.
	for i := range r.findings {
		f := &r.findings[i]
		if alt, ok := byModule[f.alt]; ok && f.presence != active && f.presence != available &&
			(alt.presence == active || alt.presence == available) {
			f.need = recommended
		}
	}
	r.cgroup2, r.controllers = cgroups(root)
	return r, nil
}

func gatherSources(root fs.FS, release string) kernelSources {
	s := kernelSources{filesystems: map[string]bool{}, loaded: map[string]bool{}, builtin: map[string]bool{}, loadable: map[string]bool{}}
	if data, err := fs.ReadFile(root, "proc/filesystems"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				s.filesystems[f[len(f)-1]] = true
			}
		}
	}
	if data, err := fs.ReadFile(root, "proc/modules"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				s.loaded[moduleName(f[0])] = true
			}
		}
	}
	if entries, err := fs.ReadDir(root, "sys/module"); err == nil {
		for _, e := range entries {
			s.loaded[moduleName(e.Name())] = true
		}
	}
	dir := path.Join("lib/modules", release)
	if data, err := fs.ReadFile(root, path.Join(dir, "modules.builtin")); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				s.builtin[moduleName(line)] = true
			}
		}
	}
	if data, err := fs.ReadFile(root, path.Join(dir, "modules.dep")); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if ko, _, ok := strings.Cut(line, ":"); ok {
				s.loadable[moduleName(ko)] = true
			}
		}
	}
	s.config, s.configFile = kernelConfig(root, release)
	return s
}

// moduleName returns a module's name from a path or name as the kernel's
// files write it: kernel/net/netfilter/xt_comment.ko.zst is xt_comment,
// and dashes are underscores.
func moduleName(p string) string {
	n := path.Base(p)
	if i := strings.Index(n, ".ko"); i >= 0 {
		n = n[:i]
	}
	return strings.ReplaceAll(n, "-", "_")
}

// configPaths are where a kernel's config may be, in kubeadm's order
// (k8s.io/system-validators' KernelValidator), RELEASE replaced.
var configPaths = []string{
	"proc/config.gz",
	"boot/config-RELEASE",
	"usr/src/linux-RELEASE/.config",
	"usr/src/linux/.config",
	"usr/lib/modules/RELEASE/config",
	"usr/lib/ostree-boot/config-RELEASE",
	"usr/lib/kernel/config-RELEASE",
	"usr/src/linux-headers-RELEASE/.config",
	"lib/modules/RELEASE/build/.config",
}

// kernelConfig reads the first config found: CONFIG_ options by name
// (without CONFIG_), "y", "m" or "n" (is not set).
func kernelConfig(root fs.FS, release string) (map[string]string, string) {
	for _, p := range configPaths {
		p = strings.ReplaceAll(p, "RELEASE", release)
		data, err := fs.ReadFile(root, p)
		if err != nil {
			continue
		}
		if strings.HasSuffix(p, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				continue
			}
			if data, err = io.ReadAll(zr); err != nil {
				continue
			}
		}
		cfg := map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := sc.Text()
			if opt, ok := strings.CutPrefix(line, "# CONFIG_"); ok {
				if name, ok := strings.CutSuffix(opt, " is not set"); ok {
					cfg[name] = "n"
				}
				continue
			}
			if opt, ok := strings.CutPrefix(line, "CONFIG_"); ok {
				if name, val, ok := strings.Cut(opt, "="); ok {
					cfg[name] = val
				}
			}
		}
		return cfg, "/" + p
	}
	return nil, ""
}

func (s kernelSources) find(root fs.FS, f feature) finding {
	out := finding{feature: f}
	set := func(p presence, evidence string) finding {
		out.presence, out.evidence = p, evidence
		return out
	}
	if f.live != "" {
		if _, err := fs.Stat(root, f.live); err == nil {
			return set(active, "/"+f.live+" exists")
		}
	}
	switch {
	case f.fs != "" && s.filesystems[f.fs]:
		return set(active, "in /proc/filesystems")
	case s.loaded[f.module]:
		return set(active, "loaded")
	case s.builtin[f.module]:
		return set(active, "built in (modules.builtin)")
	case s.loadable[f.module]:
		return set(available, "a module (modules.dep)")
	}
	switch v := s.config[f.config]; {
	case s.config == nil:
		return set(unknown, "no kernel config, module list or live sign to read")
	case v == "y":
		return set(active, "CONFIG_"+f.config+"=y in "+s.configFile)
	case v == "m":
		// The config names a module, but no module file was found.
		return set(unknown, "CONFIG_"+f.config+"=m in "+s.configFile+", but the module is not in /lib/modules")
	default:
		return set(missing, "CONFIG_"+f.config+" is not set in "+s.configFile)
	}
}

// cgroups reports whether /sys/fs/cgroup is mounted as cgroup v2 and, if
// so, the controllers its root offers.
func cgroups(root fs.FS) (bool, []string) {
	data, err := fs.ReadFile(root, "proc/self/mountinfo")
	if err != nil {
		return false, nil
	}
	v2 := false
	for _, line := range strings.Split(string(data), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) >= 5 && len(qf) >= 1 && pf[4] == "/sys/fs/cgroup" {
			v2 = qf[0] == "cgroup2"
		}
	}
	if !v2 {
		return false, nil
	}
	ctl, err := fs.ReadFile(root, "sys/fs/cgroup/cgroup.controllers")
	if err != nil {
		return true, nil
	}
	return true, strings.Fields(string(ctl))
}

// kubeletControllers are the cgroup v2 controllers kubelet needs.
var kubeletControllers = []string{"cpu", "cpuset", "memory", "pids"}

// errKernel is a kernel that cannot run a node.
var errKernel = errors.New("the WSL kernel cannot run a Kubernetes node")

// verdict returns the check's result: an error naming each required feature
// missing, with the fixes; warnings for what is missing but only
// recommended, or could not be told.
func (r *kernelReport) verdict() (warnings []string, err error) {
	var problems, options []string
	for _, f := range r.findings {
		switch {
		case f.presence == missing && f.need == required:
			problems = append(problems, fmt.Sprintf("%s (CONFIG_%s, module %s): %s", f.name, f.config, f.module, f.evidence))
			options = append(options, "CONFIG_"+f.config)
		case f.presence == missing || f.presence == unknown:
			warnings = append(warnings, fmt.Sprintf("%s (CONFIG_%s) is %s: %s", f.name, f.config, f.presence, f.evidence))
		}
	}
	if len(options) > 0 {
		problems = append(problems, "  fix: `wsl --update` for Microsoft's current kernel, which has all of these; or, with a kernel of your own (`kernel=` in %UserProfile%\\.wslconfig), build it with "+strings.Join(options, ", "))
	}
	if !r.cgroup2 {
		problems = append(problems, "cgroup v2 is not what /sys/fs/cgroup is, and kubelet 1.35 refuses cgroup v1",
			"  fix: remove `cgroups=v1` from the [automount] section of /etc/wsl.conf, or on an older WSL add `kernelCommandLine = cgroup_no_v1=all` under [wsl2] in %UserProfile%\\.wslconfig; then `wsl --shutdown`")
	} else {
		var lacking []string
		for _, c := range kubeletControllers {
			if !slices.Contains(r.controllers, c) {
				lacking = append(lacking, c)
			}
		}
		if len(lacking) > 0 {
			problems = append(problems, fmt.Sprintf("the cgroup v2 controllers %s, which kubelet needs, are not offered at /sys/fs/cgroup (cgroup.controllers: %q)",
				strings.Join(lacking, ", "), strings.Join(r.controllers, " ")),
				"  fix: `wsl --update`; a kernel of your own needs them built in (CONFIG_MEMCG, CONFIG_CGROUP_PIDS, CONFIG_CPUSETS, CONFIG_CGROUP_SCHED)")
		}
	}
	if len(problems) > 0 {
		return warnings, fmt.Errorf("%w (kernel %s):\n  %s", errKernel, r.release, strings.Join(problems, "\n  "))
	}
	return warnings, nil
}
