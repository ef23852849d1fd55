package cluster

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restfake "k8s.io/client-go/rest/fake"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/drivers/hyperv"
	"github.com/hwk-dev/hwk/internal/format/isoimage"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/testing/hypervtest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestHyperVUpDown checks `hwk up` and `hwk down` of a Linux control plane
// and a Windows worker on the Hyper-V driver, each through the driver's real
// session code, with one PowerShell start per command.
func TestHyperVUpDown(t *testing.T) {
	// A fake powershell.exe first on PATH answers every script from
	// real-format replies (internal/drivers/hyperv/testdata) and fails what
	// it does not expect. The nodes' side (kubeadm, the Windows join's
	// PowerShell over SSH) is scripted node handles and the API server an
	// in-memory cluster.
	ps := hypervtest.New(t, "up-down.txt")
	u := newUpDown(t, config.DriverHyperV, config.DriverHyperV, config.DriverHyperV, nil)
	dirs, kc, cfg, nodes := u.dirs, u.kc, u.cfg, u.nodes
	cachedVHDX(t, dirs.Cache, "linux-test", cfg.KubernetesVersion, nil)
	cachedVHDX(t, dirs.Cache, "windows-2022-test", cfg.KubernetesVersion, &nodeimage.Windows{Version: cfg.Nodes[1].WindowsVersion, Build: 20348, Locale: "de-DE"})

	// command runs fn as one hwk command would: its own session, driver
	// and provider; it returns how many times PowerShell started.
	command := func(fn func(p *Provider) error) int {
		t.Helper()
		before := len(ps.Starts())
		s := hyperv.NewSession(io.Discard)
		defer s.Close()
		d := hyperv.New(hyperv.Options{Dirs: dirs, Runner: s, Handle: nodes.handle})
		if err := fn(u.provider(d)); err != nil {
			t.Fatalf("%v\nscripts sent:\n%s", err, ps.Requests())
		}
		s.Close()
		return len(ps.Starts()) - before
	}
	ctx := context.Background()
	var res *UpResult
	up := command(func(p *Provider) (err error) {
		res, err = p.Up(ctx, cfg, upOptions)
		return err
	})
	ps.Check(t)
	nodes.check(t)
	if res == nil || res.Context != "hwk-demo" {
		t.Errorf("up: %+v", res)
	}
	scripts := ps.Requests()
	for _, rule := range []string{"preflight", "list, none yet", "address the adapter, before Windows made its interface", "make the switch", "address and NAT", "create demo-cp", "create demo-win-1", "inspect demo-cp", "inspect demo-win-1"} {
		if !strings.Contains(scripts, "# --- "+rule+"\n") {
			t.Errorf("up sent no script of rule %q", rule)
		}
	}
	if got, want := nodes.ran("demo-win-1"), []string{"containerd running", "windows build", "copy", "kubeadm join", "calico network", "restart kubelet"}; strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the Windows node ran %v, want %v", got, want)
	}
	// kubeadm init without CoreDNS (its config, its patch, the kubelet's
	// environment and the drop-in with the Service route copied first),
	// then CoreDNS once calico-node runs.
	if got, want := nodes.ran("demo-cp"), []string{"containerd running", "copy", "copy", "copy", "copy", "kubeadm init", "read the CA", "read admin.conf",
		"calico plugins on the node", "kubectl apply", "kubectl apply", "kubectl apply", "kubeadm init phase addon coredns", "kubeadm init phase upload-config kubeadm", "kubectl apply"}; strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the control plane ran %v, want %v", got, want)
	}
	data, err := os.ReadFile(kc.Explicit)
	if err != nil || !bytes.Contains(data, []byte("https://172.31.250.10:6443")) {
		t.Errorf("kubeconfig: %v\n%s", err, data)
	}
	checkAnswerFiles(t, state.NewStore(dirs).DriverDir("demo", "hyperv"), map[string]string{"demo-cp": "", "demo-win-1": "de-DE"})

	n := len(scripts)
	var found bool
	down := command(func(p *Provider) (err error) {
		found, err = p.Down(ctx, "demo")
		return err
	})
	ps.Check(t)
	if !found {
		t.Error("down found no cluster")
	}
	downScripts := ps.Requests()[n:]
	for _, rule := range []string{"preflight", "list, the cluster", "delete demo-cp", "delete demo-win-1", "delete the network"} {
		if !strings.Contains(downScripts, "# --- "+rule+"\n") {
			t.Errorf("down sent no script of rule %q:\n%s", rule, downScripts)
		}
	}
	if _, err := os.Stat(filepath.Join(dirs.Data, "clusters", "demo")); !os.IsNotExist(err) {
		t.Errorf("down left the cluster's directory: %v", err)
	}
	if up != 1 || down != 1 {
		t.Errorf("PowerShell started %d times for up and %d times for down, want once each; starts:\n%s", up, down, strings.Join(ps.Starts(), "\n"))
	}
	t.Logf("up: %d scripts, down: %d scripts, through %d PowerShell starts", strings.Count(scripts, "# --- "), strings.Count(downScripts, "# --- "), len(ps.Starts()))
}

