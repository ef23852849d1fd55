package kubeconfig

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// existingA is a kubeconfig as users have them: several clusters, users
// and contexts, an exec plugin, extensions and preferences.
const existingA = `apiVersion: v1
kind: Config
current-context: prod
preferences:
  colors: true
clusters:
- name: prod
  cluster:
    server: https://prod.example:6443
    certificate-authority-data: cHJvZC1jYQ==
- name: staging
  cluster:
    server: https://staging.example:6443
    insecure-skip-tls-verify: true
users:
- name: prod-admin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: cloud-login
      args: [token, --cluster, prod]
      interactiveMode: Never
- name: staging-user
  user:
    token: c3RhZ2luZy10b2tlbg
contexts:
- name: prod
  context:
    cluster: prod
    user: prod-admin
    namespace: payments
- name: staging
  context:
    cluster: staging
    user: staging-user
`

const existingB = `apiVersion: v1
kind: Config
clusters:
- name: kind-dev
  cluster:
    server: https://127.0.0.1:41234
users:
- name: kind-dev
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
contexts:
- name: kind-dev
  context:
    cluster: kind-dev
    user: kind-dev
`

func entry(server string) Entry {
	return Entry{
		Cluster:  &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: []byte("hwk-ca")},
		AuthInfo: &clientcmdapi.AuthInfo{ClientCertificateData: []byte("hwk-cert"), ClientKeyData: []byte("hwk-key")},
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func loadFile(t *testing.T, path string) *clientcmdapi.Config {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return stripOrigins(cfg)
}

// withoutHwk returns cfg less the given hwk context's entries and, if it was
// the hwk one, the current context: what must be exactly as before.
func withoutHwk(cfg *clientcmdapi.Config, name string) *clientcmdapi.Config {
	out := cfg.DeepCopy()
	delete(out.Clusters, name)
	delete(out.AuthInfos, name)
	delete(out.Contexts, name)
	if out.CurrentContext == name {
		out.CurrentContext = ""
	}
	return out
}

func assertMode(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Windows: Chmod sets only the read-only attribute; the kubeconfig has
	// its directory's inherited ACL, as kubectl's does: no mode to check.
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
}

func assertHwk(t *testing.T, cfg *clientcmdapi.Config, name, server string) {
	t.Helper()
	c, u, x := cfg.Clusters[name], cfg.AuthInfos[name], cfg.Contexts[name]
	if c == nil || u == nil || x == nil {
		t.Fatalf("%s entries missing: cluster %v user %v context %v", name, c != nil, u != nil, x != nil)
	}
	if c.Server != server || string(u.ClientKeyData) != "hwk-key" || x.Cluster != name || x.AuthInfo != name {
		t.Errorf("%s entries wrong: server %s context %+v", name, c.Server, x)
	}
}

func TestMergeIntoExistingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	write(t, path, existingA)
	t.Setenv("KUBECONFIG", path)
	before := loadFile(t, path)

	if err := Merge(Paths{}, "demo", entry("https://127.0.0.1:40001"), false); err != nil {
		t.Fatal(err)
	}
	after := loadFile(t, path)
	assertHwk(t, after, "hwk-demo", "https://127.0.0.1:40001")
	if !reflect.DeepEqual(withoutHwk(after, "hwk-demo"), before) {
		t.Errorf("other entries changed\nbefore %+v\nafter  %+v", before, after)
	}
	if after.CurrentContext != "prod" {
		t.Errorf("current-context changed to %q without being asked", after.CurrentContext)
	}
	assertMode(t, path)

	// Merging again replaces, and setCurrent switches the context.
	if err := Merge(Paths{}, "demo", entry("https://127.0.0.1:40002"), true); err != nil {
		t.Fatal(err)
	}
	after = loadFile(t, path)
	assertHwk(t, after, "hwk-demo", "https://127.0.0.1:40002")
	if after.CurrentContext != "hwk-demo" {
		t.Errorf("current-context = %q, want hwk-demo", after.CurrentContext)
	}
	if len(after.Contexts) != 3 {
		t.Errorf("contexts: %v", after.Contexts)
	}

	// Remove takes out exactly what Merge put in, and unsets the current
	// context it had set.
	if err := Remove(Paths{}, "demo"); err != nil {
		t.Fatal(err)
	}
	after = loadFile(t, path)
	before.CurrentContext = ""
	if !reflect.DeepEqual(after, before) {
		t.Errorf("after Remove\n got %+v\nwant %+v", after, before)
	}
	assertMode(t, path)
}

