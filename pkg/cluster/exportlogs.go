package cluster

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/hwk-dev/hwk/internal/logs"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/clusterdir"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// ExportLogs writes the cluster's logs into one archive in dir and returns
// its path: per node what internal/logs collects, the cluster's nodes, pods
// and events (`kubectl get -A -o yaml`), hwk's logs of its up, and a
// summary.txt of what was collected and what failed. A node or API server
// that does not answer is recorded there; the rest is still collected.
func (p *Provider) ExportLogs(ctx context.Context, name, dir string) (string, error) {
	rec, err := p.record(name)
	if err != nil {
		return "", err
	}
	clusterDir, err := p.store().ClusterDir(name)
	if err != nil {
		return "", err
	}
	root := fmt.Sprintf("hwk-logs-%s-%s", name, time.Now().Format("20060102-150405"))
	file := filepath.Join(dir, root+".tar.gz")
	a, err := logs.Create(file, root)
	if err != nil {
		return "", fmt.Errorf("export logs: %w", err)
	}
	if tok, err := os.ReadFile(filepath.Join(clusterDir, clusterdir.TokenFile)); err == nil {
		a.Redact(strings.TrimSpace(string(tok)))
	}
	// The Administrator password of each cached Windows image: a node's
	// logs should never hold it, and if one ever does it must not leave
	// the machine in a bug report.
	if images, err := nodeimage.List(p.Dirs.Cache); err == nil {
		for _, m := range images {
			if m.Windows != nil {
				a.Redact(m.Windows.AdminPassword)
			}
		}
	}
	var summary strings.Builder
	fmt.Fprintf(&summary, "hwk logs of cluster %s, %s\n\n", name, time.Now().Format(time.RFC3339))
	fail := func(err error) (string, error) {
		a.Close()
		os.Remove(file)
		return "", fmt.Errorf("export logs: %w", err)
	}
	for _, n := range rec.Nodes {
		var res *logs.Result
		stepErr := p.step(fmt.Sprintf("Collecting from node %s", n.Name), func() error {
			h, _, err := p.Node(ctx, name, n.Name)
			if err != nil {
				return err
			}
			collect := logs.CollectLinux
			if n.OS == config.Windows {
				collect = logs.CollectWindows
			}
			res, err = collect(ctx, h, a, path.Join("nodes", n.Name))
			if err == nil && len(res.Failed) > 0 {
				return fmt.Errorf("%d of its items failed (see summary.txt)", len(res.Failed))
			}
			return err
		})
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		fmt.Fprintf(&summary, "node %s (%s, %s):\n", n.Name, n.OS, n.Driver)
		if res == nil {
			fmt.Fprintf(&summary, "  not collected: %v\n", stepErr)
			continue
		}
		fmt.Fprintf(&summary, "  collected: %s\n", strings.Join(res.Files, ", "))
		for _, f := range res.Failed {
			fmt.Fprintf(&summary, "  failed: %s\n", f)
		}
	}
	var apiErr error
	_ = p.step("Collecting nodes, pods and events from the API server", func() error {
		apiErr = p.exportObjects(ctx, name, a)
		return apiErr
	})
	if apiErr != nil {
		fmt.Fprintf(&summary, "cluster objects: not collected: %v\n", apiErr)
	} else {
		summary.WriteString("cluster objects: cluster/nodes.yaml, cluster/pods.yaml, cluster/events.yaml\n")
	}
	if err := p.exportOwnLogs(name, a); err != nil {
		fmt.Fprintf(&summary, "hwk's logs: %v\n", err)
	}
	if err := a.Add("summary.txt", []byte(summary.String())); err != nil {
		return fail(err)
	}
	if err := a.Close(); err != nil {
		os.Remove(file)
		return "", fmt.Errorf("export logs: %w", err)
	}
	return file, nil
}

// exportObjects writes nodes, pods and events of every namespace.
func (p *Provider) exportObjects(ctx context.Context, name string, a *logs.Archive) error {
	cs, err := p.client(name)
	if err != nil {
		return err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	events, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for file, list := range map[string]runtime.Object{"nodes.yaml": nodes, "pods.yaml": pods, "events.yaml": events} {
		// As kubectl prints a list: apiVersion and kind on it.
		switch l := list.(type) {
		case *corev1.NodeList:
			l.APIVersion, l.Kind = "v1", "NodeList"
		case *corev1.PodList:
			l.APIVersion, l.Kind = "v1", "PodList"
		case *corev1.EventList:
			l.APIVersion, l.Kind = "v1", "EventList"
		}
		data, err := yaml.Marshal(list)
		if err != nil {
			return err
		}
		if err := a.Add(path.Join("cluster", file), data); err != nil {
			return err
		}
	}
	return nil
}

// exportOwnLogs adds the full logs hwk kept of the cluster's up, and the
// cluster's record (its config: no keys, passwords or tokens).
func (p *Provider) exportOwnLogs(name string, a *logs.Archive) error {
	dir, err := p.store().ClusterDir(name)
	if err != nil {
		return err
	}
	rec, err := os.ReadFile(filepath.Join(dir, clusterdir.RecordFile))
	if err != nil {
		return err
	}
	if err := a.Add(path.Join("hwk", clusterdir.RecordFile), rec); err != nil {
		return err
	}
	logDir := filepath.Join(dir, clusterdir.LogsDir)
	return filepath.WalkDir(logDir, func(f string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(logDir, f)
		return a.Add(path.Join("hwk", "logs", filepath.ToSlash(rel)), data)
	})
}