// checkAnswerFiles checks that in dir each node's seed (NODE/cidata.iso)
// carries an answer file for Windows Setup when locales gives the node a
// language, and none otherwise; each answer file has that language and a
// password of its own, hidden.
func checkAnswerFiles(t *testing.T, dir string, locales map[string]string) {
	t.Helper()
	passwords := map[string]bool{}
	for name, locale := range locales {
		_, files, err := isoimage.Read(filepath.Join(dir, name, "cidata.iso"))
		if err != nil {
			t.Fatal(err)
		}
		answer, ok := files["unattend.xml"]
		if ok != (locale != "") {
			t.Errorf("node %s: an answer file on its seed is %v", name, ok)
			continue
		}
		if !ok {
			continue
		}
		hidden := regexp.MustCompile(`<Value>([A-Za-z0-9+/=]+)</Value>\s*<PlainText>false</PlainText>`).FindSubmatch(answer)
		if !bytes.Contains(answer, []byte("<UILanguage>"+locale+"</UILanguage>")) || hidden == nil || passwords[string(hidden[1])] {
			t.Errorf("node %s: answer file\n%s", name, answer)
			continue
		}
		passwords[string(hidden[1])] = true
	}
}

// cachedVHDX puts a node image with a VHDX disk in the cache.
func cachedVHDX(t *testing.T, cache, name, version string, win *nodeimage.Windows) {
	t.Helper()
	cachedImage(t, cache, name, version, win, nodeimage.FormatVHDX, "disk.vhdx", func(path string) int64 {
		disk := append([]byte("vhdxfile"), make([]byte, 1024)...)
		if err := os.WriteFile(path, disk, 0o644); err != nil {
			t.Fatal(err)
		}
		return int64(len(disk))
	})
}

// scriptedNodes are the nodes' side of up: handles whose transport
// answers each command kubeadm's steps run, and fails the test on any
// other.
type scriptedNodes struct {
	t       *testing.T
	ca      []byte
	admin   []byte
	mu      sync.Mutex
	runs    map[string][]string
	strange []string
}

func newScriptedNodes(t *testing.T) *scriptedNodes {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	admin := clientcmdapi.NewConfig()
	admin.Clusters["kubernetes"] = &clientcmdapi.Cluster{Server: "https://172.31.250.10:6443", CertificateAuthorityData: ca}
	admin.AuthInfos["kubernetes-admin"] = &clientcmdapi.AuthInfo{Token: "admin-token"}
	admin.Contexts["kubernetes-admin@kubernetes"] = &clientcmdapi.Context{Cluster: "kubernetes", AuthInfo: "kubernetes-admin"}
	admin.CurrentContext = "kubernetes-admin@kubernetes"
	data, err := clientcmd.Write(*admin)
	if err != nil {
		t.Fatal(err)
	}
	return &scriptedNodes{t: t, ca: ca, admin: data, runs: map[string][]string{}}
}

func (s *scriptedNodes) handle(name string, os config.OS, ip netip.Addr) (*node.Node, error) {
	run := transport(func(ctx context.Context, cmd node.Cmd) error { return s.run(name, os, cmd) })
	if os == config.Windows {
		// As over SSH: commands, and files by SFTP.
		return node.New(name, os, sftpTransport{run, func(r io.Reader, p string) error { return s.write(name, r, p) }}), nil
	}
	return node.New(name, os, run), nil
}

type transport func(ctx context.Context, cmd node.Cmd) error

func (f transport) Run(ctx context.Context, cmd node.Cmd) error { return f(ctx, cmd) }

