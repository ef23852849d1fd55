package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/internal/logs"
	"github.com/hwk-dev/hwk/internal/testing/pscheck"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// testCluster returns the default cluster with one Linux and one Windows
// worker, its Linux nodes taken for containers (as on the docker driver),
// so that one rendering shows both kinds of node.
func testCluster(t *testing.T) Cluster {
	t.Helper()
	cfg := &config.Cluster{Nodes: []config.Node{
		{Role: config.ControlPlane},
		{OS: config.Linux},
		{OS: config.Windows, Driver: config.DriverLibvirt},
	}}
	config.SetDefaults(cfg, config.Host{OS: "linux", Drivers: map[config.OS]string{config.Linux: config.DriverDocker}})
	if err := config.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	c, err := FromConfig(cfg, "abcdef.0123456789abcdef", func(n config.Node) bool { return n.OS == config.Linux })
	if err != nil {
		t.Fatal(err)
	}
	c.ExtraSANs = []string{"127.0.0.1", "hwk.example"}
	return c
}

const testHash = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it); got:\n%s", name, got)
	}
}

// docs decodes a multi-document YAML stream into generic objects.
func docs(t *testing.T, stream []byte) []map[string]any {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var out []map[string]any
	for {
		d, err := r.Read()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(d, &m); err != nil {
			t.Fatalf("%v in\n%s", err, d)
		}
		if m != nil {
			out = append(out, m)
		}
	}
}

// get walks a decoded object by keys and list indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func find(t *testing.T, ds []map[string]any, kind, name string) map[string]any {
	t.Helper()
	for _, d := range ds {
		if d["kind"] == kind && (name == "" || get(d, "metadata", "name") == name) {
			return d
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return nil
}

func TestInitConfig(t *testing.T) {
	c := testCluster(t)
	out, err := InitConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "kubeadm-init.yaml", out)
	ds := docs(t, out)
	init := find(t, ds, "InitConfiguration", "")
	if get(init, "bootstrapTokens", 0, "token") != c.Token || get(init, "localAPIEndpoint", "advertiseAddress") != "172.31.250.10" {
		t.Errorf("init: %v", init)
	}
	if taints, ok := get(init, "nodeRegistration", "taints").([]any); !ok || len(taints) != 0 {
		t.Errorf("the only control plane must be untainted, taints = %v", get(init, "nodeRegistration", "taints"))
	}
	if get(init, "nodeRegistration", "kubeletExtraArgs", 0, "value") != "172.31.250.10" {
		t.Errorf("node-ip: %v", get(init, "nodeRegistration", "kubeletExtraArgs"))
	}
	if get(init, "patches", "directory") != PatchesDir {
		t.Errorf("init patches: %v, want the directory Init writes CoreDNS's patch to", get(init, "patches"))
	}
	cc := find(t, ds, "ClusterConfiguration", "")
	if cc["encryptionAlgorithm"] != "ECDSA-P256" {
		t.Errorf("encryptionAlgorithm %v", cc["encryptionAlgorithm"])
	}
	for _, path := range [][]any{{"apiServer"}, {"controllerManager"}, {"scheduler"}, {"etcd", "local"}} {
		if env := get(cc, append(path, "extraEnvs", 0)...); get(env, "name") != "GOGC" || get(env, "value") != "50" {
			t.Errorf("%v extraEnvs: %v, want GOGC=50", path, get(cc, append(path, "extraEnvs")...))
		}
	}
	if get(cc, "networking", "podSubnet") != "10.244.0.0/16" || get(cc, "networking", "serviceSubnet") != "10.96.0.0/12" || get(cc, "controlPlaneEndpoint") != "172.31.250.10:6443" {
		t.Errorf("cluster config: %v", cc)
	}
	sans, _ := get(cc, "apiServer", "certSANs").([]any)
	for _, want := range []string{"172.31.250.10", "127.0.0.1", "hwk.example", "hwk-cp"} {
		if !slices.Contains(sans, any(want)) {
			t.Errorf("certSANs %v lack %s", sans, want)
		}
	}
	if len(sans) != len(slices.Compact(slices.Sorted(slices.Values(toStrings(sans))))) {
		t.Errorf("certSANs repeat a name: %v", sans)
	}
	kc := find(t, ds, "KubeletConfiguration", "")
	if kc["cgroupDriver"] != "cgroupfs" || kc["failCgroupV1"] != false {
		t.Errorf("kubelet config: %v", kc)
	}
}

