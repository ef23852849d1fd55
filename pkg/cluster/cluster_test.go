package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/kubeconfig"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/actions"
	"github.com/hwk-dev/hwk/pkg/node"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// memDriver keeps machines and networks in memory. Its machines never
// boot (Node fails), so an up on it stops at "Creating nodes" with
// everything made so far in place: what down must clean.
type memDriver struct {
	mu       sync.Mutex
	machines map[string]drivers.MachineSpec
	networks map[string]bool
	deleted  []string
	images   []string
	// subnets are the networks made, by cluster; foreign are networks
	// of the driver's that hwk did not make.
	subnets map[string]netip.Prefix
	foreign []netip.Prefix
	// calls are the Stop and Start calls, in order ("stop NAME").
	calls []string
}

func newMem() *memDriver {
	return &memDriver{machines: map[string]drivers.MachineSpec{}, networks: map[string]bool{}, images: []string{"hwk/node:v1.35.4"}}
}

var errNoBoot = errors.New("memDriver machines do not boot")

func (m *memDriver) Name() string                              { return config.DriverDocker }
func (m *memDriver) GuestOSes() []config.OS                    { return []config.OS{config.Linux} }
func (m *memDriver) Preflight(context.Context) (string, error) { return "mem", nil }
func (m *memDriver) EnsureNetwork(_ context.Context, n drivers.Network) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.networks[n.Cluster] = true
	if m.subnets == nil {
		m.subnets = map[string]netip.Prefix{}
	}
	m.subnets[n.Cluster] = n.Subnet
	return nil
}
func (m *memDriver) CheckSubnet(_ context.Context, n drivers.Network) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for c, p := range m.subnets {
		if c != n.Cluster && p.Overlaps(n.Subnet) {
			return &drivers.SubnetInUseError{Subnet: n.Subnet, By: "mem network " + c}
		}
	}
	for _, p := range m.foreign {
		if p.Overlaps(n.Subnet) {
			return &drivers.SubnetInUseError{Subnet: n.Subnet, By: "mem network foreign"}
		}
	}
	return nil
}
func (m *memDriver) DeleteNetwork(_ context.Context, cluster string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.networks, cluster)
	delete(m.subnets, cluster)
	return nil
}
func (m *memDriver) Create(_ context.Context, s drivers.MachineSpec) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.machines[s.Cluster+"/"+s.Name] = s
	return nil
}
func (m *memDriver) Start(_ context.Context, r drivers.Ref) error { return m.call("start", r) }
func (m *memDriver) Stop(_ context.Context, r drivers.Ref) error  { return m.call("stop", r) }
func (m *memDriver) SetAutostart(_ context.Context, r drivers.Ref, on bool) error {
	return m.call(fmt.Sprintf("autostart=%v", on), r)
}
func (m *memDriver) call(verb string, r drivers.Ref) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, verb+" "+r.Name)
	return nil
}
func (m *memDriver) Delete(_ context.Context, r drivers.Ref) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.machines[r.Cluster+"/"+r.Name]; ok {
		m.deleted = append(m.deleted, r.Name)
	}
	delete(m.machines, r.Cluster+"/"+r.Name)
	return nil
}
func (m *memDriver) Inspect(_ context.Context, r drivers.Ref) (drivers.Machine, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.machines[r.Cluster+"/"+r.Name]
	if !ok {
		return drivers.Machine{Ref: r, State: drivers.StateMissing}, nil
	}
	return drivers.Machine{Ref: r, Role: s.Role, OS: s.OS, State: drivers.StateRunning, IP: s.IP}, nil
}
func (m *memDriver) List(_ context.Context, cluster string) ([]drivers.Machine, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []drivers.Machine
	for _, s := range m.machines {
		if s.Cluster == cluster {
			out = append(out, drivers.Machine{Ref: s.Ref, Role: s.Role, OS: s.OS, State: drivers.StateRunning})
		}
	}
	return out, nil
}
func (m *memDriver) has(cluster string) bool {
	ms, _ := m.List(context.Background(), cluster)
	return len(ms) > 0
}
func (m *memDriver) HostEndpoint(context.Context, drivers.Ref, uint16) (netip.AddrPort, error) {
	return netip.AddrPort{}, errNoBoot
}
func (m *memDriver) Node(context.Context, drivers.Ref) (*node.Node, error) { return nil, errNoBoot }
func (m *memDriver) CheckImage(_ context.Context, image string) error {
	if !slices.Contains(m.images, image) {
		return &drivers.ImageMissingError{Driver: "mem", Image: image, Build: "build it"}
	}
	return nil
}