type sftpTransport struct {
	transport
	write func(r io.Reader, p string) error
}

func (t sftpTransport) WriteFile(_ context.Context, r io.Reader, p string, _ fs.FileMode) error {
	return t.write(r, p)
}

// write takes a file for node name: only the join configuration is
// expected.
func (s *scriptedNodes) write(name string, r io.Reader, p string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p != "/C:/hwk/kubeadm-join.yaml" {
		s.strange = append(s.strange, fmt.Sprintf("%s: a file at %s", name, p))
		return fmt.Errorf("sftp: %s: permission denied", p)
	}
	s.runs[name] = append(s.runs[name], "copy")
	_, err := io.Copy(io.Discard, r)
	return err
}

// run answers one command on node name.
func (s *scriptedNodes) run(name string, os config.OS, cmd node.Cmd) error {
	what, out := s.answer(name, os, cmd)
	s.mu.Lock()
	defer s.mu.Unlock()
	if what == "" {
		s.strange = append(s.strange, fmt.Sprintf("%s: %q", name, cmd.Args))
		return &node.ExitError{Code: 127}
	}
	s.runs[name] = append(s.runs[name], what)
	if cmd.Stdin != nil {
		if _, err := io.Copy(io.Discard, cmd.Stdin); err != nil {
			return err
		}
	}
	_, err := io.WriteString(cmd.Stdout, out)
	return err
}

// answer names a command and gives its output; "" is a command no step
// of up should run.
func (s *scriptedNodes) answer(name string, os config.OS, cmd node.Cmd) (string, string) {
	args := cmd.Args
	if os == config.Windows {
		if len(args) != 8 || args[0] != "powershell.exe" || args[6] != "-EncodedCommand" {
			return "", ""
		}
		script, _ := node.ScriptOf(args)
		scripts := bootstrap.Scripts()
		switch {
		case script == bootstrap.WindowsBootScript:
			// Windows reports its NetBIOS name, in upper case.
			return "containerd running", strings.ToUpper(name) + "\r\n"
		case script == scripts["windowsBuildScript"]:
			return "windows build", "20348\r\n"
		case strings.Contains(script, `& 'C:\k\kubeadm.exe' join --config 'C:\hwk\kubeadm-join.yaml'`):
			return "kubeadm join", "joined: kubelet is Running\r\n"
		case script == scripts["calicoNetworkScript"]:
			return "calico network", "yes\r\n"
		case script == scripts["restartKubeletScript"]:
			return "restart kubelet", "Running\r\n"
		case script == bootstrap.RouteScript(netip.MustParseAddr("172.31.250.10"), netip.MustParseAddr("172.31.250.1")):
			return "route to the control plane", ""
		}
		return "", ""
	}
	line := strings.Join(args, " ")
	switch {
	case line == "systemctl is-active --quiet containerd":
		return "containerd running", ""
	case len(args) == 3 && args[0] == "/bin/sh" && strings.Contains(args[2], `cat > "$tmp"`):
		return "copy", ""
	case len(args) > 4 && args[0] == "sh" && strings.HasPrefix(args[2], `kubeadm init "$@"`) &&
		strings.HasPrefix(strings.Join(args[4:], " "), "--config /etc/hwk/kubeadm-init.yaml --skip-phases addon/coredns,kubelet-finalize "):
		return "kubeadm init", "Your Kubernetes control-plane has initialized successfully!\n"
	case strings.HasPrefix(line, "kubeadm init phase addon coredns --config /etc/hwk/kubeadm-init.yaml"):
		return "kubeadm init phase addon coredns", "[addons] Applied essential addon: CoreDNS\n"
	case strings.HasPrefix(line, "kubeadm init phase upload-config kubeadm --config /etc/hwk/kubeadm-init.yaml"):
		return "kubeadm init phase upload-config kubeadm", "[upload-config] Storing the configuration used in ConfigMap \"kubeadm-config\" in the \"kube-system\" Namespace\n"
	case line == "cat /etc/kubernetes/pki/ca.crt":
		return "read the CA", string(s.ca)
	case line == "cat /etc/kubernetes/admin.conf":
		return "read admin.conf", string(s.admin)
	case strings.HasPrefix(line, "kubectl --kubeconfig /etc/kubernetes/admin.conf apply --server-side"):
		return "kubectl apply", ""
	case line == "grep -qxF "+bootstrap.CalicoCNIImage+" opt/cni/bin/calico /"+images.RootFilesRecord:
		// The node image's record of the files it took from its images
		// (grep -q prints nothing when the line is there).
		return "calico plugins on the node", ""
	}
	return "", ""
}

