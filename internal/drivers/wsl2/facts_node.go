package wsl2

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"testing/fstest"

	"github.com/hwk-dev/hwk/pkg/node"
)

// The kernel and port checks read a node's files as they are inside WSL's
// VM. Each wsl.exe call costs a process and a relay on Windows, so the
// node sends them all at once: nodeFacts runs factsScript, which writes
// each file that exists as a header ("F /path SIZE", or "D /dir SIZE" for
// a directory's names, one per line) and its bytes, and reads that back
// as a file system for checkKernel and listening.

// factPaths returns the files the checks read (RELEASE standing for the
// kernel's release) and the directories whose names they list.
func factPaths() (files, dirs []string) {
	files = []string{"proc/sys/kernel/osrelease", "proc/filesystems", "proc/modules",
		"lib/modules/RELEASE/modules.builtin", "lib/modules/RELEASE/modules.dep"}
	files = append(files, configPaths...)
	for _, f := range features {
		if f.live != "" {
			files = append(files, f.live)
		}
	}
	files = append(files, "proc/self/mountinfo", "sys/fs/cgroup/cgroup.controllers", "proc/net/tcp", "proc/net/tcp6")
	return files, []string{"sys/module"}
}

// factsScript returns the POSIX shell script that sends factPaths. A gzipped
// file is sent decompressed (zcat), as text, and compressed again here.
func factsScript() string {
	files, dirs := factPaths()
	word := func(p string) string { return `"/` + strings.ReplaceAll(p, "RELEASE", "$rel") + `"` }
	var b strings.Builder
	b.WriteString("rel=$(cat /proc/sys/kernel/osrelease)\nt=$(mktemp)\n")
	// forEach writes a loop over paths that puts each one's content in
	// $t with fill and sends it headed by kind.
	forEach := func(paths []string, kind, fill string) {
		b.WriteString("for p in")
		for _, p := range paths {
			b.WriteString(" " + word(p))
		}
		b.WriteString("; do\n" + fill +
			"\techo \"" + kind + " $p $(wc -c <\"$t\")\"; cat \"$t\"; echo\n" +
			"done\n")
	}
	forEach(files, "F", "\t[ -f \"$p\" ] || continue\n"+
		"\tcase $p in *.gz) zcat \"$p\" >\"$t\" 2>/dev/null ;; *) cat \"$p\" >\"$t\" 2>/dev/null ;; esac || continue\n")
	forEach(dirs, "D", "\t[ -d \"$p\" ] || continue\n"+
		"\tls -1A \"$p\" >\"$t\"\n")
	b.WriteString("rm -f \"$t\"\n")
	return b.String()
}

// nodeFacts runs factsScript on n and returns what it sent.
func nodeFacts(ctx context.Context, n *node.Node) (fstest.MapFS, error) {
	var out bytes.Buffer
	err := n.Run(ctx, node.Cmd{Args: []string{"sh", "-s", "hwk-node-facts"}, Stdin: strings.NewReader(factsScript()), Stdout: &out})
	if err != nil {
		return nil, fmt.Errorf("read node %s's kernel and network facts: %w", n.Name(), err)
	}
	return parseFacts(out.Bytes())
}

// parseFacts reads factsScript's output. A header's size is held against
// the bytes after it before any is taken, so a damaged or hostile header
// ("F /x 99999999999") is refused rather than allocated.
func parseFacts(data []byte) (fstest.MapFS, error) {
	fsys := fstest.MapFS{}
	for rest := data; len(rest) > 0; {
		line, after, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return nil, fmt.Errorf("node facts: truncated after %d files", len(fsys))
		}
		f := strings.Fields(string(line))
		size, name := -1, ""
		if len(f) == 3 && (f[0] == "F" || f[0] == "D") && strings.HasPrefix(f[1], "/") {
			// The root ("/", "/..") names no file the checks read, and
			// is no valid path of an fs.FS ("" here).
			if name = path.Clean(f[1])[1:]; fs.ValidPath(name) {
				size, _ = strconv.Atoi(f[2])
			}
		}
		if size < 0 {
			return nil, fmt.Errorf("node facts: unexpected line %.100q", strings.TrimSpace(string(line)))
		}
		if size >= len(after) || after[size] != '\n' {
			return nil, fmt.Errorf("node facts: %.100s is cut short", f[1])
		}
		body := bytes.Clone(after[:size])
		rest = after[size+1:]
		if f[0] == "D" {
			fsys[name] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
			for _, e := range strings.Split(string(body), "\n") {
				// ls -1A lists neither . nor ..; a name that is not one
				// path element is no entry of the directory.
				if fs.ValidPath(e) && !strings.Contains(e, "/") {
					fsys[path.Join(name, e)] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
				}
			}
			continue
		}
		if strings.HasSuffix(name, ".gz") {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(body)
			zw.Close()
			body = z.Bytes()
		}
		fsys[name] = &fstest.MapFile{Data: body, Mode: 0o444}
	}
	return fsys, nil
}

// listening returns the TCP ports something listens on (state 0A) in
// root's network namespace, which in WSL is the one all distributions
// share, from its /proc/net/tcp and tcp6.
func listening(root fs.FS) map[uint16]bool {
	ports := map[uint16]bool{}
	for _, f := range []string{"proc/net/tcp", "proc/net/tcp6"} {
		data, err := fs.ReadFile(root, f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			// sl local_address rem_address st ...; addresses are
			// HEXIP:HEXPORT.
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" {
				continue
			}
			_, port, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseUint(port, 16, 16); err == nil {
				ports[uint16(p)] = true
			}
		}
	}
	return ports
}