func testProvider(t *testing.T, d drivers.Driver) (*Provider, string) {
	t.Helper()
	home := t.TempDir()
	kc := filepath.Join(home, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["mine"] = &clientcmdapi.Cluster{Server: "https://example.invalid"}
	cfg.AuthInfos["me"] = &clientcmdapi.AuthInfo{Token: "secret"}
	cfg.Contexts["mine"] = &clientcmdapi.Context{Cluster: "mine", AuthInfo: "me"}
	cfg.CurrentContext = "mine"
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	return &Provider{
		// A host with no interface on hwk's range, whatever this one has.
		hostInterface:   func(netip.Prefix) string { return "" },
		hostMemory:      laptop,
		Registry:        drivers.NewRegistry(d),
		Dirs:            state.Dirs{Config: filepath.Join(home, "config"), Data: filepath.Join(home, "data"), Cache: filepath.Join(home, "cache")},
		KubeconfigPaths: kubeconfig.Paths{Explicit: kc},
	}, kc
}

func testConfig(t *testing.T, name string, nodes ...config.Node) *config.Cluster {
	t.Helper()
	c := &config.Cluster{Name: name, Nodes: nodes}
	config.SetDefaults(c, config.Host{OS: "linux", Drivers: map[config.OS]string{config.Linux: config.DriverDocker}})
	if err := config.Validate(c); err != nil {
		t.Fatal(err)
	}
	return c
}

var fastTimeouts = Timeouts{NodeBoot: 300 * time.Millisecond}

// TestHalfMadeClusterGoesDown checks that an up that stops after making
// machines leaves a record; down deletes every machine (workers before the
// control plane), the network and the directory, and a second down finds
// nothing.
func TestHalfMadeClusterGoesDown(t *testing.T) {
	d := newMem()
	p, _ := testProvider(t, d)
	cfg := testConfig(t, "half", config.Node{Role: config.ControlPlane}, config.Node{}, config.Node{})
	_, err := p.Up(context.Background(), cfg, UpOptions{Timeouts: fastTimeouts})
	var se *StepError
	if !errors.As(err, &se) || se.Step != (actions.Nodes{}).Name() || !se.Made {
		t.Fatalf("up error %v, want a StepError at Creating nodes", err)
	}
	if !strings.Contains(err.Error(), "hwk down --name half") || !errors.Is(err, errNoBoot) {
		t.Errorf("the error does not say how to clean up, or hides its cause: %v", err)
	}
	if len(d.machines) != 3 || !d.networks["half"] {
		t.Fatalf("up made %d machines, network %v", len(d.machines), d.networks)
	}
	halfDir, _ := p.store().ClusterDir("half")
	// Windows has no mode bits (Go shows 0666, or 0444 for a read-only
	// file); there they are private by the ACL that the user's profile,
	// which holds hwk's directories, passes down.
	unix := runtime.GOOS != "windows"
	if info, err := os.Stat(halfDir); err != nil || (unix && info.Mode().Perm() != 0o700) {
		t.Fatalf("cluster directory: %v %v", info, err)
	}
	if st, err := os.Stat(filepath.Join(halfDir, "bootstrap-token")); err != nil || (unix && st.Mode().Perm() != 0o600) {
		t.Errorf("bootstrap token file: %v %v", st, err)
	}

	// Up again reports it is half-made and offers --recreate, which deletes
	// it (control plane last) and makes it again.
	_, err = p.Up(context.Background(), cfg, UpOptions{Timeouts: fastTimeouts})
	var ee *actions.ExistsError
	if !errors.As(err, &ee) || !ee.HalfMade || !strings.Contains(err.Error(), "--recreate") || !strings.Contains(err.Error(), "hwk down --name half") {
		t.Fatalf("up over a half-made cluster: %v", err)
	}
	_, err = p.Up(context.Background(), cfg, UpOptions{Timeouts: fastTimeouts, Recreate: true})
	if !errors.As(err, &se) || se.Step != (actions.Nodes{}).Name() {
		t.Fatalf("up --recreate: %v, want it to get as far as the first up", err)
	}
	if len(d.deleted) != 3 || d.deleted[2] != "half-cp" || len(d.machines) != 3 {
		t.Errorf("--recreate deleted %v and left %d machines", d.deleted, len(d.machines))
	}
	d.deleted = nil

	found, err := p.Down(context.Background(), "half")
	if err != nil || !found {
		t.Fatalf("down = %v, %v", found, err)
	}
	if len(d.machines) != 0 || d.networks["half"] {
		t.Errorf("down left machines %v, networks %v", d.machines, d.networks)
	}
	if d.deleted[len(d.deleted)-1] != "half-cp" {
		t.Errorf("deleted %v: the control plane must go last", d.deleted)
	}
	if ok, _ := p.store().Exists("half"); ok {
		t.Error("down left the cluster directory")
	}
	if found, err := p.Down(context.Background(), "half"); err != nil || found {
		t.Errorf("second down = %v, %v; want false, nil", found, err)
	}
	assertNoLocks(t, p)
}

// assertNoLocks checks that no lock file outlives its cluster.
func assertNoLocks(t *testing.T, p *Provider) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(p.Dirs.Data, "locks"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".lock")
		if ok, _ := p.store().Exists(name); !ok {
			t.Errorf("lock file %s is left for cluster %s, which does not exist", e.Name(), name)
		}
	}
}

