package wsl2

import (
	"context"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// local runs a node's commands on this host: the facts script meets real
// /proc and /sys, as it does inside WSL's VM.
type local struct{}

func (local) Run(ctx context.Context, c node.Cmd) error {
	cmd := exec.CommandContext(ctx, c.Args[0], c.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return &node.ExitError{Code: ee.ExitCode()}
	}
	return err
}

// recording is a file system that notes every path read through it.
type recording struct {
	fs.FS
	seen map[string]bool
}

func (r recording) ReadFile(name string) ([]byte, error) {
	r.seen[name] = true
	return fs.ReadFile(r.FS, name)
}

func (r recording) ReadDir(name string) ([]fs.DirEntry, error) {
	r.seen[name] = true
	return fs.ReadDir(r.FS, name)
}

func (r recording) Stat(name string) (fs.FileInfo, error) {
	r.seen[name] = true
	return fs.Stat(r.FS, name)
}

// TestNodeFactsOnThisHost checks that the facts script, run by sh on this
// machine, sends what the kernel check reads, so the check finds over it
// exactly what it finds over the real "/"; that every path the check reads
// is one the script sends; and that a port this test listens on is taken.
func TestNodeFactsOnThisHost(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the facts script is a Linux shell script over a Linux kernel's /proc and /sys, which a Windows host has not (it runs inside the WSL distribution)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := uint16(l.Addr().(*net.TCPAddr).Port)

	fsys, err := nodeFacts(context.Background(), node.New("host", config.Linux, local{}))
	if err != nil {
		t.Fatal(err)
	}
	rec := recording{FS: os.DirFS("/"), seen: map[string]bool{}}
	want, err := checkKernel(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkKernel(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if got.release != want.release || got.cgroup2 != want.cgroup2 || !slices.Equal(got.controllers, want.controllers) || got.configFile != want.configFile {
		t.Errorf("over the facts: %s cgroup2=%v %q %s; over /: %s cgroup2=%v %q %s",
			got.release, got.cgroup2, got.controllers, got.configFile, want.release, want.cgroup2, want.controllers, want.configFile)
	}
	for i, f := range want.findings {
		if g := got.findings[i]; g.presence != f.presence || g.evidence != f.evidence {
			t.Errorf("%s: %s (%s) over the facts, %s (%s) over /", f.name, g.presence, g.evidence, f.presence, f.evidence)
		}
	}
	t.Logf("kernel %s, config %q, cgroup v2 %v; %d files sent", got.release, got.configFile, got.cgroup2, len(fsys))

	files, dirs := factPaths()
	sent := map[string]bool{}
	for _, p := range slices.Concat(files, dirs) {
		sent[strings.ReplaceAll(p, "RELEASE", want.release)] = true
	}
	for p := range rec.seen {
		if !sent[p] {
			t.Errorf("the kernel check reads %s, which the facts script does not send", p)
		}
	}
	if !listening(fsys)[port] {
		t.Errorf("port %d, which the test listens on, is not among the listening ports", port)
	}
}

// TestParseFactsRefusesDamage checks that output cut short or not in the
// script's form is an error, not a smaller file system.
func TestParseFactsRefusesDamage(t *testing.T) {
	good := "F /proc/sys/kernel/osrelease 7\n6.6.87\n\nD /sys/module 14\nvxlan\noverlay\n\n"
	fsys, err := parseFacts([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := fs.ReadFile(fsys, "proc/sys/kernel/osrelease"); string(d) != "6.6.87\n" {
		t.Errorf("osrelease: %q", d)
	}
	if es, _ := fs.ReadDir(fsys, "sys/module"); len(es) != 2 {
		t.Errorf("sys/module: %v", es)
	}
	for _, bad := range []string{good[:len(good)-5], "garbage\n", "F /x 10\nshort\n", "F relative 1\nx\n"} {
		if _, err := parseFacts([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
