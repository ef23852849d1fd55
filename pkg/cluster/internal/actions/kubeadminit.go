package actions

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/bootstrap"
	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/internal/kubeconfig"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/cluster/internal/clusterdir"
)

// KubeadmInit makes the control plane with kubeadm init, then waits until
// the API server answers the host.
type KubeadmInit struct{}

// Name implements Action.
func (KubeadmInit) Name() string { return "Starting the control plane (kubeadm init)" }

// Execute implements Action.
func (KubeadmInit) Execute(ctx context.Context, c *Context) error {
	cp := c.ControlPlane()
	h, err := c.Node(ctx, cp.Name)
	if err != nil {
		return err
	}
	cfg, err := bootstrap.InitConfig(c.Boot)
	if err != nil {
		return err
	}
	if err := runLogged(ctx, c, "kubeadm-init", func(w io.Writer) error { return bootstrap.Init(ctx, h, cfg, c.Boot.ServiceSubnet, w) }, func(err error, tail, path string) error {
		err = withLog(fmt.Errorf("kubeadm init on %s: %w", cp.Name, err), "last lines of kubeadm init", hostexec.LastLines(tail, 15), path)
		return withLog(err, "last lines of the kubelet's log on "+cp.Name, bootstrap.KubeletJournal(context.WithoutCancel(ctx), h, 10), "")
	}); err != nil {
		return err
	}

	if c.CACertHash, err = bootstrap.ReadCACertHash(ctx, h); err != nil {
		return err
	}
	admin, err := bootstrap.AdminKubeconfig(ctx, h)
	if err != nil {
		return err
	}
	ep, err := c.Drivers[cp.Name].HostEndpoint(ctx, drivers.Ref{Cluster: c.Config.Name, Name: cp.Name}, uint16(c.Config.Networking.APIServerPort))
	if err != nil {
		return err
	}
	if c.HostKubeconfig, err = HostKubeconfig(admin, c.Config.Name, "https://"+ep.String()); err != nil {
		return err
	}
	data, err := clientcmd.Write(*c.HostKubeconfig)
	if err != nil {
		return err
	}
	if err := state.WriteFileAtomic(filepath.Join(c.Dir, clusterdir.KubeconfigFile), data, 0o600); err != nil {
		return err
	}
	rest, err := clientcmd.NewDefaultClientConfig(*c.HostKubeconfig, nil).ClientConfig()
	if err != nil {
		return err
	}
	newClient := c.NewClient
	if newClient == nil {
		newClient = func(rc *restclient.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(rc) }
	}
	if c.Client, err = newClient(rest); err != nil {
		return err
	}
	if err := bootstrap.WaitAPIServer(ctx, c.Client, c.Timeouts.APIServer); err != nil {
		return err
	}
	c.APIReady = time.Since(c.Started)
	return nil
}

// HostKubeconfig turns kubeadm's admin.conf into the kubeconfig the host
// uses: entries named hwk-CLUSTER, and server, the address at which the
// host reaches the API server.
func HostKubeconfig(admin []byte, cluster, server string) (*clientcmdapi.Config, error) {
	cfg, err := clientcmd.Load(admin)
	if err != nil {
		return nil, fmt.Errorf("read admin.conf: %w", err)
	}
	e, err := kubeconfig.EntryFrom(cfg)
	if err != nil {
		return nil, fmt.Errorf("read admin.conf: %w", err)
	}
	e.Cluster.Server = server
	name := kubeconfig.ContextName(cluster)
	out := clientcmdapi.NewConfig()
	out.Clusters[name] = e.Cluster
	out.AuthInfos[name] = e.AuthInfo
	out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	out.CurrentContext = name
	return out, nil
}

// runLogged runs fn with its output going to the step log called name
// and, on failure, lets explain turn the error and the output's end into
// the step's error.
func runLogged(ctx context.Context, c *Context, name string, fn func(io.Writer) error, explain func(err error, tail, path string) error) error {
	path := c.LogPath(name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	tail := hostexec.NewTail(16 << 10)
	if err := fn(io.MultiWriter(f, tail)); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return explain(err, tail.String(), path)
	}
	return nil
}