// TestUpRefusesWhatExists checks that a cluster that exists, or a machine
// left by a crashed hwk, stops up before it changes anything.
func TestUpRefusesWhatExists(t *testing.T) {
	d := newMem()
	p, _ := testProvider(t, d)
	if _, err := p.store().Create("taken"); err != nil {
		t.Fatal(err)
	}
	_, err := p.Up(context.Background(), testConfig(t, "taken", config.Node{Role: config.ControlPlane}), UpOptions{})
	var ee *actions.ExistsError
	if !errors.As(err, &ee) || len(d.machines) != 0 || len(d.networks) != 0 {
		t.Errorf("up over an existing cluster: %v (machines %v)", err, d.machines)
	}

	d.machines["orphan/orphan-cp"] = drivers.MachineSpec{Ref: drivers.Ref{Cluster: "orphan", Name: "orphan-cp"}}
	_, err = p.Up(context.Background(), testConfig(t, "orphan", config.Node{Role: config.ControlPlane}), UpOptions{})
	if !errors.As(err, &ee) || ee.Leftover == "" {
		t.Errorf("up over a leftover machine: %v", err)
	}
	if ok, _ := p.store().Exists("orphan"); ok {
		t.Error("a refused up made a cluster directory")
	}
	// Down finds the leftover without a record, by asking the drivers.
	if found, err := p.Down(context.Background(), "orphan"); err != nil || !found || len(d.machines) != 0 {
		t.Errorf("down of an orphan = %v, %v, machines %v", found, err, d.machines)
	}
}

