package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/drivers/all"
	"github.com/hwk-dev/hwk/internal/drivers/virtualbox"
	"github.com/hwk-dev/hwk/internal/testing/driverstest"
	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
	"github.com/hwk-dev/hwk/internal/testing/vboxtest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(args, Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return code, out.String(), withoutNotes(errOut.String())
}

// notes are the lines a slow check of this host prints while it waits
// (drivers.Waiting, ui.Watch): whether one comes depends on how fast the
// host's libvirtd or PowerShell answers, not on the command. Their own
// tests are in drivers, internal/ui and internal/doctor.
var notes = regexp.MustCompile(`(?m)^  waiting \d+s for .* \(at most [^)]*\)\n`)

func withoutNotes(stderr string) string { return notes.ReplaceAllString(stderr, "") }

// runRegistry calls run with the drivers of registry instead of the built-in
// ones.
func runRegistry(t *testing.T, registry func() *drivers.Registry, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCommand(Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, deps{registry: registry})
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		printError(&errOut, err)
		code = 1
	}
	return code, out.String(), withoutNotes(errOut.String())
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const threeMistakes = `apiVersion: hwk.dev/v1alpha1
kind: Cluster
name: demo
nodes:
- role: control-plane
  memory: 3x
- role: worker
  os: windows
  name: demo-windows-worker-1
  driver: docker
`

func TestConfigValidateReportsEveryMistake(t *testing.T) {
	path := writeConfig(t, threeMistakes)
	code, stdout, stderr := run(t, "config", "validate", "--config", path)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if stdout != "" {
		t.Errorf("printed a config for an invalid file:\n%s", stdout)
	}
	want := []string{
		"ERROR: " + path + " has 3 problems:",
		"  " + path + `:6: nodes[0].memory: "3x" is not a size; use e.g. 4Gi`,
		"  " + path + `:9: nodes[1].name: "demo-windows-worker-1" is 21 characters; Windows computer names allow at most 15, set a shorter name (or a shorter cluster name)`,
		"  " + path + ":10: nodes[1].driver: docker cannot host windows nodes; use hyperv, libvirt or virtualbox for windows nodes",
	}
	if got := strings.Split(strings.TrimRight(stderr, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr, strings.Join(want, "\n"))
	}
}

