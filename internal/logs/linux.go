package logs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"

	"github.com/hwk-dev/hwk/pkg/node"
)

// Item is one file of a node's part of the archive and what makes it.
type Item struct {
	File string
	// Args run on a Linux node; Script is a PowerShell script block's body
	// on a Windows node.
	Args   []string
	Script string
}

// LinuxItems are what a Linux node gives, besides its containers' logs
// (PodsDir).
var LinuxItems = []Item{
	{File: "kubelet.journal.log", Args: []string{"journalctl", "--no-pager", "-u", "kubelet"}},
	{File: "containerd.journal.log", Args: []string{"journalctl", "--no-pager", "-u", "containerd"}},
	{File: "crictl-ps.txt", Args: []string{"crictl", "ps", "-a"}},
	{File: "crictl-pods.txt", Args: []string{"crictl", "pods"}},
	{File: "ip-addr.txt", Args: []string{"ip", "addr"}},
	{File: "ip-route.txt", Args: []string{"ip", "route", "show", "table", "all"}},
	{File: "iptables-save.txt", Args: []string{"iptables-save"}},
	{File: "nft-ruleset.txt", Args: []string{"nft", "list", "ruleset"}},
}

// PodsDir is where the kubelet keeps containers' logs; in the archive it
// is each node's pods/ directory.
const PodsDir = "/var/log/pods"

// Result is what one node gave: the files written, and what failed (with
// why), for the summary.
type Result struct {
	Files  []string
	Failed []string
}

func (r *Result) fail(format string, args ...any) {
	r.Failed = append(r.Failed, fmt.Sprintf(format, args...))
}

// CollectLinux writes a Linux node's items into a under dir. A command
// that fails still gets its file, holding what it printed and why it
// failed.
func CollectLinux(ctx context.Context, n *node.Node, a *Archive, dir string) (*Result, error) {
	res := &Result{}
	for _, it := range LinuxItems {
		var out bytes.Buffer
		err := n.Run(ctx, node.Cmd{Args: it.Args, Stdout: &out, Stderr: &out})
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if err != nil {
			fmt.Fprintf(&out, "\nhwk: %v\n", err)
			res.fail("%s: %v", it.File, err)
		}
		if err := a.Add(path.Join(dir, it.File), out.Bytes()); err != nil {
			return res, err
		}
		res.Files = append(res.Files, it.File)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := n.Run(ctx, node.Cmd{Args: []string{"tar", "-C", path.Dir(PodsDir), "-cf", "-", path.Base(PodsDir)}, Stdout: pw})
		pw.CloseWithError(err)
		done <- err
	}()
	count, err := a.AddTar(dir, pr)
	if err == nil {
		// tar pads its output to a whole record after the end marker the
		// reader stops at: take the rest, or the node's tar fails to
		// write it.
		_, err = io.Copy(io.Discard, pr)
	}
	pr.CloseWithError(err)
	if rerr := <-done; err == nil {
		err = rerr
	}
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		res.fail("%s: %v", PodsDir, err)
	}
	res.Files = append(res.Files, fmt.Sprintf("pods/ (%d files)", count))
	return res, nil
}
