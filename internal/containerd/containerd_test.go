package containerd

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/pscheck"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// linuxInventory is what a Linux node printed (ctr 2.3 and crictl 1.36),
// trimmed: the architecture, ctr's images, crictl's, ctr's content digests
// (-q) and snapshots (KEY PARENT KIND; a base layer's snapshot has no
// parent, a container's writable one is Active and keyed by a random ID).
const linuxInventory = `x86_64
---
REF                                                                     TYPE                                                 DIGEST                                                                  SIZE      PLATFORMS   LABELS
docker.io/hwk-test/app:dev                                              application/vnd.docker.distribution.manifest.v2+json sha256:e09907930675e0ac35d6d9aa5c92b4f7d45358a7da2ec44a446cf95cd3e3930c 1.9 MiB   linux/amd64 io.cri-containerd.image=managed
sha256:1aefbc84a6d94ab7d4a2f5a026c01ab0a2a7e33622de303374700e272fa3d4c1 application/vnd.docker.distribution.manifest.v2+json sha256:e09907930675e0ac35d6d9aa5c92b4f7d45358a7da2ec44a446cf95cd3e3930c 1.9 MiB   linux/amd64 io.cri-containerd.image=managed
---
{
  "images": [
    {
      "id": "sha256:1aefbc84a6d94ab7d4a2f5a026c01ab0a2a7e33622de303374700e272fa3d4c1",
      "repoTags": ["docker.io/hwk-test/app:dev"],
      "repoDigests": [],
      "size": "1982256"
    }
  ]
}
---
sha256:1aefbc84a6d94ab7d4a2f5a026c01ab0a2a7e33622de303374700e272fa3d4c1
sha256:2b4d1b426290f5682cf694e0b4eb555754b53615d10007b8c7a19b20fb8321d5
sha256:e09907930675e0ac35d6d9aa5c92b4f7d45358a7da2ec44a446cf95cd3e3930c
---
KEY                                                                     PARENT                                                                  KIND      
230b8d20224e015d6ccfb6c296e3458e891214973a049d5f291b178e95f52275        sha256:740088d7002ed629de941d303b49a6406d5a36bb91a07df32b79cd03c9a0a9e1 Active    
sha256:2b4d1b426290f5682cf694e0b4eb555754b53615d10007b8c7a19b20fb8321d5                                                                         Committed 
sha256:740088d7002ed629de941d303b49a6406d5a36bb91a07df32b79cd03c9a0a9e1 sha256:2b4d1b426290f5682cf694e0b4eb555754b53615d10007b8c7a19b20fb8321d5 Committed 
`

func TestParseInventory(t *testing.T) {
	for name, out := range map[string]string{
		"linux":   linuxInventory,
		"windows": strings.ReplaceAll(strings.Replace(linuxInventory, "x86_64", "AMD64", 1), "\n", "\r\n"),
	} {
		t.Run(name, func(t *testing.T) {
			inv, err := parseInventory(out)
			if err != nil {
				t.Fatal(err)
			}
			const (
				ref      = "docker.io/hwk-test/app:dev"
				id       = "sha256:1aefbc84a6d94ab7d4a2f5a026c01ab0a2a7e33622de303374700e272fa3d4c1"
				manifest = "sha256:e09907930675e0ac35d6d9aa5c92b4f7d45358a7da2ec44a446cf95cd3e3930c"
			)
			if !inv.Has(ref, id) || !inv.Has(ref, "", manifest) {
				t.Errorf("Has(%s) by ID or manifest = false: %+v", ref, inv)
			}
			if inv.Has("docker.io/hwk-test/app:v2", id) {
				t.Error("Has a name the node does not hold")
			}
			if got := inv.NameFor("sha256:0000", id); got != ref {
				t.Errorf("NameFor = %q, want %s", got, ref)
			}
			if got := inv.NameFor("sha256:0000"); got != "" {
				t.Errorf("NameFor an unknown digest = %q", got)
			}
			if !inv.Blob("sha256:2b4d1b426290f5682cf694e0b4eb555754b53615d10007b8c7a19b20fb8321d5") || inv.Blob("sha256:740088d7002ed629de941d303b49a6406d5a36bb91a07df32b79cd03c9a0a9e1") {
				t.Errorf("blobs: %v", inv.Blobs)
			}
			if len(inv.Snapshots) != 2 || !inv.Snapshot("sha256:2b4d1b426290f5682cf694e0b4eb555754b53615d10007b8c7a19b20fb8321d5") ||
				!inv.Snapshot("sha256:740088d7002ed629de941d303b49a6406d5a36bb91a07df32b79cd03c9a0a9e1") {
				t.Errorf("snapshots: %v", inv.Snapshots)
			}
		})
	}
	if _, err := parseInventory("x86_64\n"); err == nil {
		t.Error("cut-short output parsed")
	}
	// A node with no content and no snapshots prints empty sections.
	empty := "x86_64\n---\nREF TYPE DIGEST SIZE PLATFORMS LABELS\n---\n{\"images\":[]}\n---\n---\nKEY PARENT KIND\n"
	if inv, err := parseInventory(empty); err != nil || len(inv.Blobs) != 0 || len(inv.Snapshots) != 0 {
		t.Errorf("empty sections: %+v %v", inv, err)
	}
}