// TestUpChecksImagesFirst checks that a missing Windows image, or a missing
// Linux image, fails the first step and makes nothing.
func TestUpChecksImagesFirst(t *testing.T) {
	d := newMem()
	p, _ := testProvider(t, d)
	win := testConfig(t, "win", config.Node{Role: config.ControlPlane}, config.Node{OS: config.Windows, Driver: config.DriverHyperV})
	_, err := p.Up(context.Background(), win, UpOptions{})
	var nw *actions.NoWindowsImageError
	if !errors.As(err, &nw) || !strings.Contains(err.Error(), "hwk up --windows-workers 0") {
		t.Errorf("up with Windows and no image: %v", err)
	}
	var se *StepError
	if !errors.As(err, &se) || se.Made {
		t.Errorf("a preflight failure must not claim to have made anything: %#v", se)
	}

	d.images = nil
	_, err = p.Up(context.Background(), testConfig(t, "noimg", config.Node{Role: config.ControlPlane}), UpOptions{})
	// This build pins no published image, so nothing can be pulled: the
	// error names every other way to get one.
	var ni *nodeimage.NoImageError
	if !errors.As(err, &ni) || !strings.Contains(err.Error(), "hwk node-image build linux --formats docker") ||
		!strings.Contains(err.Error(), "hwk node-image load -i FILE") || !strings.Contains(err.Error(), "--image REGISTRY/REPO:TAG") {
		t.Errorf("up without a node image: %v", err)
	}
	if len(d.machines) != 0 || len(d.networks) != 0 {
		t.Errorf("a failed preflight made %v %v", d.machines, d.networks)
	}
	if list, _ := p.List(); len(list) != 0 {
		t.Errorf("clusters after failed preflights: %v", list)
	}
	assertNoLocks(t, p)
}

// TestDownRemovesOnlyItsContext checks that down takes hwk-NAME out of the
// kubeconfig and leaves the user's entries alone.
func TestDownRemovesOnlyItsContext(t *testing.T) {
	d := newMem()
	p, kc := testProvider(t, d)
	e := kubeconfig.Entry{Cluster: &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}, AuthInfo: &clientcmdapi.AuthInfo{Token: "t"}}
	if err := kubeconfig.Merge(p.KubeconfigPaths, "gone", e, false); err != nil {
		t.Fatal(err)
	}
	found, err := p.Down(context.Background(), "gone")
	if err != nil || !found {
		t.Fatalf("down = %v, %v", found, err)
	}
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Contexts["hwk-gone"]; ok {
		t.Error("context hwk-gone is still there")
	}
	if cfg.CurrentContext != "mine" || cfg.AuthInfos["me"].Token != "secret" {
		t.Errorf("the user's kubeconfig changed: %+v", cfg)
	}
}

func TestStepErrorMessages(t *testing.T) {
	interrupted := &StepError{Step: "Creating nodes", Cluster: "x", Err: errors.New("Post ...: interrupt signal received"), Made: true, Interrupted: true}
	if got := interrupted.Detail(); !strings.HasPrefix(got, "interrupted") || !strings.Contains(got, "hwk down --name x") {
		t.Errorf("interrupted: %q", got)
	}
	failed := &StepError{Step: "Joining workers", Cluster: "x", Err: errors.New("kubeadm join failed"), Made: true}
	if got := failed.Error(); !strings.HasPrefix(got, "Joining workers: kubeadm join failed") || !strings.Contains(got, "for inspection") {
		t.Errorf("failed: %q", got)
	}
	early := &StepError{Step: "Checking the host", Cluster: "x", Err: errors.New("no driver")}
	if got := early.Error(); strings.Contains(got, "hwk down") {
		t.Errorf("nothing was made, yet the error says to clean up: %q", got)
	}
}

func TestHostKubeconfig(t *testing.T) {
	admin := clientcmdapi.NewConfig()
	admin.Clusters["kubernetes"] = &clientcmdapi.Cluster{Server: "https://172.31.250.10:6443", CertificateAuthorityData: []byte("ca")}
	admin.AuthInfos["kubernetes-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")}
	admin.Contexts["kubernetes-admin@kubernetes"] = &clientcmdapi.Context{Cluster: "kubernetes", AuthInfo: "kubernetes-admin"}
	admin.CurrentContext = "kubernetes-admin@kubernetes"
	data, err := clientcmd.Write(*admin)
	if err != nil {
		t.Fatal(err)
	}
	got, err := actions.HostKubeconfig(data, "demo", "https://127.0.0.1:32771")
	if err != nil {
		t.Fatal(err)
	}
	c := got.Clusters["hwk-demo"]
	if got.CurrentContext != "hwk-demo" || c == nil || c.Server != "https://127.0.0.1:32771" || string(c.CertificateAuthorityData) != "ca" ||
		string(got.AuthInfos["hwk-demo"].ClientKeyData) != "key" || len(got.Clusters) != 1 {
		t.Errorf("host kubeconfig %+v", got)
	}
}

