package logs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/pscheck"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// fakeNode answers commands from a table; a command it has no answer for
// fails the test.
type fakeNode struct {
	t       *testing.T
	answers func(args []string, stdout io.Writer) error
}

func (f *fakeNode) Run(_ context.Context, cmd node.Cmd) error {
	return f.answers(cmd.Args, cmd.Stdout)
}

// listing reads an archive back: each file's path and content.
func listing(t *testing.T, file string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[hdr.Name] = string(data)
	}
}

func podsTar(t *testing.T) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range []struct {
		name, body string
		typ        byte
	}{
		{"pods/", "", tar.TypeDir},
		{"pods/kube-system_coredns-x_1/coredns/0.log", "coredns says hi\n", tar.TypeReg},
		{"pods/kube-system_coredns-x_1/coredns/current", "", tar.TypeSymlink},
	} {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body)), Linkname: "0.log"}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	return b.Bytes()
}

// TestCollectLinux checks that every item gets its file (a failing
// command's file gives why), container logs come in under pods/ without
// links, and the bootstrap token is redacted.
func TestCollectLinux(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a.tar.gz")
	a, err := Create(file, "root")
	if err != nil {
		t.Fatal(err)
	}
	a.Redact("abcdef.0123456789abcdef")
	f := &fakeNode{t: t, answers: func(args []string, out io.Writer) error {
		switch {
		case args[0] == "tar":
			// GNU tar pads the archive to a 10240-byte record after its
			// end marker; a reader that stops at the marker must still
			// take the padding, or tar fails writing it.
			b := podsTar(t)
			b = append(b, make([]byte, 10240-len(b)%10240)...)
			_, err := out.Write(b)
			return err
		case args[0] == "nft":
			fmt.Fprintln(out, "sh: nft: not found")
			return &node.ExitError{Code: 127}
		case slices.ContainsFunc(LinuxItems, func(it Item) bool { return slices.Equal(it.Args, args) }):
			fmt.Fprintf(out, "output of %s; join with --token abcdef.0123456789abcdef\n", strings.Join(args, " "))
			return nil
		}
		t.Errorf("unexpected command %q", args)
		return errors.New("unexpected")
	}}
	res, err := CollectLinux(context.Background(), node.New("n1", config.Linux, f), a, "nodes/n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	got := listing(t, file)
	for _, it := range LinuxItems {
		body, ok := got["root/nodes/n1/"+it.File]
		if !ok {
			t.Errorf("no %s in %v", it.File, got)
		}
		if strings.Contains(body, "abcdef.0123456789abcdef") {
			t.Errorf("%s holds the token: %q", it.File, body)
		}
	}
	if !strings.Contains(got["root/nodes/n1/nft-ruleset.txt"], "exited with status 127") || len(res.Failed) != 1 || !strings.HasPrefix(res.Failed[0], "nft-ruleset.txt") {
		t.Errorf("the failing item: %q, failed %v", got["root/nodes/n1/nft-ruleset.txt"], res.Failed)
	}
	if got["root/nodes/n1/pods/kube-system_coredns-x_1/coredns/0.log"] != "coredns says hi\n" {
		t.Errorf("container log missing: %v", got)
	}
	if _, ok := got["root/nodes/n1/pods/kube-system_coredns-x_1/coredns/current"]; ok {
		t.Error("a symlink was archived as a file")
	}
}

// TestWindowsScript checks that the collection script parses, and each of
// WindowsItems has exactly one item in it, in order.
func TestWindowsScript(t *testing.T) {
	script := WindowsScript()
	pscheck.Check(t, map[string]string{"logs-windows.ps1": script})
	last := -1
	for _, it := range WindowsItems {
		call := fmt.Sprintf("Write-Item '%s' {", it.File)
		if strings.Count(script, call) != 1 {
			t.Errorf("%s: %d items in the script", it.File, strings.Count(script, call))
		}
		if i := strings.Index(script, call); i < last {
			t.Errorf("%s is out of order", it.File)
		} else {
			last = i
		}
	}
	if n := strings.Count(script, "Write-Item '"); n != len(WindowsItems) {
		t.Errorf("the script has %d items, WindowsItems %d", n, len(WindowsItems))
	}
}

// TestCollectWindows checks that the node's output is split into files by
// marker (CRLF line ends, as PowerShell writes them); an item with an error,
// and the ones the script did not reach, are reported.
func TestCollectWindows(t *testing.T) {
	var reply strings.Builder
	for i, it := range WindowsItems {
		if i == len(WindowsItems)-2 {
			break // the script died here
		}
		fmt.Fprintf(&reply, "%s%s\r\n", marker, it.File)
		if it.File == "events-hns.txt" {
			reply.WriteString("Microsoft.PowerShell.Diagnostics\\Get-WinEvent : There is not an event log on the localhost computer that matches \"Microsoft-Windows-Host-Network-Service-Admin\".\r\n    + CategoryInfo          : ObjectNotFound\r\n")
			continue
		}
		fmt.Fprintf(&reply, "content of %s\r\nsecond line\r\n", it.File)
	}
	f := &fakeNode{t: t, answers: func(args []string, out io.Writer) error {
		if script, ok := node.ScriptOf(args); !ok || script != WindowsScript() {
			t.Errorf("the node was not sent the collection script: %q", args)
			return errors.New("unexpected")
		}
		_, err := io.WriteString(out, reply.String())
		return err
	}}
	file := filepath.Join(t.TempDir(), "w.tar.gz")
	a, _ := Create(file, "root")
	res, err := CollectWindows(context.Background(), node.New("win-1", config.Windows, f), a, "nodes/win-1")
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	got := listing(t, file)
	if body := got["root/nodes/win-1/kubelet.log"]; body != "content of kubelet.log\r\nsecond line\r\n" {
		t.Errorf("kubelet.log = %q", body)
	}
	want := []string{"events-hns.txt: see the file for the error", "ipconfig-all.txt: the collection script did not get to it", "route-print.txt: the collection script did not get to it"}
	if !slices.Equal(res.Failed, want) {
		t.Errorf("failed %q\nwant %q", res.Failed, want)
	}
	if len(got) != len(WindowsItems)-2 {
		t.Errorf("%d files, want %d: %v", len(got), len(WindowsItems)-2, got)
	}
}
