package cluster

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/clusterdir"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestExportLogsRedactsSecrets checks that export logs never carries the
// cluster's bootstrap token or a Windows image's Administrator password,
// wherever in the logs they appear.
func TestExportLogsRedactsSecrets(t *testing.T) {
	p, _ := testProvider(t, newMem())
	const token, password = "abcdef.0123456789abcdef", "Wx7-Secret-Pass-Q9"
	dir, err := p.store().Create("red")
	if err != nil {
		t.Fatal(err)
	}
	rec := testConfig(t, "red", config.Node{Role: config.ControlPlane})
	if err := clusterdir.WriteRecord(dir, rec); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, clusterdir.LogsDir)
	for file, data := range map[string]string{
		filepath.Join(dir, clusterdir.TokenFile): token + "\n",
		filepath.Join(logs, "up.log"):            "kubeadm join --token " + token + "\nnet user Administrator " + password + "\n",
	} {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	win := &nodeimage.Manifest{Name: "windows-2022-v1.35.4", OS: "windows", KubernetesVersion: "v1.35.4",
		Windows: &nodeimage.Windows{Version: "2022", AdminPassword: password}, Dir: filepath.Join(nodeimage.ImagesDir(p.Dirs.Cache), "windows-2022-v1.35.4")}
	if err := os.MkdirAll(win.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := win.Write(); err != nil {
		t.Fatal(err)
	}

	file, err := p.ExportLogs(context.Background(), "red", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var all strings.Builder
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		all.WriteString(h.Name + "\n" + string(b))
	}
	got := all.String()
	if !strings.Contains(got, "up.log") || !strings.Contains(got, "<redacted>") {
		t.Fatalf("the archive lacks hwk's log or any redaction:\n%s", got)
	}
	for _, secret := range []string{token, password} {
		if strings.Contains(got, secret) {
			t.Errorf("the archive holds %q", secret)
		}
	}
}
