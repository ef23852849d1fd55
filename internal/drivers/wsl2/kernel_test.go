package wsl2

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

// TestKernelOnThisHost runs the check against this machine's real /proc
// and /sys, the files it reads inside a WSL distribution, and holds its
// findings to what those files show when read another way.
func TestKernelOnThisHost(t *testing.T) {
	r, err := checkKernel(os.DirFS("/"))
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	if r.release != strings.TrimSpace(string(rel)) || r.release == "" {
		t.Errorf("release %q, /proc says %q", r.release, rel)
	}
	byModule := map[string]finding{}
	for _, f := range r.findings {
		byModule[f.module] = f
		t.Logf("%-22s %-9s %s", f.module, f.presence, f.evidence)
	}
	if fsys, err := os.ReadFile("/proc/filesystems"); err == nil && strings.Contains(string(fsys), "\toverlay\n") {
		if f := byModule["overlay"]; f.presence != active {
			t.Errorf("/proc/filesystems lists overlay, the check says %s (%s)", f.presence, f.evidence)
		}
	}
	if _, err := os.Stat("/proc/sys/net/netfilter/nf_conntrack_max"); err == nil && byModule["nf_conntrack"].presence != active {
		t.Errorf("nf_conntrack_max exists, the check says %+v", byModule["nf_conntrack"])
	}
	// The kernel's own config, read here with nothing except a gunzip and
	// a string search: every =y option the check must call active.
	if gz, err := os.ReadFile("/proc/config.gz"); err == nil {
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		var cfg bytes.Buffer
		if _, err := cfg.ReadFrom(zr); err != nil {
			t.Fatal(err)
		}
		for _, f := range r.findings {
			if bytes.Contains(cfg.Bytes(), []byte("\nCONFIG_"+f.config+"=y\n")) && f.presence != active {
				t.Errorf("CONFIG_%s=y in /proc/config.gz, the check says %s (%s)", f.config, f.presence, f.evidence)
			}
			if bytes.Contains(cfg.Bytes(), []byte("\n# CONFIG_"+f.config+" is not set\n")) && f.presence == active {
				t.Errorf("CONFIG_%s is not set in /proc/config.gz, the check says active (%s)", f.config, f.evidence)
			}
		}
		if r.configFile != "/proc/config.gz" {
			t.Errorf("config read from %q", r.configFile)
		}
	}
	_, v2err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	if r.cgroup2 != (v2err == nil) {
		t.Errorf("cgroup v2 %v, but cgroup.controllers: %v", r.cgroup2, v2err)
	}
	_, err = r.verdict()
	if !r.cgroup2 && (!errors.Is(err, errKernel) || !strings.Contains(err.Error(), "kubelet 1.35 refuses cgroup v1") || !strings.Contains(err.Error(), "cgroup_no_v1=all")) {
		t.Errorf("a cgroup v1 host must be refused with the fix: %v", err)
	}
	t.Logf("kernel %s, config %s, cgroup v2 %v %v; verdict: %v", r.release, r.configFile, r.cgroup2, r.controllers, err)
}

// wslKernel returns a WSL 6.18 kernel's files as the check sees them: no
// /proc/config.gz, the modules VHD at /lib/modules/RELEASE with its
// metadata, ip_tables and br_netfilter loaded at boot, cgroup v2 only.
func wslKernel() fstest.MapFS {
	rel := "6.18.33.1-microsoft-standard-WSL2"
	mods := "lib/modules/" + rel + "/"
	var builtin, dep strings.Builder
	for _, m := range []string{"net/netfilter/nf_conntrack", "net/netfilter/nf_nat", "net/netfilter/x_tables", "drivers/net/vxlan/vxlan",
		"drivers/net/veth", "fs/overlayfs/overlay", "net/netfilter/nf_tables"} {
		builtin.WriteString("kernel/" + m + ".ko\n")
	}
	for _, m := range []string{"ipv4/netfilter/ip_tables", "ipv4/netfilter/iptable_filter", "ipv4/netfilter/iptable_nat", "netfilter/nft_compat",
		"netfilter/xt_comment", "netfilter/xt_conntrack", "netfilter/xt_mark", "netfilter/xt_multiport", "netfilter/xt_addrtype",
		"netfilter/xt_statistic", "netfilter/xt_set", "netfilter/ipset/ip_set", "ipv4/netfilter/ipt_rpfilter", "netfilter/xt_MASQUERADE",
		"netfilter/xt_nat", "netfilter/xt_REDIRECT", "ipv4/netfilter/ipt_REJECT", "bridge/br_netfilter", "netfilter/xt_recent",
		"netfilter/nf_conntrack_netlink"} {
		dep.WriteString("kernel/net/" + m + ".ko: kernel/net/netfilter/x_tables.ko\n")
	}
	return fstest.MapFS{
		"proc/sys/kernel/osrelease":                   {Data: []byte(rel + "\n")},
		"proc/filesystems":                            {Data: []byte("nodev\tsysfs\nnodev\tcgroup2\nnodev\toverlay\n\text4\n")},
		"proc/modules":                                {Data: []byte("br_netfilter 32768 0 - Live 0x0000000000000000\nip_tables 32768 0 - Live 0x0000000000000000\n")},
		"proc/sys/net/netfilter/nf_conntrack_max":     {Data: []byte("65536\n")},
		"proc/sys/net/bridge/bridge-nf-call-iptables": {Data: []byte("1\n")},
		mods + "modules.builtin":                      {Data: []byte(builtin.String())},
		mods + "modules.dep":                          {Data: []byte(dep.String())},
		"proc/self/mountinfo":                         {Data: []byte("35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n")},
		"sys/fs/cgroup/cgroup.controllers":            {Data: []byte("cpuset cpu io memory hugetlb pids rdma misc\n")},
		"sys/module/vxlan/parameters/udp_port":        {Data: []byte("4789\n")},
		"sys/module/nf_conntrack/parameters/hashsize": {Data: []byte("16384\n")},
		"sys/module/br_netfilter/refcnt":              {Data: []byte("0\n")},
	}
}