func toStrings(l []any) []string {
	out := make([]string, len(l))
	for i, v := range l {
		out[i], _ = v.(string)
	}
	return out
}

func TestJoinConfigs(t *testing.T) {
	c := testCluster(t)
	linux, win := c.Workers[0], c.Workers[1]
	lj, err := JoinConfig(c, linux, testHash)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "kubeadm-join-linux.yaml", lj)
	wj, err := JoinConfig(c, win, testHash)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "kubeadm-join-windows.yaml", wj)

	l := docs(t, lj)[0]
	if get(l, "nodeRegistration", "criSocket") != LinuxCRISocket || get(l, "discovery", "bootstrapToken", "caCertHashes", 0) != testHash {
		t.Errorf("linux join: %v", l)
	}
	if get(l, "nodeRegistration", "ignorePreflightErrors") == nil {
		t.Errorf("a container node must skip the host checks it cannot pass")
	}
	w := docs(t, wj)[0]
	if get(w, "nodeRegistration", "criSocket") != WindowsCRISocket || get(w, "nodeRegistration", "name") != "hwk-win-1" {
		t.Errorf("windows join: %v", w)
	}
	if get(w, "nodeRegistration", "taints", 0, "key") != "os" || get(w, "nodeRegistration", "taints", 0, "effect") != "NoSchedule" {
		t.Errorf("windows taint: %v", get(w, "nodeRegistration", "taints"))
	}
	if get(w, "nodeRegistration", "ignorePreflightErrors") != nil {
		t.Errorf("a VM node must run every preflight check")
	}
	if get(w, "discovery", "bootstrapToken", "apiServerEndpoint") != "172.31.250.10:6443" {
		t.Errorf("endpoint: %v", get(w, "discovery"))
	}
	if _, err := JoinConfig(c, linux, ""); err == nil {
		t.Error("a join without the CA hash must fail")
	}
}

func TestNewToken(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)
	a, b := NewToken(), NewToken()
	if !re.MatchString(a) || !re.MatchString(b) || a == b {
		t.Errorf("tokens %q %q", a, b)
	}
}