// recorder is a transport that keeps what it was asked to run.
type recorder struct {
	cmds  []node.Cmd
	stdin [][]byte
}

func (r *recorder) Run(_ context.Context, cmd node.Cmd) error {
	var in bytes.Buffer
	if cmd.Stdin != nil {
		_, _ = in.ReadFrom(cmd.Stdin)
	}
	r.cmds = append(r.cmds, cmd)
	r.stdin = append(r.stdin, in.Bytes())
	return nil
}

// fileRecorder records the files a Windows node was sent over SFTP, by
// path.
type fileRecorder struct {
	recorder
	paths []string
	data  [][]byte
}

func (f *fileRecorder) WriteFile(_ context.Context, r io.Reader, p string, _ fs.FileMode) error {
	b, err := io.ReadAll(r)
	f.paths, f.data = append(f.paths, p), append(f.data, b)
	return err
}

func decode(t *testing.T, args []string) string {
	t.Helper()
	script, ok := node.ScriptOf(args)
	if !ok {
		t.Fatalf("not a script: %q", args)
	}
	return script
}

func TestImportLinuxStreamsToCtr(t *testing.T) {
	r := &recorder{}
	n := node.New("cp", config.Linux, r)
	if err := Import(context.Background(), n, strings.NewReader("archive")); err != nil {
		t.Fatal(err)
	}
	if len(r.cmds) != 1 || strings.Join(r.cmds[0].Args, " ") != "ctr -n k8s.io images import --local --all-platforms -" || string(r.stdin[0]) != "archive" {
		t.Errorf("ran %q with %q", r.cmds[0].Args, r.stdin[0])
	}
}

// TestImportWindowsSpools checks that the archive goes to a spool file,
// ctr.exe imports it with the Windows snapshotter, and the file goes
// whatever happens. The scripts are checked as PowerShell.
func TestImportWindowsSpools(t *testing.T) {
	r := &fileRecorder{}
	n := node.New("win", config.Windows, r)
	if err := Import(context.Background(), n, strings.NewReader("archive")); err != nil {
		t.Fatal(err)
	}
	if len(r.paths) != 1 || len(r.cmds) != 1 {
		t.Fatalf("sent %d files and ran %d commands, want a file and an import", len(r.paths), len(r.cmds))
	}
	if !strings.HasPrefix(r.paths[0], "/C:/ProgramData/hwk/images/load-") || string(r.data[0]) != "archive" {
		t.Errorf("sent %q to %s", r.data[0], r.paths[0])
	}
	spool := strings.ReplaceAll(r.paths[0][1:], "/", `\`)
	importScript := decode(t, r.cmds[0].Args)
	for _, want := range []string{
		`& 'C:\Program Files\containerd\ctr.exe' '-n' 'k8s.io' 'images' 'import' '--local' '--all-platforms' '--snapshotter' 'windows' '` + spool + `'`,
		`} finally {`,
		`Remove-Item -Force -LiteralPath '` + spool + `'`,
	} {
		if !strings.Contains(importScript, want) {
			t.Errorf("import script lacks %q:\n%s", want, importScript)
		}
	}
	pscheck.Check(t, map[string]string{
		"import.ps1":    importScript,
		"inventory.ps1": inventoryScript(node.PowerShell),
	})
}

func TestTag(t *testing.T) {
	r := &recorder{}
	if err := Tag(context.Background(), node.New("cp", config.Linux, r), "sha256:abc", "docker.io/my/app:v2"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.cmds[0].Args, " "); got != "ctr -n k8s.io images tag --force sha256:abc docker.io/my/app:v2" {
		t.Errorf("ran %s", got)
	}
}
