// Package containerd is hwk's hand on the containerd inside a node: what
// images it holds in the namespace the kubelet uses, importing an image
// archive into it, and tagging. It runs containerd's own clients (ctr,
// crictl) through the node handle, on Linux and Windows nodes alike.
package containerd

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// Namespace is the containerd namespace the kubelet's CRI uses.
const Namespace = "k8s.io"

// Where the Windows node image installs containerd's clients.
const (
	windowsCtr    = `C:\Program Files\containerd\ctr.exe`
	windowsCrictl = `C:\Program Files\containerd\crictl.exe`
	// windowsSpool is where an archive waits on a Windows node for ctr:
	// see Import.
	windowsSpool = `C:\ProgramData\hwk\images`
)

// Inventory is what a node's containerd holds.
type Inventory struct {
	// Arch is the node's machine architecture as uname or Windows spells
	// it (x86_64, AMD64).
	Arch string
	// IDs maps each image ID (config digest, as crictl shows it) to its
	// names.
	IDs map[string][]string
	// Targets maps each image name to the digest of what it points at (a
	// manifest or an index), as ctr shows it.
	Targets map[string]string
	// Blobs are the digests of the content it holds (layers, configs,
	// manifests), and Snapshots the chain IDs of the layers it has
	// unpacked: a layer in either need not be sent again (an import
	// whose archive lacks a layer takes the blob from the content store,
	// and unpacking skips a layer whose chain is already a snapshot).
	Blobs     map[string]bool
	Snapshots map[string]bool
}

// Blob reports whether the node holds the content of digest.
func (inv *Inventory) Blob(digest string) bool { return inv.Blobs[digest] }

// Snapshot reports whether the node has unpacked the layer chain chainID.
func (inv *Inventory) Snapshot(chainID string) bool { return inv.Snapshots[chainID] }

// Has reports whether ref names an image whose ID or target is one of
// digests.
func (inv *Inventory) Has(ref string, digests ...string) bool {
	for _, d := range digests {
		if d == "" {
			continue
		}
		if inv.Targets[ref] == d || contains(inv.IDs[d], ref) {
			return true
		}
	}
	return false
}

