package pssim

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hwk-dev/hwk/node-images/windows"
)

// TestContainerdConfigIsThePinned: the `containerd config default`
// pssim answers with is the output of the containerd version
// node-images/windows/components.yaml pins, so a pin bump fails here
// until hack/containerd-config-default.sh has made the new version's
// file (and native.go embeds it).
func TestContainerdConfigIsThePinned(t *testing.T) {
	data, err := windows.Recipe.ReadFile("components.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var recipe struct {
		Components []struct {
			Name    string `yaml:"name"`
			Version string `yaml:"version"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(data, &recipe); err != nil {
		t.Fatal(err)
	}
	var pin string
	for _, c := range recipe.Components {
		if c.Name == "containerd" {
			pin = c.Version
		}
	}
	if pin == "" {
		t.Fatal("components.yaml pins no containerd version")
	}
	name := "testdata/containerd-" + pin + "-config-default-windows"
	file, err := os.ReadFile(name + ".toml")
	if err != nil {
		t.Fatalf("components.yaml pins containerd %s, but there is no %s.toml: run hack/containerd-config-default.sh and embed it in native.go (%v)", pin, name, err)
	}
	if string(file) != defaultContainerdConfig {
		t.Errorf("native.go embeds another file than %s.toml, the pinned containerd %s's: embed that one", name, pin)
	}
	// The provenance note records what `containerd.exe --version` said.
	note, err := os.ReadFile(name + ".txt")
	if err != nil {
		t.Fatal(err)
	}
	if want := "containerd: containerd github.com/containerd/containerd/v2 " + pin + " "; !strings.Contains(string(note), want) {
		t.Errorf("%s.txt does not record %q", name, want)
	}
}

// TestContainerdConfigMachine: the one line of the output that depends
// on the machine, the default platform, names the machine's build; and
// each key provision.ps1 rewrites is there once, at a line's start.
func TestContainerdConfigMachine(t *testing.T) {
	if strings.Count(defaultContainerdConfig, wineContainerdPlatform) != 1 {
		t.Fatalf("the output has no %s once: regenerated under another Wine? Update wineContainerdPlatform", wineContainerdPlatform)
	}
	for _, m := range []*Machine{NewServer2022(), NewServer2025()} {
		got := m.containerdConfig()
		want := fmt.Sprintf("platforms = ['windows(10.0.%d)/amd64', 'linux/amd64']\n", m.Build)
		if !strings.Contains(got, want) {
			t.Errorf("build %d: no %q", m.Build, want)
		}
	}
	for _, key := range []string{"bin_dirs", "conf_dir", "sandbox"} {
		re := regexp.MustCompile(`(?m)^(\s*)` + key + `\s*=.*$`)
		if n := len(re.FindAllString(defaultContainerdConfig, -1)); n != 1 {
			t.Errorf("%s: %d lines, not 1", key, n)
		}
	}
}

// TestContainerdConfigLines: a script reads the output one string per
// line, as PowerShell reads a program's output, so provision.ps1's
// Out-String and its (?m)^...$ rewrites see the lines. (The excerpt this
// replaced came as one []string object, which Out-String printed as
// "[line line ...]" on one line, and no rewrite matched.)
func TestContainerdConfigLines(t *testing.T) {
	m := NewServer2022()
	m.WriteFile(`C:\Program Files\containerd\containerd.exe`, []byte("MZ"))
	r := run(t, m, `$lines = & 'C:\Program Files\containerd\containerd.exe' config default
$text = & 'C:\Program Files\containerd\containerd.exe' config default | Microsoft.PowerShell.Utility\Out-String
Microsoft.PowerShell.Management\Set-Content -LiteralPath C:\count.txt -Value $lines.Count
Microsoft.PowerShell.Management\Set-Content -LiteralPath C:\text.txt -Value $text
`)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	want := m.containerdConfig()
	if got := strings.TrimSpace(string(m.File(`C:\count.txt`).Data)); got != fmt.Sprint(strings.Count(want, "\n")) {
		t.Errorf("$lines.Count = %s, want %d", got, strings.Count(want, "\n"))
	}
	// Set-Content ends the text with a line break of its own.
	text := strings.TrimSuffix(string(m.File(`C:\text.txt`).Data), "\r\n")
	if got := strings.ReplaceAll(text, "\r\n", "\n"); got != want {
		t.Errorf("Out-String gave %d bytes, not the %d of the output:\n%.300s", len(got), len(want), got)
	}
}