func TestCACertHash(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := CACertHash(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	spki, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(spki)
	if want := "sha256:" + hex.EncodeToString(sum[:]); got != want {
		t.Errorf("hash %s, want %s", got, want)
	}
	if _, err := CACertHash([]byte("not pem")); err == nil {
		t.Error("garbage must not hash")
	}
}

func TestCalicoManifest(t *testing.T) {
	c := testCluster(t)
	c.VXLANVNI = 4100
	out, err := CalicoManifest(c, true)
	if err != nil {
		t.Fatal(err)
	}
	controllers, err := CalicoControllersManifest()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := images.Manifests.ReadFile("manifests/calico-vxlan.yaml")
	ds, cs, upstream := docs(t, out), docs(t, controllers), docs(t, raw)
	// The two manifests are upstream's documents, each once, plus the
	// endpoint ConfigMap.
	if len(ds)+len(cs) != len(upstream)+1 {
		t.Fatalf("%d + %d documents, upstream has %d (+1, the endpoint)", len(ds), len(cs), len(upstream))
	}
	if len(cs) != 2 || find(t, cs, "Deployment", "calico-kube-controllers") == nil || find(t, cs, "PodDisruptionBudget", "calico-kube-controllers") == nil {
		t.Errorf("calico-kube-controllers manifest: %d documents, want its Deployment and PodDisruptionBudget", len(cs))
	}
	for _, d := range ds {
		if get(d, "metadata", "name") == "calico-kube-controllers" && (d["kind"] == "Deployment" || d["kind"] == "PodDisruptionBudget") {
			t.Errorf("the Calico manifest still has calico-kube-controllers' %s", d["kind"])
		}
	}
	kc := get(find(t, cs, "Deployment", "calico-kube-controllers"), "spec", "template", "spec", "containers", 0)
	if get(kc, "readinessProbe", "periodSeconds") != float64(2) || get(kc, "readinessProbe", "exec", "command", 0) != "/usr/bin/check-status" {
		t.Errorf("calico-kube-controllers readiness: %v", get(kc, "readinessProbe"))
	}
	ep := find(t, ds, "ConfigMap", "kubernetes-services-endpoint")
	if ds[0]["kind"] != "ConfigMap" || get(ds[0], "metadata", "name") != "kubernetes-services-endpoint" {
		t.Errorf("the first document is %v %v: the endpoint must exist before calico-node starts", ds[0]["kind"], get(ds[0], "metadata", "name"))
	}
	if get(ep, "metadata", "namespace") != "kube-system" || get(ep, "data", "KUBERNETES_SERVICE_HOST") != "172.31.250.10" || get(ep, "data", "KUBERNETES_SERVICE_PORT") != "6443" {
		t.Errorf("kubernetes-services-endpoint: %v", ep)
	}
	node := find(t, ds, "DaemonSet", "calico-node")
	// install-cni and calico-node read the endpoint from that ConfigMap.
	for _, list := range []string{"initContainers", "containers"} {
		for _, c := range get(node, "spec", "template", "spec", list).([]any) {
			if n := get(c, "name"); n == "install-cni" || n == "calico-node" {
				if get(c, "envFrom", 0, "configMapRef", "name") != "kubernetes-services-endpoint" {
					t.Errorf("%s does not read kubernetes-services-endpoint: %v", n, get(c, "envFrom"))
				}
			}
		}
	}
	env := map[string]any{}
	for _, c := range get(node, "spec", "template", "spec", "containers").([]any) {
		if get(c, "name") != "calico-node" {
			continue
		}
		for _, e := range get(c, "env").([]any) {
			if v, ok := get(e, "value").(string); ok {
				env[get(e, "name").(string)] = v
			}
		}
	}
	for k, v := range map[string]string{
		"CALICO_IPV4POOL_CIDR": "10.244.0.0/16", "CALICO_IPV4POOL_VXLAN": "Always", "CALICO_IPV4POOL_IPIP": "Never",
		"CALICO_IPV4POOL_BLOCK_SIZE": "26", "FELIX_VXLANVNI": "4100", "FELIX_VXLANPORT": "4789",
		"IP_AUTODETECTION_METHOD": "kubernetes-internal-ip", "DATASTORE_TYPE": "kubernetes", "GOGC": "50",
	} {
		if env[k] != v {
			t.Errorf("calico-node %s = %v, want %s", k, env[k], v)
		}
	}
	for _, c := range get(node, "spec", "template", "spec", "containers").([]any) {
		if get(c, "name") == "calico-node" {
			probe := get(c, "readinessProbe")
			if get(probe, "httpGet", "path") != "/readiness" || get(probe, "httpGet", "port") != float64(9099) || get(probe, "periodSeconds") != float64(1) || get(probe, "timeoutSeconds") != float64(1) || get(probe, "exec") != nil {
				t.Errorf("calico-node readiness: %v", probe)
			}
			// Liveness asks Felix's endpoint too, rather than starting a
			// calico-node process every ten seconds.
			live := get(c, "livenessProbe")
			if get(live, "httpGet", "path") != "/liveness" || get(live, "httpGet", "port") != float64(9099) || get(live, "httpGet", "host") != "localhost" || get(live, "periodSeconds") != float64(10) || get(live, "failureThreshold") != float64(6) || get(live, "exec") != nil {
				t.Errorf("calico-node liveness: %v", live)
			}
			// start_runit's steps, less two services.
			script, _ := get(c, "command", 2).(string)
			if get(c, "command", 0) != "/bin/sh" || get(c, "command", 1) != "-c" ||
				!strings.HasPrefix(script, "env > /etc/envvars\n/etc/rc.local ||") ||
				!strings.Contains(script, "rm -rf /etc/service/enabled/node-status-reporter /etc/service/enabled/monitor-addresses\n") ||
				!strings.HasSuffix(script, "exec runsvdir -P /etc/service/enabled\n") {
				t.Errorf("calico-node command: %v", get(c, "command"))
			}
		}
	}
	for _, c := range get(node, "spec", "template", "spec", "initContainers").([]any) {
		if get(c, "name") != "install-cni" {
			continue
		}
		// The node image has the plugins (components.yaml, fromImages).
		found := false
		for _, e := range get(c, "env").([]any) {
			if get(e, "name") == "UPDATE_CNI_BINARIES" {
				found = get(e, "value") == "false"
			}
		}
		if !found {
			t.Errorf("install-cni does not keep the node's CNI plugins (UPDATE_CNI_BINARIES=false): %v", get(c, "env"))
		}
		if get(c, "image") != CalicoCNIImage {
			t.Errorf("install-cni runs %v, CalicoCNIImage says %s", get(c, "image"), CalicoCNIImage)
		}
	}
	// Without the node's plugins, install-cni copies them as upstream's does.
	plain, err := CalicoManifest(c, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range get(find(t, docs(t, plain), "DaemonSet", "calico-node"), "spec", "template", "spec", "initContainers").([]any) {
		env, _ := get(c, "env").([]any)
		for _, e := range env {
			if get(e, "name") == "UPDATE_CNI_BINARIES" {
				t.Errorf("%s: UPDATE_CNI_BINARIES=%v though the nodes lack the plugins", get(c, "name"), get(e, "value"))
			}
		}
	}
	if cm := find(t, ds, "ConfigMap", "calico-config"); get(cm, "data", "calico_backend") != "vxlan" {
		t.Errorf("backend %v, want vxlan (no BGP)", get(cm, "data", "calico_backend"))
	}
	ipam := docs(t, IPAMConfigManifest())[0]
	if ipam["kind"] != "IPAMConfig" || get(ipam, "spec", "strictAffinity") != true || get(ipam, "metadata", "name") != "default" {
		t.Errorf("IPAMConfig %v", ipam)
	}
}

// imagesOf lists every container image the objects' pod templates use.
func imagesOf(ds []map[string]any) []string {
	var out []string
	for _, d := range ds {
		for _, list := range []string{"initContainers", "containers"} {
			cs, _ := get(d, "spec", "template", "spec", list).([]any)
			for _, c := range cs {
				if img, ok := get(c, "image").(string); ok && !slices.Contains(out, img) {
					out = append(out, img)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestLinuxImagesArePreloaded checks that every image the Calico manifest
// runs is one the Linux node image preloads (images/linux.yaml), so up pulls
// nothing.
func TestLinuxImagesArePreloaded(t *testing.T) {
	out, err := CalicoManifest(testCluster(t), false)
	if err != nil {
		t.Fatal(err)
	}
	recipe, err := images.Recipe.ReadFile("linux.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Images []struct {
			Name, Tag string
			Sandbox   bool
		} `json:"images"`
	}
	if err := yaml.Unmarshal(recipe, &r); err != nil {
		t.Fatal(err)
	}
	var preloaded, calico []string
	for _, i := range r.Images {
		preloaded = append(preloaded, i.Name+":"+i.Tag)
		if strings.HasPrefix(i.Name, "quay.io/calico/") {
			calico = append(calico, i.Name+":"+i.Tag)
		}
	}
	controllers, err := CalicoControllersManifest()
	if err != nil {
		t.Fatal(err)
	}
	used := imagesOf(append(docs(t, out), docs(t, controllers)...))
	for _, img := range used {
		if !slices.Contains(preloaded, img) {
			t.Errorf("calico-vxlan.yaml runs %s, which images/linux.yaml does not preload", img)
		}
	}
	sort.Strings(calico)
	if !slices.Equal(calico, used) {
		t.Errorf("images/linux.yaml preloads Calico images %v, the manifest runs %v", calico, used)
	}
}

func TestWindowsManifests(t *testing.T) {
	c := testCluster(t)
	out, err := WindowsManifests(c)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "windows-components.yaml", out)
	ds := docs(t, out)
	for _, name := range []string{"calico-node-windows", "kube-proxy-windows"} {
		d := find(t, ds, "DaemonSet", name)
		pod := get(d, "spec", "template", "spec")
		if get(pod, "nodeSelector", "kubernetes.io/os") != "windows" || get(pod, "hostNetwork") != true ||
			get(pod, "securityContext", "windowsOptions", "hostProcess") != true {
			t.Errorf("%s is not a Windows HostProcess DaemonSet: %v", name, pod)
		}
	}
	cm := find(t, ds, "ConfigMap", "calico-windows-config")
	var cni map[string]any
	if err := yaml.Unmarshal([]byte(get(cm, "data", "cni_network_config").(string)), &cni); err != nil {
		t.Fatalf("CNI config is not JSON: %v", err)
	}
	plugin := get(cni, "plugins", 0)
	if get(plugin, "DNS", "Nameservers", 0) != "10.96.0.10" || get(plugin, "kubernetes", "k8s_api_root") != "https://172.31.250.10:6443" ||
		get(plugin, "vxlan_vni") != float64(4096) || get(plugin, "policies", 0, "Value", "ExceptionList", 0) != "10.96.0.0/12" {
		t.Errorf("CNI config %v", plugin)
	}
	proxy := find(t, ds, "ConfigMap", "kube-proxy-windows")
	script := get(proxy, "data", "start.ps1").(string)
	var code []string // the script without its comments, which cite upstream's flags
	for _, l := range strings.Split(script, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			code = append(code, l)
		}
	}
	if strings.Contains(strings.Join(code, "\n"), "feature-gates") || !strings.Contains(script, "--enable-dsr=true") || !strings.Contains(script, "--source-vip") {
		t.Errorf("start.ps1 must pass DSR and the source VIP and no feature gates:\n%s", script)
	}
	kubeProxyStartOrder(t, strings.Join(code, "\n"))
	for v, build := range config.WindowsBuilds {
		rc := find(t, ds, "RuntimeClass", RuntimeClassName(v))
		if rc["handler"] != "runhcs-wcow-process" || get(rc, "scheduling", "nodeSelector", "node.kubernetes.io/windows-build") != build ||
			get(rc, "scheduling", "tolerations", 0, "key") != "os" {
			t.Errorf("RuntimeClass %v", rc)
		}
	}
}

// kubeProxyStartOrder checks kube-proxy's start script (without
// comments): HNS through Windows' HostNetworkingService module, as the
// join and the log export read it (issue 37: one decision for the whole
// tree), imported before any HNS call, and every stale policy list
// removed before kube-proxy starts.
func kubeProxyStartOrder(t *testing.T, code string) {
	t.Helper()
	at := func(s string) int {
		i := strings.Index(code, s)
		if i < 0 {
			t.Errorf("start.ps1 lacks %q", s)
		}
		return i
	}
	imp := at(`Microsoft.PowerShell.Core\Import-Module HostNetworkingService`)
	wait := at(`while (-not (Get-Networks |`)
	remove := at(`Remove-PolicyLists $policyLists`)
	start := at(`& $kubeProxy @arguments`)
	if !(imp < wait && wait < remove && remove < start) {
		t.Errorf("start.ps1's order: HNS module imported %d, network wait %d, policy lists removed %d, kube-proxy started %d", imp, wait, remove, start)
	}
	for _, other := range []string{"hns.psm1", `hns\`} {
		if strings.Contains(code, other) {
			t.Errorf("start.ps1 uses %s: the tree reads HNS through Windows' module only", other)
		}
	}
	for _, fn := range []string{"Get-Networks", "Get-Endpoints", "Get-PolicyLists", "Remove-PolicyLists"} {
		if strings.Count(code, "function "+fn) != 1 {
			t.Errorf("start.ps1 must define %s once", fn)
		}
	}
}

// TestWindowsImagesListed checks that images/windows.yaml names exactly the
// images the Windows manifests run.
func TestWindowsImagesListed(t *testing.T) {
	c := testCluster(t)
	out, err := WindowsManifests(c)
	if err != nil {
		t.Fatal(err)
	}
	data, err := images.Manifests.ReadFile("windows.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Images []struct {
			Name, Tag string
			Sandbox   bool
		} `json:"images"`
	}
	if err := yaml.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, i := range list.Images {
		if i.Sandbox {
			continue // containerd's, in no manifest
		}
		listed = append(listed, i.Name+":"+strings.ReplaceAll(i.Tag, "{{.KubernetesVersion}}", c.KubernetesVersion))
	}
	sort.Strings(listed)
	if used := imagesOf(docs(t, out)); !slices.Equal(used, listed) {
		t.Errorf("Windows manifests run %v, images/windows.yaml lists %v", used, listed)
	}
}

func TestWindowsJoinScript(t *testing.T) {
	s := WindowsJoinScript(`C:\hwk\it's.yaml`)
	if !strings.Contains(s, `--config 'C:\hwk\it''s.yaml'`) || !strings.Contains(s, `& 'C:\k\kubeadm.exe' join`) {
		t.Errorf("script:\n%s", s)
	}
	golden(t, "windows-join.ps1", []byte(WindowsJoinScript(WindowsConfigDir+`\kubeadm-join.yaml`)))
}

func TestAddresses(t *testing.T) {
	c := testCluster(t)
	if c.DNSServiceIP() != netip.MustParseAddr("10.96.0.10") || c.APIServiceIP() != netip.MustParseAddr("10.96.0.1") {
		t.Errorf("dns %s api %s", c.DNSServiceIP(), c.APIServiceIP())
	}
}

// TestPowerShellSyntax parses the PowerShell hwk runs on Windows nodes
// (see internal/testing/pscheck).
func TestPowerShellSyntax(t *testing.T) {
	start, err := images.Manifests.ReadFile("manifests/kube-proxy-windows-start.ps1")
	if err != nil {
		t.Fatal(err)
	}
	pscheck.Check(t, map[string]string{
		"kube-proxy-start.ps1": string(start),
		"join.ps1":             WindowsJoinScript(WindowsConfigDir + `\kubeadm-join.yaml`),
		"kubelet-log.ps1":      kubeletLogScript(10),
	})
}

// TestWindowsLogsAreThePodLogs checks that every pod log the join's
// diagnostics (windowsLogs) and hwk logs (logs.WindowsItems) read is that
// of a container the Windows DaemonSets run, and that none is a Calico log file.
func TestWindowsLogsAreThePodLogs(t *testing.T) {
	// Why: on a HostProcess node Calico and kube-proxy log to their
	// containers' stdout, and nothing may turn Calico's file logging into
	// the place to look (issue 26: CALICO_DISABLE_FILE_LOGGING, which
	// Calico's Windows node never reads).
	out, err := WindowsManifests(testCluster(t))
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`(?m)^[^#]*CALICO_DISABLE_FILE_LOGGING`).Match(out) {
		t.Error("the Windows manifests set CALICO_DISABLE_FILE_LOGGING, which only Calico's Linux startup reads")
	}
	// namespace_daemonset/container, and namespace_daemonset/* for any.
	containers := map[string]bool{}
	for _, d := range docs(t, out) {
		if d["kind"] != "DaemonSet" {
			continue
		}
		ds := fmt.Sprintf("%s_%s/", get(d, "metadata", "namespace"), get(d, "metadata", "name"))
		containers[ds+"*"] = true
		for _, c := range get(d, "spec", "template", "spec", "containers").([]any) {
			containers[ds+get(c, "name").(string)] = true
		}
	}
	podLog := regexp.MustCompile(`^C:\\var\\log\\pods\\([a-z0-9-]+)_([a-z0-9-]+)-\*\\([a-z0-9-]+|\*)\\\*\.log$`)
	var paths []string
	for _, l := range windowsLogs {
		paths = append(paths, l.path)
	}
	for _, it := range logs.WindowsItems {
		if i := strings.Index(it.Script, `C:\var\log\pods\`); i >= 0 {
			paths = append(paths, it.Script[i:i+strings.IndexByte(it.Script[i:], '\'')])
		}
	}
	checked := 0
	for _, p := range paths {
		if strings.Contains(p, `CalicoWindows\logs`) || strings.Contains(p, `\var\log\calico\`) && !strings.Contains(p, `\cni\`) {
			t.Errorf("%s is a Calico log file, which a HostProcess node does not write", p)
		}
		m := podLog.FindStringSubmatch(p)
		if m == nil {
			continue
		}
		checked++
		if !containers[m[1]+"_"+m[2]+"/"+m[3]] {
			t.Errorf("%s: no DaemonSet %s in %s with container %s (there are %v)", p, m[2], m[1], m[3], slices.Sorted(maps.Keys(containers)))
		}
	}
	if checked < 4 {
		t.Errorf("checked %d pod-log paths of %q, want the join's and hwk logs' Calico and kube-proxy ones", checked, paths)
	}
}

// TestKubeletServiceRoute checks that the kubelet's drop-in makes the
// cluster's Service range unreachable, masked as the route wants it, and a
// failure to add it does not keep the kubelet from starting.
func TestKubeletServiceRoute(t *testing.T) {
	got := kubeletServiceRoute(netip.MustParsePrefix("10.97.3.1/16"))
	if !strings.Contains(got, "\n[Service]\nExecStartPre=-/usr/sbin/ip route replace unreachable 10.97.0.0/16\n") {
		t.Errorf("drop-in:\n%s", got)
	}
}

// rootTransport runs a command on this machine, with the node's absolute
// paths under root: real grep on real files.
type rootTransport struct{ root string }

func (r rootTransport) Run(ctx context.Context, cmd node.Cmd) error {
	args := slices.Clone(cmd.Args)
	for i, a := range args {
		if strings.HasPrefix(a, "/") {
			args[i] = filepath.Join(r.root, a)
		}
	}
	c := exec.CommandContext(ctx, args[0], args[1:]...)
	c.Stdout, c.Stderr = cmd.Stdout, cmd.Stderr
	return c.Run()
}

// TestNodeHasCalicoPlugins checks that install-cni keeps a node's Calico
// plugins only when its image recorded them from the very install-cni image
// the manifest runs.
func TestNodeHasCalicoPlugins(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("runs the Linux node's grep on this host, and a Windows host has none")
	}
	for _, tc := range []struct {
		name, record string
		want         bool
	}{
		{"this Calico", "quay.io/calico/cni:v3.31.0 opt/cni/bin/calico\nquay.io/calico/cni:v3.31.0 opt/cni/bin/calico-ipam\n", true},
		{"another Calico", "quay.io/calico/cni:v3.30.2 opt/cni/bin/calico\n", false},
		{"only calico-ipam", "quay.io/calico/cni:v3.31.0 opt/cni/bin/calico-ipam\n", false},
		{"an older image", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.record != "" {
				p := filepath.Join(root, images.RootFilesRecord)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(tc.record), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := NodeHasCalicoPlugins(context.Background(), node.New("n", config.Linux, rootTransport{root})); got != tc.want {
				t.Errorf("NodeHasCalicoPlugins = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestKubeletRotatingCert checks that kubeletRotatingCert leaves
// kubelet.conf, as kubeadm init writes it on the control plane (less its
// data), naming the kubelet's rotating certificate file, everything else as
// it was, and changes nothing while the kubelet has not stored one.
func TestKubeletRotatingCert(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("runs the Linux node's shell script with sh, which a Windows host lacks")
	}
	const conf = `apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: Q0EgZGF0YQ==
    server: https://172.31.250.10:6443
  name: demo
contexts:
- context:
    cluster: demo
    user: system:node:demo-cp
  name: system:node:demo-cp@demo
current-context: system:node:demo-cp@demo
kind: Config
preferences: {}
users:
- name: system:node:demo-cp
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
`
	for _, stored := range []bool{true, false} {
		dir := t.TempDir()
		kc, pem := filepath.Join(dir, "kubelet.conf"), filepath.Join(dir, "kubelet-client-current.pem")
		if err := os.WriteFile(kc, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		if stored {
			if err := os.WriteFile(pem, []byte("cert and key"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("sh", "-c", "conf=$1 pem=$2\n"+kubeletRotatingCert, "sh", kc, pem)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("stored %v: %v\n%s", stored, err, out)
		}
		got, err := clientcmd.LoadFromFile(kc)
		if err != nil {
			t.Fatal(err)
		}
		u := got.AuthInfos["system:node:demo-cp"]
		if !stored {
			if data, _ := os.ReadFile(kc); string(data) != conf {
				t.Errorf("with no stored certificate kubelet.conf changed:\n%s", data)
			}
			continue
		}
		if u == nil || u.ClientCertificate != pem || u.ClientKey != pem || len(u.ClientCertificateData) != 0 || len(u.ClientKeyData) != 0 {
			t.Errorf("kubelet.conf's user: %+v, want both files %s and no data", u, pem)
		}
		if c := got.Clusters["demo"]; c == nil || c.Server != "https://172.31.250.10:6443" || string(c.CertificateAuthorityData) != "CA data" {
			t.Errorf("kubelet.conf's cluster changed: %+v", c)
		}
	}
}