func TestKubeconfigList(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	a := filepath.Join(dir, "a")
	b := filepath.Join(dir, "b")
	write(t, a, existingA)
	write(t, b, existingB)
	t.Setenv("KUBECONFIG", strings.Join([]string{missing, b, a}, string(os.PathListSeparator)))
	rawA, _ := os.ReadFile(a)
	beforeB := loadFile(t, b)

	// kubectl's rule: new entries go to the first file that exists (b);
	// a missing file is not created, and a is not touched.
	if err := Merge(Paths{}, "demo", entry("https://172.31.250.10:6443"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("%s was created", missing)
	}
	if raw, _ := os.ReadFile(a); !bytes.Equal(raw, rawA) {
		t.Errorf("%s changed", a)
	}
	afterB := loadFile(t, b)
	assertHwk(t, afterB, "hwk-demo", "https://172.31.250.10:6443")
	if !reflect.DeepEqual(withoutHwk(afterB, "hwk-demo"), beforeB) {
		t.Errorf("other entries of %s changed", b)
	}
	assertMode(t, b)

	// Asked to, the current context is set where the list takes it from:
	// b has none, so a's (the first one set) changes, and only that line.
	if err := Merge(Paths{}, "demo", entry("https://172.31.250.10:6443"), true); err != nil {
		t.Fatal(err)
	}
	merged, err := clientcmd.NewDefaultClientConfigLoadingRules().Load()
	if err != nil {
		t.Fatal(err)
	}
	if merged.CurrentContext != "hwk-demo" {
		t.Errorf("merged current-context = %q", merged.CurrentContext)
	}
	wantA := loadFile(t, a)
	wantA.CurrentContext = "prod"
	beforeA, _ := clientcmd.Load(rawA)
	if !reflect.DeepEqual(withoutHwk(wantA, "hwk-demo"), withoutHwk(stripOrigins(beforeA), "hwk-demo")) {
		t.Errorf("%s changed beyond its current-context", a)
	}
	assertMode(t, a)

	// A stale copy in a later file is removed too; files without hwk
	// entries stay byte for byte.
	cfgA := loadFile(t, a)
	e := entry("https://old:6443")
	cfgA.Clusters["hwk-demo"], cfgA.AuthInfos["hwk-demo"] = e.Cluster, e.AuthInfo
	cfgA.Contexts["hwk-demo"] = &clientcmdapi.Context{Cluster: "hwk-demo", AuthInfo: "hwk-demo"}
	if err := clientcmd.WriteToFile(*cfgA, a); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	write(t, other, existingB)
	t.Setenv("KUBECONFIG", strings.Join([]string{missing, b, a, other}, string(os.PathListSeparator)))
	if err := Remove(Paths{}, "demo"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a, b} {
		cfg := loadFile(t, p)
		if holds(cfg, "hwk-demo") || cfg.CurrentContext == "hwk-demo" {
			t.Errorf("%s still has hwk-demo", p)
		}
		assertMode(t, p)
	}
	if got := loadFile(t, b); !reflect.DeepEqual(got, beforeB) {
		t.Errorf("%s is not back to how it was", b)
	}
	if raw, _ := os.ReadFile(other); string(raw) != existingB {
		t.Errorf("%s was rewritten", other)
	}
}

// stripOrigins clears what loading records about where an entry came
// from, so configs compare by content.
func stripOrigins(cfg *clientcmdapi.Config) *clientcmdapi.Config {
	for _, c := range cfg.Clusters {
		c.LocationOfOrigin = ""
	}
	for _, u := range cfg.AuthInfos {
		u.LocationOfOrigin = ""
	}
	for _, c := range cfg.Contexts {
		c.LocationOfOrigin = ""
	}
	return cfg
}

func TestMergeCreatesPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new", "config")
	if err := Merge(Paths{Explicit: path}, "demo", entry("https://127.0.0.1:1"), true); err != nil {
		t.Fatal(err)
	}
	assertMode(t, path)
	cfg := loadFile(t, path)
	assertHwk(t, cfg, "hwk-demo", "https://127.0.0.1:1")
	if cfg.CurrentContext != "hwk-demo" {
		t.Errorf("current-context %q", cfg.CurrentContext)
	}

	got, err := Get(Paths{Explicit: path}, "demo")
	if err != nil {
		t.Fatal(err)
	}
	assertHwk(t, got, "hwk-demo", "https://127.0.0.1:1")
	if _, err := Get(Paths{Explicit: path}, "other"); err == nil {
		t.Error("Get of an unknown cluster succeeded")
	}
}