// TestKernelWSL checks that Microsoft's kernel, which has no readable
// config, passes on its module metadata alone.
func TestKernelWSL(t *testing.T) {
	r, err := checkKernel(wslKernel())
	if err != nil {
		t.Fatal(err)
	}
	warns, err := r.verdict()
	if err != nil || len(warns) != 0 {
		t.Errorf("verdict: %v %q", err, warns)
	}
	for _, f := range r.findings {
		want := available
		switch f.module {
		case "overlay", "nf_conntrack", "nf_nat", "x_tables", "vxlan", "veth", "ip_tables", "br_netfilter":
			want = active
		}
		if f.presence != want {
			t.Errorf("%s: %s (%s), want %s", f.module, f.presence, f.evidence, want)
		}
	}
}

// TestKernelRefusals checks, on a custom kernel without VXLAN, with only
// the nftables backend of iptables, an unknown xt_recent, and cgroup v1 or
// a cgroup v2 without the memory controller, that each required gap is
// named with its option and the fix, and that the rest are warnings.
func TestKernelRefusals(t *testing.T) {
	fsys := wslKernel()
	rel := "6.6.36.3-custom"
	fsys["proc/sys/kernel/osrelease"] = &fstest.MapFile{Data: []byte(rel + "\n")}
	delete(fsys, "lib/modules/6.18.33.1-microsoft-standard-WSL2/modules.builtin")
	delete(fsys, "lib/modules/6.18.33.1-microsoft-standard-WSL2/modules.dep")
	delete(fsys, "proc/modules")
	delete(fsys, "sys/module/br_netfilter/refcnt")
	delete(fsys, "sys/module/vxlan/parameters/udp_port")
	delete(fsys, "proc/sys/net/bridge/bridge-nf-call-iptables")
	var cfg bytes.Buffer
	zw := gzip.NewWriter(&cfg)
	zw.Write([]byte("CONFIG_OVERLAY_FS=y\nCONFIG_VETH=y\n# CONFIG_VXLAN is not set\nCONFIG_NF_CONNTRACK=y\nCONFIG_NF_NAT=y\nCONFIG_NETFILTER_XTABLES=y\n" +
		"# CONFIG_IP_NF_IPTABLES is not set\nCONFIG_NFT_COMPAT=y\nCONFIG_NETFILTER_XT_MATCH_COMMENT=y\nCONFIG_NETFILTER_XT_MATCH_CONNTRACK=y\n" +
		"CONFIG_NETFILTER_XT_MARK=y\nCONFIG_NETFILTER_XT_MATCH_MULTIPORT=y\nCONFIG_NETFILTER_XT_MATCH_ADDRTYPE=y\nCONFIG_NETFILTER_XT_MATCH_STATISTIC=y\n" +
		"CONFIG_NETFILTER_XT_SET=y\nCONFIG_IP_SET=y\nCONFIG_IP_NF_MATCH_RPFILTER=y\nCONFIG_NETFILTER_XT_TARGET_MASQUERADE=y\nCONFIG_NETFILTER_XT_NAT=y\n" +
		"CONFIG_NETFILTER_XT_TARGET_REDIRECT=y\nCONFIG_IP_NF_TARGET_REJECT=y\nCONFIG_BRIDGE_NETFILTER=m\nCONFIG_NF_CT_NETLINK=y\n"))
	zw.Close()
	fsys["proc/config.gz"] = &fstest.MapFile{Data: cfg.Bytes()}
	fsys["sys/fs/cgroup/cgroup.controllers"] = &fstest.MapFile{Data: []byte("cpuset cpu io pids\n")}
	r, err := checkKernel(fsys)
	if err != nil {
		t.Fatal(err)
	}
	warns, err := r.verdict()
	if !errors.Is(err, errKernel) {
		t.Fatalf("verdict: %v", err)
	}
	for _, want := range []string{"VXLAN (Calico's overlay) (CONFIG_VXLAN, module vxlan): CONFIG_VXLAN is not set in /proc/config.gz",
		`the cgroup v2 controllers memory, which kubelet needs, are not offered`, "build it with CONFIG_VXLAN\n", "kernel 6.6.36.3-custom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q:\n%v", want, err)
		}
	}
	// iptables on nftables stands in for the legacy tables.
	if strings.Contains(err.Error(), "IP_NF_IPTABLES") {
		t.Errorf("legacy iptables refused though nft_compat is there:\n%v", err)
	}
	joined := strings.Join(warns, "\n")
	for _, want := range []string{"CONFIG_BRIDGE_NETFILTER) is unknown: CONFIG_BRIDGE_NETFILTER=m in /proc/config.gz, but the module is not in /lib/modules",
		"CONFIG_NETFILTER_XT_MATCH_RECENT) is missing", "iptables (legacy) (CONFIG_IP_NF_IPTABLES) is missing"} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings lack %q:\n%s", want, joined)
		}
	}

	fsys["proc/self/mountinfo"] = &fstest.MapFile{Data: []byte("31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n")}
	r, _ = checkKernel(fsys)
	if _, err := r.verdict(); err == nil || !strings.Contains(err.Error(), "cgroups=v1") || r.cgroup2 {
		t.Errorf("cgroup v1: %v", err)
	}
}