// slowMem is a memDriver that emulates its CPU.
type slowMem struct{ *memDriver }

func (slowMem) Emulated() bool { return true }

// TestEmulatedDriverWaitsLonger checks that a driver without hardware
// acceleration gets a warning and longer waits.
func TestEmulatedDriverWaitsLonger(t *testing.T) {
	p, _ := testProvider(t, slowMem{newMem()})
	var log strings.Builder
	p.Log = slog.New(slog.NewTextHandler(&log, nil))
	cfg := testConfig(t, "slow", config.Node{Role: config.ControlPlane})
	_, err := p.Up(context.Background(), cfg, UpOptions{Timeouts: fastTimeouts})
	if err == nil || !strings.Contains(err.Error(), "did not start its container runtime within 1.2s") {
		t.Errorf("up error %v, want the node boot wait 4 times 300ms", err)
	}
	if !strings.Contains(log.String(), `level=WARN msg="driver docker: mem; up waits 4 times longer for each step"`) {
		t.Errorf("no warning logged:\n%s", log.String())
	}
	_, _ = p.Down(context.Background(), "slow")
}

// TestSideBySideSubnets checks that clusters whose configs name no subnet
// each get the first free /24 (skipping other clusters' and the driver's
// foreign networks), their nodes move with it, a named subnet that another
// cluster has is refused before anything is made, and a deleted cluster's
// subnet is free again.
func TestSideBySideSubnets(t *testing.T) {
	d := newMem()
	d.foreign = []netip.Prefix{netip.MustParsePrefix("172.31.251.0/24")}
	p, _ := testProvider(t, d)
	up := func(name string, subnet string) (*config.Cluster, error) {
		c := &config.Cluster{Name: name, Nodes: []config.Node{{Role: config.ControlPlane}, {}}, Networking: config.Networking{NodeSubnet: subnet}}
		config.SetDefaults(c, config.Host{OS: "linux", Drivers: map[config.OS]string{config.Linux: config.DriverDocker}})
		if err := config.Validate(c); err != nil {
			t.Fatal(err)
		}
		_, err := p.Up(context.Background(), c, UpOptions{Timeouts: fastTimeouts})
		return c, err
	}
	a, _ := up("a", "")
	b, _ := up("b", "")
	if a.Networking.NodeSubnet != "172.31.250.0/24" || b.Networking.NodeSubnet != "172.31.252.0/24" {
		t.Fatalf("a on %s, b on %s; want 172.31.250.0/24 and 172.31.252.0/24 (251 is taken)", a.Networking.NodeSubnet, b.Networking.NodeSubnet)
	}
	if got := d.machines["b/b-cp"].IP.String(); got != "172.31.252.10" || d.subnets["b"].String() != "172.31.252.0/24" {
		t.Errorf("b's control plane at %s on network %s", got, d.subnets["b"])
	}
	if rec, err := p.record("b"); err != nil || rec.Nodes[1].IP != "172.31.252.11" {
		t.Errorf("b's record does not hold the chosen addresses: %v %v", rec, err)
	}

	_, err := up("c", "172.31.250.128/25")
	var se *StepError
	if !errors.As(err, &se) || se.Step != (actions.Preflight{}).Name() || se.Made ||
		!strings.Contains(err.Error(), "overlaps the node network of hwk cluster a (172.31.250.0/24)") {
		t.Fatalf("up on a's subnet: %v", err)
	}
	if strings.Contains(err.Error(), "hwk down") || strings.Contains(err.Error(), " rm ") {
		t.Errorf("the refusal advises removing another cluster: %v", err)
	}
	if d.networks["c"] || d.has("c") {
		t.Error("a refused up made something")
	}

	if _, err := p.Down(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	// What an up killed before it made anything leaves: a reservation,
	// no directory, nobody holding the lock. It holds nothing back.
	if err := p.store().ReserveSubnet("ghost", netip.MustParsePrefix("172.31.250.0/24")); err != nil {
		t.Fatal(err)
	}
	e, _ := up("e", "")
	if e.Networking.NodeSubnet != "172.31.250.0/24" {
		t.Errorf("after a's down, e is on %s; want a's old 172.31.250.0/24", e.Networking.NodeSubnet)
	}
	if res, _ := p.store().Subnets(); res["ghost"].IsValid() {
		t.Errorf("the stale reservation is still there: %v", res)
	}
	for _, n := range []string{"b", "e"} {
		if _, err := p.Down(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(p.Dirs.Data, "subnets")); !os.IsNotExist(err) {
		t.Errorf("subnet reservations or their lock left after every down (%v)", err)
	}
	// hwk doctor's probe finds the same subnet up would, and leaves
	// nothing behind.
	probe := &config.Cluster{Name: "probe", Nodes: []config.Node{{Role: config.ControlPlane}}}
	config.SetDefaults(probe, config.Host{OS: "linux", Drivers: map[config.OS]string{config.Linux: config.DriverDocker}})
	if got, err := p.ProbeSubnet(context.Background(), probe); err != nil || got.String() != "172.31.250.0/24" {
		t.Errorf("ProbeSubnet = %s, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(p.Dirs.Data, "subnets")); !os.IsNotExist(err) {
		t.Errorf("ProbeSubnet left its lock (%v)", err)
	}
	assertNoLocks(t, p)
}

// TestStopOrder checks that stop takes the workers down before the control
// plane and deletes nothing; start of a cluster without a kubeconfig (its
// up never got past kubeadm init) reports it and starts nothing; both
// refuse a cluster that does not exist.
func TestStopOrder(t *testing.T) {
	d := newMem()
	p, _ := testProvider(t, d)
	cfg := testConfig(t, "st", config.Node{Role: config.ControlPlane}, config.Node{}, config.Node{})
	cfg.Autostart = true
	if _, err := p.Up(context.Background(), cfg, UpOptions{Timeouts: fastTimeouts}); err == nil {
		t.Fatal("up on machines that never boot succeeded")
	}
	if err := p.Stop(context.Background(), "st"); err != nil {
		t.Fatal(err)
	}
	// Each node's autostart goes off once it has stopped (VirtualBox
	// changes no setting of a running VM), so a host restart does not
	// bring back what hwk stop stopped.
	if len(d.calls) != 6 || d.calls[4] != "stop st-cp" || d.calls[5] != "autostart=false st-cp" {
		t.Errorf("stop calls %v: the control plane must go last", d.calls)
	}
	for _, w := range []string{"st-linux-1", "st-linux-2"} {
		if off, stop := slices.Index(d.calls, "autostart=false "+w), slices.Index(d.calls, "stop "+w); stop < 0 || off < stop {
			t.Errorf("stop calls %v: %s's autostart must go off after it stops", d.calls, w)
		}
	}
	if len(d.machines) != 3 || len(d.deleted) != 0 {
		t.Errorf("stop deleted something: machines %v, deleted %v", d.machines, d.deleted)
	}
	d.calls = nil
	if _, err := p.Start(context.Background(), "st", Timeouts{}); err == nil || !strings.Contains(err.Error(), "has no kubeconfig yet") || len(d.calls) != 0 {
		t.Errorf("start without a kubeconfig: %v, calls %v", err, d.calls)
	}
	var nf *NotFoundError
	if err := p.Stop(context.Background(), "nope"); !errors.As(err, &nf) {
		t.Errorf("stop of a missing cluster: %v", err)
	}
	if _, err := p.Start(context.Background(), "nope", Timeouts{}); !errors.As(err, &nf) {
		t.Errorf("start of a missing cluster: %v", err)
	}
	if _, err := p.Down(context.Background(), "st"); err != nil {
		t.Fatal(err)
	}
	assertNoLocks(t, p)
}