func TestBrokenFileStopsEverything(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	bad := filepath.Join(dir, "bad")
	write(t, good, existingB)
	write(t, bad, "clusters: [this is: not a kubeconfig")
	t.Setenv("KUBECONFIG", good+string(os.PathListSeparator)+bad)
	err := Merge(Paths{}, "demo", entry("https://x:1"), true)
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("want an error naming %s, got %v", bad, err)
	}
	if raw, _ := os.ReadFile(good); string(raw) != existingB {
		t.Errorf("%s was written although %s is broken", good, bad)
	}
}

func TestHeldLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	write(t, path, existingB)
	write(t, path+".lock", "")
	defer func(d time.Duration) { lockWait = d }(lockWait)
	lockWait = 100 * time.Millisecond
	err := Merge(Paths{Explicit: path}, "demo", entry("https://x:1"), false)
	if err == nil || !strings.Contains(err.Error(), path+".lock") {
		t.Fatalf("want an error naming the lock file, got %v", err)
	}
	if raw, _ := os.ReadFile(path); string(raw) != existingB {
		t.Error("file written while locked")
	}
	if _, err := os.Stat(path + ".lock"); err != nil {
		t.Error("someone else's lock file was removed")
	}
}

func TestEntryFrom(t *testing.T) {
	admin := `apiVersion: v1
kind: Config
current-context: kubernetes-admin@kubernetes
clusters:
- name: kubernetes
  cluster: {server: "https://172.31.250.10:6443", certificate-authority-data: aHdrLWNh}
users:
- name: kubernetes-admin
  user: {client-certificate-data: aHdrLWNlcnQ=, client-key-data: aHdrLWtleQ==}
contexts:
- name: kubernetes-admin@kubernetes
  context: {cluster: kubernetes, user: kubernetes-admin}
`
	cfg, err := clientcmd.Load([]byte(admin))
	if err != nil {
		t.Fatal(err)
	}
	e, err := EntryFrom(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e.Cluster.Server != "https://172.31.250.10:6443" || string(e.AuthInfo.ClientKeyData) != "hwk-key" {
		t.Errorf("entry %+v %+v", e.Cluster, e.AuthInfo)
	}
	cfg.CurrentContext = "nope"
	if _, err := EntryFrom(cfg); err == nil {
		t.Error("EntryFrom without a current context succeeded")
	}
}

// TestFileNamedTwice checks that a KUBECONFIG that names one file twice is
// merged into once, without waiting for a lock it holds itself, also when
// the second is in another case (config, CONFIG) on Windows.
func TestFileNamedTwice(t *testing.T) {
	// Why: client-go drops a name given twice as it is; one in another case
	// it keeps, and Windows opens the two as one file: under Wine this
	// failed on the lock before samePath.
	dir := t.TempDir()
	a := filepath.Join(dir, "config")
	write(t, a, existingA)
	again := a
	if runtime.GOOS == "windows" {
		again = filepath.Join(dir, "CONFIG")
	}
	t.Setenv("KUBECONFIG", strings.Join([]string{a, again}, string(os.PathListSeparator)))
	defer func(d time.Duration) { lockWait = d }(lockWait)
	lockWait = 200 * time.Millisecond
	if err := Merge(Paths{}, "demo", entry("https://172.31.250.10:6443"), false); err != nil {
		t.Fatalf("merge: %v", err)
	}
	assertHwk(t, loadFile(t, a), "hwk-demo", "https://172.31.250.10:6443")
	if _, err := os.Stat(a + ".lock"); !os.IsNotExist(err) {
		t.Errorf("the lock file is left (%v)", err)
	}
}