func (s *scriptedNodes) ran(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[name]
}

func (s *scriptedNodes) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.strange {
		t.Errorf("a node was asked to run what no step of up runs: %s", c)
	}
}

// inMemoryCluster returns an API server in memory for cfg's cluster, every
// node and system workload Ready, whose /readyz answers ok.
func inMemoryCluster(cfg *config.Cluster) func(*rest.Config) (kubernetes.Interface, error) {
	return func(*rest.Config) (kubernetes.Interface, error) {
		ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
		var objs []runtime.Object
		for _, n := range cfg.Nodes {
			objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}})
		}
		sel := func(name string) *metav1.LabelSelector {
			return &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": name}}
		}
		for _, name := range []string{"calico-node", "kube-proxy", bootstrap.CalicoNodeWindows, bootstrap.KubeProxyWindows} {
			objs = append(objs, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}, Spec: appsv1.DaemonSetSpec{Selector: sel(name)},
				Status: appsv1.DaemonSetStatus{NumberReady: 1, DesiredNumberScheduled: 1}})
		}
		for _, name := range []string{"calico-kube-controllers", "coredns"} {
			objs = append(objs, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}, Spec: appsv1.DeploymentSpec{Selector: sel(name)},
				Status: appsv1.DeploymentStatus{ReadyReplicas: 1}})
		}
		return readyz{fake.NewClientset(objs...)}, nil
	}
}

// readyz is the in-memory clientset with a discovery client whose REST
// client answers /readyz (the fake's has no REST client).
type readyz struct{ *fake.Clientset }

func (r readyz) Discovery() discovery.DiscoveryInterface {
	return readyzDiscovery{r.Clientset.Discovery()}
}

type readyzDiscovery struct{ discovery.DiscoveryInterface }

func (readyzDiscovery) RESTClient() rest.Interface {
	return &restfake.RESTClient{
		NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
		Client: restfake.CreateHTTPClient(func(req *http.Request) (*http.Response, error) {
			if req.URL.Path != "/readyz" {
				return &http.Response{StatusCode: http.StatusNotFound, Body: io.NopCloser(strings.NewReader("not found")), Request: req}, nil
			}
			return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
		}),
	}
}

// TestHyperVUpNeedsMemory checks that on a host with less memory available
// than the nodes' VMs start with, up refuses with the figures and what to
// do before it makes anything, and that on TestHyperVUpDown's laptop it
// goes on.
func TestHyperVUpNeedsMemory(t *testing.T) {
	// Why these figures: Dynamic Memory's startup is 2 GiB for the Linux
	// control plane and 3 GiB for the Windows worker; TestHyperVUpDown's is
	// the 16 GB laptop (7 GiB free) where 10 GiB of static memory did not
	// fit.
	ps := hypervtest.New(t, "no-memory.txt")
	u := newUpDown(t, config.DriverHyperV, config.DriverHyperV, config.DriverHyperV, nil)
	cachedVHDX(t, u.dirs.Cache, "linux-test", u.cfg.KubernetesVersion, nil)
	cachedVHDX(t, u.dirs.Cache, "windows-2022-test", u.cfg.KubernetesVersion, &nodeimage.Windows{Version: u.cfg.Nodes[1].WindowsVersion, Build: 20348})
	s := hyperv.NewSession(io.Discard)
	defer s.Close()
	p := u.provider(hyperv.New(hyperv.Options{Dirs: u.dirs, Runner: s, Handle: u.nodes.handle}))
	p.hostMemory = func() (uint64, uint64, error) { return 16 << 30, 4 << 30, nil }
	_, err := p.Up(context.Background(), u.cfg, upOptions)
	want := "the cluster's VMs need 5.0 GiB of memory to start (demo-cp 2.0 GiB, demo-win-1 3.0 GiB), and the host has 4.0 GiB available of 16.0 GiB\n  fix: close programs"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	s.Close()
	ps.Check(t)
	if exists, err := p.store().Exists("demo"); err != nil || exists {
		t.Errorf("the refused cluster exists: %v %v", exists, err)
	}
}
