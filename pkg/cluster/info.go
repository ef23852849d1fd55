package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/kubeconfig"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/clusterdir"
)

// Info is one cluster as `hwk get clusters` lists it.
type Info struct {
	Name              string `json:"name"`
	KubernetesVersion string `json:"kubernetesVersion"`
	Nodes             int    `json:"nodes"`
	Context           string `json:"context"`
}

// NotFoundError is a cluster that does not exist.
type NotFoundError struct{ Name string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no cluster named %s\n  fix: `hwk get clusters` lists them; `hwk up --name %s` makes it", e.Name, e.Name)
}

// List describes every cluster that has a directory, by name.
func (p *Provider) List() ([]Info, error) {
	names, err := p.store().List()
	if err != nil {
		return nil, err
	}
	out := []Info{}
	for _, n := range names {
		info := Info{Name: n, Context: kubeconfig.ContextName(n)}
		if rec, err := p.record(n); err == nil {
			info.KubernetesVersion, info.Nodes = rec.KubernetesVersion, len(rec.Nodes)
		}
		out = append(out, info)
	}
	return out, nil
}

// Config returns the recorded config of the cluster called name (every default
// filled in, as up made it), or a *NotFoundError.
func (p *Provider) Config(name string) (*config.Cluster, error) { return p.record(name) }

func (p *Provider) record(name string) (*config.Cluster, error) {
	dir, err := p.store().ExistingDir(name)
	if clusterdir.IsNotExist(err) {
		return nil, &NotFoundError{Name: name}
	}
	if err != nil {
		return nil, err
	}
	rec, err := clusterdir.ReadRecord(dir)
	if clusterdir.IsNotExist(err) {
		return nil, &NotFoundError{Name: name}
	}
	return rec, err
}

// Kubeconfig returns the cluster's kubeconfig for the host, context hwk-NAME.
func (p *Provider) Kubeconfig(name string) ([]byte, error) {
	if _, err := p.record(name); err != nil {
		return nil, err
	}
	dir, err := p.store().ClusterDir(name)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, clusterdir.KubeconfigFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cluster %s has no kubeconfig yet (its up did not get past kubeadm init)\n  fix: `hwk down --name %s`, then up again", name, name)
	}
	return data, err
}

func (p *Provider) client(name string) (kubernetes.Interface, error) {
	data, err := p.Kubeconfig(name)
	if err != nil {
		return nil, err
	}
	rest, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, err
	}
	rest.Timeout = 5 * time.Second
	return kubernetes.NewForConfig(rest)
}

// NodeInfo is one node as `hwk get nodes` shows it: the machine as its
// driver sees it and the Node as Kubernetes does.
type NodeInfo struct {
	Name   string `json:"name"`
	Role   string `json:"role"`
	OS     string `json:"os"`
	Driver string `json:"driver"`
	IP     string `json:"ip"`
	// Machine is the driver's state: running, stopped, missing.
	Machine string `json:"machine"`
	// Kubernetes is the Node's readiness: Ready, NotReady (why), or
	// unknown when the API server does not answer.
	Kubernetes string `json:"kubernetes"`
	Version    string `json:"version,omitempty"`
}

// Nodes describes the cluster's nodes.
func (p *Provider) Nodes(ctx context.Context, name string) ([]NodeInfo, error) {
	rec, err := p.record(name)
	if err != nil {
		return nil, err
	}
	k8s := map[string]*corev1.Node{}
	apiErr := errors.New("no kubeconfig")
	if cs, err := p.client(name); err == nil {
		var list *corev1.NodeList
		if list, apiErr = cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); apiErr == nil {
			for i := range list.Items {
				k8s[list.Items[i].Name] = &list.Items[i]
			}
		}
	}
	out := make([]NodeInfo, 0, len(rec.Nodes))
	for _, n := range rec.Nodes {
		ni := NodeInfo{Name: n.Name, Role: string(n.Role), OS: string(n.OS), Driver: n.Driver, IP: n.IP, Machine: "unknown", Kubernetes: "unknown"}
		if d, err := p.Registry.Get(n.Driver); err == nil {
			if m, err := d.Inspect(ctx, drivers.Ref{Cluster: name, Name: n.Name}); err == nil {
				ni.Machine = string(m.State)
				if m.Detail != "" && m.Detail != ni.Machine {
					ni.Machine += " (" + m.Detail + ")"
				}
			}
		}
		switch kn := k8s[n.Name]; {
		case apiErr != nil:
		case kn == nil:
			ni.Kubernetes = "not registered"
		default:
			if ok, why := bootstrap.NodeReady(kn); ok {
				ni.Kubernetes = "Ready"
			} else {
				ni.Kubernetes = why
			}
			ni.Version = kn.Status.NodeInfo.KubeletVersion
		}
		out = append(out, ni)
	}
	return out, nil
}

// Status is a cluster's health at a glance.
type Status struct {
	Name       string          `json:"name"`
	Context    string          `json:"context"`
	APIServer  string          `json:"apiServer"`
	APIReady   bool            `json:"apiReady"`
	APIError   string          `json:"apiError,omitempty"`
	Nodes      []NodeInfo      `json:"nodes"`
	Components []ComponentInfo `json:"components"`
	// Healthy is true when the API server answers, every node is Ready
	// and every component has all its pods Ready.
	Healthy bool `json:"healthy"`
}

// ComponentInfo is one of the cluster's own workloads.
type ComponentInfo struct {
	Name  string `json:"name"`
	Ready int32  `json:"ready"`
	Want  int32  `json:"want"`
}

// components are the workloads Status reports: the Linux ones must be
// fully Ready; the Windows ones want pods only when Windows nodes exist.
var components = bootstrap.SystemWorkloads(true)

// Status reports the cluster's health.
func (p *Provider) Status(ctx context.Context, name string) (*Status, error) {
	nodes, err := p.Nodes(ctx, name)
	if err != nil {
		return nil, err
	}
	st := &Status{Name: name, Context: kubeconfig.ContextName(name), Nodes: nodes, Components: []ComponentInfo{}}
	cs, err := p.client(name)
	if err != nil {
		st.APIError = err.Error()
		return st, nil
	}
	if data, err := p.Kubeconfig(name); err == nil {
		if rest, err := clientcmd.RESTConfigFromKubeConfig(data); err == nil {
			st.APIServer = rest.Host
		}
	}
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		st.APIError = err.Error()
		return st, nil
	}
	st.APIReady = true
	st.Healthy = true
	for _, n := range nodes {
		if n.Kubernetes != "Ready" {
			st.Healthy = false
		}
	}
	for _, w := range components {
		ready, want, _, err := bootstrap.WorkloadStatus(ctx, cs, w)
		if err != nil || ready < want {
			st.Healthy = false
		}
		st.Components = append(st.Components, ComponentInfo{Name: w.Name, Ready: ready, Want: want})
	}
	return st, nil
}