// NameFor returns a name under which the node holds one of digests (by ID or
// target), for tagging it with another; "" when it holds none.
func (inv *Inventory) NameFor(digests ...string) string {
	for _, d := range digests {
		if d == "" {
			continue
		}
		for _, ref := range inv.IDs[d] {
			return ref
		}
		for ref, t := range inv.Targets {
			if t == d {
				return ref
			}
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// inventoryScript returns the script that prints the architecture, ctr's
// image list, crictl's, the content store's digests and the snapshots,
// with a "---" line between them: one round trip per node. The programs'
// exit statuses decide whether it fails.
func inventoryScript(shell node.Shell) string {
	if shell == node.PowerShell {
		// Why 'Continue': what the programs write to stderr (crictl warns
		// there when it has no config file) must neither end the script,
		// as one line would under 'Stop' when PowerShell captures it, nor
		// reach the output parsed here. So that a missing program is not
		// taken for one that ran, the script first checks they are there.
		return fmt.Sprintf(`%s
$ErrorActionPreference = 'Continue'
$env:PROCESSOR_ARCHITECTURE
'---'
& %s -n %s images ls
if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }
'---'
& %s images -o json
if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }
'---'
& %s -n %s content ls -q
if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }
'---'
& %s -n %s snapshots --snapshotter windows ls
exit $LASTEXITCODE
`, requirePrograms(windowsCtr, windowsCrictl), psQuote(windowsCtr), Namespace, psQuote(windowsCrictl), psQuote(windowsCtr), Namespace, psQuote(windowsCtr), Namespace)
	}
	return fmt.Sprintf(`set -e
uname -m
echo ---
ctr -n %[1]s images ls
echo ---
crictl images -o json
echo ---
ctr -n %[1]s content ls -q
echo ---
ctr -n %[1]s snapshots ls
`, Namespace)
}

// List reads what n's containerd holds.
func List(ctx context.Context, n *node.Node) (*Inventory, error) {
	var out strings.Builder
	if err := n.RunScript(ctx, inventoryScript(n.Shell()), node.Cmd{Stdout: &out}); err != nil {
		return nil, fmt.Errorf("list images on node %s: %w", n.Name(), err)
	}
	inv, err := parseInventory(out.String())
	if err != nil {
		return nil, fmt.Errorf("list images on node %s: %w", n.Name(), err)
	}
	return inv, nil
}

func parseInventory(s string) (*Inventory, error) {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	// Sections are separated by lines of "---"; a section may be empty
	// (no content, no snapshots).
	var parts []string
	var cur strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if line == "---" && len(parts) < 4 {
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line + "\n")
	}
	parts = append(parts, cur.String())
	if len(parts) != 5 {
		return nil, fmt.Errorf("unexpected output: %q", hostexec.LastLines(s, 3))
	}
	inv := &Inventory{Arch: strings.TrimSpace(parts[0]), IDs: map[string][]string{}, Targets: map[string]string{},
		Blobs: map[string]bool{}, Snapshots: map[string]bool{}}
	for _, line := range strings.Split(parts[3], "\n") {
		if d := strings.TrimSpace(line); strings.HasPrefix(d, "sha256:") {
			inv.Blobs[d] = true
		}
	}
	// KEY PARENT KIND: a committed snapshot's key is its chain ID; the
	// active ones are containers' writable layers.
	for _, line := range strings.Split(parts[4], "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[len(f)-1] == "Committed" && strings.HasPrefix(f[0], "sha256:") {
			inv.Snapshots[f[0]] = true
		}
	}
	sc := bufio.NewScanner(strings.NewReader(parts[1]))
	for first := true; sc.Scan(); first = false {
		f := strings.Fields(sc.Text())
		if first || len(f) < 3 {
			continue // the header line
		}
		inv.Targets[f[0]] = f[2]
	}
	var list struct {
		Images []struct {
			ID          string   `json:"id"`
			RepoTags    []string `json:"repoTags"`
			RepoDigests []string `json:"repoDigests"`
		} `json:"images"`
	}
	if err := json.Unmarshal([]byte(parts[2]), &list); err != nil {
		return nil, fmt.Errorf("read crictl's image list: %w", err)
	}
	for _, im := range list.Images {
		inv.IDs[im.ID] = append(inv.IDs[im.ID], im.RepoTags...)
	}
	return inv, nil
}

// Import streams an image archive (docker save or OCI layout, as a tar)
// into n's containerd, unpacked for the kubelet. On Windows it goes through
// a spool file on the node, removed however the import ends.
func Import(ctx context.Context, n *node.Node, archive io.Reader) error {
	var err error
	if n.OS() == config.Windows {
		// Why a spool file: the node's login shell is PowerShell, which
		// does not hand a binary standard input on to a native program
		// intact, so ctr.exe reads the file.
		err = importWindows(ctx, n, archive)
	} else {
		err = n.Run(ctx, node.Cmd{Args: importArgs(config.Linux, "-"), Stdin: archive})
	}
	if err != nil {
		return fmt.Errorf("import images on node %s: %w", n.Name(), err)
	}
	return nil
}

// importArgs returns ctr's import command line for a node of os reading
// file. It imports every platform in the archive, and ctr writes the
// content itself (--local).
func importArgs(os config.OS, file string) []string {
	// Why every platform: hwk writes only the one the node runs (and
	// Docker's save holds only one per image), so ctr has nothing to
	// choose and must not drop what hwk chose.
	// Why --local: ctr writing the content itself, rather than streaming
	// the archive to containerd's transfer service, took a 489 MiB image's
	// import from 11–12 s to 7.6–9.3 s (site/content/docs/load-image.md, Speed).
	if os == config.Windows {
		return []string{windowsCtr, "-n", Namespace, "images", "import", "--local", "--all-platforms", "--snapshotter", "windows", file}
	}
	return []string{"ctr", "-n", Namespace, "images", "import", "--local", "--all-platforms", file}
}

func importWindows(ctx context.Context, n *node.Node, archive io.Reader) error {
	spool := windowsSpool + `\load-` + randomSuffix() + ".tar"
	if err := n.CopyTo(ctx, archive, spool, 0o600); err != nil {
		return err
	}
	return n.RunScript(ctx, importWindowsScript(spool), node.Cmd{})
}

// importWindowsScript imports the archive spool with ctr.exe and removes
// it however the import ends; ctr runs under 'Continue' (see
// inventoryScript), its exit status deciding.
func importWindowsScript(spool string) string {
	return fmt.Sprintf(`$ErrorActionPreference = 'Stop'
try {
  %s
  $ErrorActionPreference = 'Continue'
  %s
  if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }
} finally {
  Microsoft.PowerShell.Management\Remove-Item -Force -LiteralPath %s -ErrorAction SilentlyContinue
}
`, requirePrograms(windowsCtr), node.Quote(node.PowerShell, importArgs(config.Windows, spool)...), psQuote(spool))
}

// requirePrograms returns PowerShell that fails unless every program is there:
// under 'Continue' a missing one is only a message, and $LASTEXITCODE
// keeps whatever it was.
func requirePrograms(paths ...string) string {
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = psQuote(p)
	}
	return `foreach ($program in ` + strings.Join(quoted, ", ") + `) { if (-not (Microsoft.PowerShell.Management\Test-Path -LiteralPath $program)) { throw "$program is missing on $env:COMPUTERNAME; rebuild the Windows node image" } }`
}

// Scripts returns every PowerShell script this package makes, by the
// declaration that makes it: for the check of every script hwk sends to
// Windows (internal/testing/pscatalog).
func Scripts() map[string]string {
	return map[string]string{
		"inventoryScript+requirePrograms":     inventoryScript(node.PowerShell),
		"importWindowsScript+requirePrograms": importWindowsScript(windowsSpool + `\load-0123.tar`),
	}
}

// Tag gives the image named src the name dst as well, replacing whatever
// dst named before.
func Tag(ctx context.Context, n *node.Node, src, dst string) error {
	ctr := "ctr"
	if n.OS() == config.Windows {
		ctr = windowsCtr
	}
	if err := n.Run(ctx, node.Cmd{Args: []string{ctr, "-n", Namespace, "images", "tag", "--force", src, dst}}); err != nil {
		return fmt.Errorf("tag %s as %s on node %s: %w", src, dst, n.Name(), err)
	}
	return nil
}

func psQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// randomSuffix keeps two loads into one node from sharing a spool file.
func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