func TestConfigValidatePrintsEffectiveConfig(t *testing.T) {
	path := writeConfig(t, "apiVersion: hwk.dev/v1alpha1\nkind: Cluster\nname: fromfile\n")
	code, stdout, stderr := run(t, "config", "validate", "--config", path, "--windows-workers", "2", "--kubernetes-version", "1.34.2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var c config.Cluster
	if err := yaml.Unmarshal([]byte(stdout), &c); err != nil {
		t.Fatalf("output is not YAML: %v\n%s", err, stdout)
	}
	if c.Name != "fromfile" {
		t.Errorf("name %q: the --name default must not override the file", c.Name)
	}
	if c.KubernetesVersion != "v1.34.2" || len(c.Nodes) != 3 || c.Nodes[2].Name != "fromfile-win-2" {
		t.Errorf("flags not applied: %+v", c)
	}

	// The printed config is itself a valid config file.
	code, _, stderr = run(t, "config", "validate", "--config", writeConfig(t, stdout))
	if code != 0 {
		t.Errorf("printed config does not validate: %s", stderr)
	}

	code, stdout, _ = run(t, "config", "validate", "--name", "flagname", "--config", path, "-o", "json")
	if code != 0 {
		t.Fatal("json output failed")
	}
	c = config.Cluster{}
	if err := json.Unmarshal([]byte(stdout), &c); err != nil || c.Name != "flagname" {
		t.Errorf("json output %v, name %q", err, c.Name)
	}
}

func TestConfigValidateWithoutFileShowsDefaults(t *testing.T) {
	code, stdout, _ := run(t, "config", "validate")
	if code != 0 || !strings.Contains(stdout, "name: hwk-win-1") || !strings.Contains(stdout, "role: control-plane") {
		t.Errorf("exit %d, output:\n%s", code, stdout)
	}
	code, stdout, stderr := run(t, "-q", "config", "validate")
	if code != 0 || stdout != "" || stderr != "" {
		t.Errorf("-q: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestConfigValidateBadFlags(t *testing.T) {
	code, _, stderr := run(t, "config", "validate", "--driver", "docker")
	if code != 1 || !strings.Contains(stderr, "nodes[1].driver: docker cannot host windows nodes") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
	code, _, stderr = run(t, "config", "validate", "--config", filepath.Join(t.TempDir(), "nope.yaml"))
	if code != 1 || !strings.Contains(stderr, "nope.yaml") {
		t.Errorf("missing file: exit %d, stderr %s", code, stderr)
	}
	code, _, stderr = run(t, "config", "validate", "--windows-workers", "many")
	if code != 1 || !strings.Contains(stderr, "--windows-workers") {
		t.Errorf("non-numeric count: exit %d, stderr %s", code, stderr)
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := run(t, "version", "-o", "json")
	if code != 0 {
		t.Fatal("version failed")
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "commit", "goVersion", "platform"} {
		if v[k] == "" {
			t.Errorf("version -o json has no %s: %s", k, stdout)
		}
	}
	code, _, stderr := run(t, "version", "-o", "xml")
	if code != 1 || !strings.Contains(stderr, `--output "xml" is not supported; use text, json`) {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
}

func TestCompletionAndUnknownCommand(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, stdout, _ := run(t, "completion", shell)
		if code != 0 || !strings.Contains(stdout, "hwk") {
			t.Errorf("completion %s: exit %d", shell, code)
		}
	}
	code, _, stderr := run(t, "frobnicate")
	if code != 1 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
	code, _, stderr = run(t, "-v", "-1", "version")
	if code != 1 || !strings.Contains(stderr, "negative") {
		t.Errorf("negative verbosity: exit %d, stderr %s", code, stderr)
	}
}

func TestGetDrivers(t *testing.T) {
	reg := func() *drivers.Registry {
		return drivers.NewRegistry(driverstest.Up(config.DriverDocker), driverstest.Down(config.DriverLibvirt))
	}
	var out, errOut bytes.Buffer
	root := newRootCommand(Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, deps{registry: reg})
	root.SetArgs([]string{"get", "drivers"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"NAME     NODE OS        AVAILABLE  DEFAULT FOR",
		"docker   linux          yes",
		"libvirt  linux,windows  no         -            libvirt is not installed",
		"fix: install libvirt",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}

	out.Reset()
	root = newRootCommand(Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, deps{registry: reg})
	root.SetArgs([]string{"get", "drivers", "-o", "json"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var av []drivers.Availability
	if err := json.Unmarshal(out.Bytes(), &av); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(av) != 2 || !av[0].Available || av[1].Available || av[1].Fix != "install libvirt" {
		t.Errorf("json: %+v", av)
	}
}

// TestUpWithoutWindowsImage checks that up of the default cluster, which
// has a Windows worker, with no Windows node image fails at its first step,
// tells how to make a Linux-only cluster (once), and leaves no trace.
func TestUpWithoutWindowsImage(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	t.Setenv("KUBECONFIG", filepath.Join(home, "kubeconfig"))
	code, _, stderr := run(t, "up")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if n := strings.Count(stderr, "`hwk up --windows-workers 0`"); n != 1 {
		t.Errorf("the advice appears %d times, want once:\n%s", n, stderr)
	}
	if !strings.Contains(stderr, `ERROR: hwk up stopped at "Checking the host"`) {
		t.Errorf("no summary line:\n%s", stderr)
	}
	// Only the cluster's lock file, which lives apart from clusters.
	entries, _ := os.ReadDir(filepath.Join(home, "data"))
	if len(entries) != 1 || entries[0].Name() != "locks" {
		t.Errorf("a failed preflight wrote %v", entries)
	}
	// -q prints no step lines, so the error must carry everything.
	code, _, stderr = run(t, "up", "-q")
	if code != 1 || !strings.Contains(stderr, "ERROR: Checking the host: no Windows node image") {
		t.Errorf("quiet up: exit %d\n%s", code, stderr)
	}
}

func TestClusterCommandsWithoutClusters(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	t.Setenv("KUBECONFIG", filepath.Join(home, "kubeconfig"))
	if code, stdout, stderr := run(t, "down", "--name", "nope"); code != 0 || !strings.Contains(stdout, `There was no cluster named "nope"`) {
		t.Errorf("down of a missing cluster: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := run(t, "get", "clusters", "-o", "json"); code != 0 || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("get clusters -o json: exit %d %q", code, stdout)
	}
	for _, args := range [][]string{{"get", "nodes"}, {"get", "kubeconfig"}, {"status"}, {"load-image", "my/app:dev"}, {"load-image", "-q", "--archive", "app.tar"}} {
		code, _, stderr := run(t, append(args, "--name", "nope")...)
		if code != 1 || !strings.Contains(stderr, "no cluster named nope") {
			t.Errorf("%v: exit %d\n%s", args, code, stderr)
		}
	}
}

func TestLoadImageWithoutImages(t *testing.T) {
	code, _, stderr := run(t, "load-image")
	if code != 1 || !strings.Contains(stderr, "name the images to load, or archives with --archive") {
		t.Errorf("load-image with nothing to load: exit %d\n%s", code, stderr)
	}
}

// TestGetKubeconfig prints the cluster's own kubeconfig, as YAML or JSON.
func TestGetKubeconfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	dir := filepath.Join(home, "data", "clusters", "demo")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := "apiVersion: hwk.dev/v1alpha1\nkind: Cluster\nname: demo\n"
	kc := `apiVersion: v1
kind: Config
clusters:
- cluster: {server: "https://127.0.0.1:32771"}
  name: hwk-demo
contexts:
- context: {cluster: hwk-demo, user: hwk-demo}
  name: hwk-demo
current-context: hwk-demo
users:
- name: hwk-demo
  user: {token: t}
`
	for name, data := range map[string]string{"cluster.yaml": rec, "kubeconfig": kc} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if code, stdout, stderr := run(t, "get", "kubeconfig", "--name", "demo"); code != 0 || stdout != kc {
		t.Errorf("yaml: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr := run(t, "get", "kubeconfig", "--name", "demo", "-o", "json")
	var got struct {
		CurrentContext string `json:"current-context"`
		Clusters       []struct {
			Cluster struct{ Server string } `json:"cluster"`
		} `json:"clusters"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil || got.CurrentContext != "hwk-demo" || len(got.Clusters) != 1 || got.Clusters[0].Cluster.Server != "https://127.0.0.1:32771" {
		t.Errorf("json: exit %d %+v\n%s%s", code, got, stdout, stderr)
	}
	if code, stdout, _ := run(t, "get", "clusters"); code != 0 || !strings.Contains(stdout, "demo") {
		t.Errorf("get clusters: %d %s", code, stdout)
	}
}

// TestGetDriversVirtualBox checks that the built-in VirtualBox driver, whose
// VBoxManage here is the fake program answering preflight, is listed
// available with the version it found. On Windows the driver also asks
// PowerShell whether the Windows hypervisor runs: a fake powershell.exe
// answers no, as a Windows without Hyper-V or WSL 2 does.
func TestGetDriversVirtualBox(t *testing.T) {
	vboxtest.New(t, "preflight-ok.txt", nil)
	t.Setenv("HWK_HOME", t.TempDir())
	var code int
	var stdout, stderr string
	if runtime.GOOS == "windows" {
		noHypervisor(t)
		// The built-in VirtualBox driver alone: the Hyper-V driver would
		// start the same fake powershell.exe as its long-lived session,
		// which a fake of one call per process holds (reading the
		// session's stdin to its end) until Hyper-V gives up on it,
		// past the VirtualBox driver's own time limit.
		vbox, err := all.Registry(all.Options{}).Get(config.DriverVirtualBox)
		if err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr = runRegistry(t, func() *drivers.Registry { return drivers.NewRegistry(vbox) }, "get", "drivers")
	} else {
		code, stdout, stderr = run(t, "get", "drivers")
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !regexp.MustCompile(`(?m)^virtualbox +linux,windows +yes +\S+ +VirtualBox 7\.1\.4$`).MatchString(stdout) {
		t.Errorf("no virtualbox row:\n%s", stdout)
	}
}

// noHypervisor puts first on PATH a powershell.exe that answers the
// VirtualBox driver's question (is the Windows hypervisor on?) with
// False, as Windows PowerShell writes a Boolean, and fails t if the
// question was not asked. Anything else it is asked (the Hyper-V
// driver's session) it refuses, as a PowerShell that cannot start.
func noHypervisor(t *testing.T) {
	t.Helper()
	replies := t.TempDir()
	const reply = `# (CimCmdlets\Get-CimInstance -ClassName Win32_ComputerSystem).HypervisorPresent on a Windows
# whose hypervisor does not run: PowerShell writes the Boolean as False and a line end.
# Source: Win32_ComputerSystem's HypervisorPresent (a Boolean), learn.microsoft.com
# (windows/win32/cimwin32prov/win32-computersystem); about_Booleans for how it prints.
# Newlines: crlf
== off ==
False
`
	if err := os.WriteFile(filepath.Join(replies, "hypervisor.txt"), []byte(reply), 0o644); err != nil {
		t.Fatal(err)
	}
	f := fakeprog.New(t, fakeprog.Config{
		Program: "powershell.exe",
		Transcript: &fakeprog.Transcript{Name: "no-hypervisor", Exchanges: []fakeprog.Exchange{{
			Name: "is the hypervisor on",
			Args: []string{"-NoLogo", "-NoProfile", "-NonInteractive", "-Command", virtualbox.Scripts()["hypervisorScript"]},
			// Any number of times, at least once.
			Reply: "hypervisor/off",
		}}},
		Replies: replies,
	})
	t.Cleanup(func() {
		if u := f.Unused(); len(u) > 0 {
			t.Errorf("the VirtualBox driver did not ask whether the hypervisor runs: %v", u)
		}
	})
}
