package docker

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/filetar"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

//go:embed entrypoint.sh
var entrypoint []byte

const entrypointPath = "/usr/local/bin/hwk-entrypoint"

// createTimeout bounds a container create that runs to its end even when
// the caller has cancelled.
const createTimeout = 30 * time.Second

// stopTimeout is how long systemd gets to shut a node down before SIGKILL.
const stopTimeout = 30

// unprivileged applies to hc the recipe measured in DESIGN.md for engines
// that refuse --privileged (a daemon without CAP_SYS_RESOURCE): every
// capability the engine has, no seccomp/AppArmor filter, writable /proc/sys,
// /dev/kmsg.
func unprivileged(hc *container.HostConfig) {
	hc.CapAdd = []string{"ALL"}
	hc.CapDrop = []string{"SYS_RESOURCE"}
	hc.SecurityOpt = []string{"seccomp=unconfined", "apparmor=unconfined"}
	// Empty, not nil: the API's way of saying systempaths=unconfined.
	hc.MaskedPaths = []string{}
	hc.ReadonlyPaths = []string{}
	hc.Devices = []container.DeviceMapping{{PathOnHost: "/dev/kmsg", PathInContainer: "/dev/kmsg", CgroupPermissions: "rwm"}}
	// On cgroup v1 a container's devices cgroup bounds its children's:
	// privileged pods (Calico's node, kube-proxy) ask runc for every
	// device, which fails unless the node may use every device too.
	hc.DeviceCgroupRules = []string{"a *:* rwm"}
}

// hostConfig returns the node container's host side: a private cgroup
// namespace, tmpfs /run and /tmp, the host's modules read-only, containerd's
// state on volume, restarts with the engine unless hwk stop stopped it, and
// each port published on its host port in hostPorts (0: any, new each start).
func hostConfig(spec drivers.MachineSpec, volume string, privileged bool, hostPorts map[uint16]uint16) *container.HostConfig {
	// Why: the private cgroup namespace is the node's own cgroup root;
	// systemd wants tmpfs /run and /tmp; containerd's state is on a volume
	// because overlayfs snapshots cannot sit on the container's overlay
	// root. Nodes restart with the engine after a reboot or an engine
	// update.
	hc := &container.HostConfig{
		CgroupnsMode: container.CgroupnsModePrivate,
		Tmpfs:        map[string]string{"/run": "rw,exec", "/tmp": "rw,exec"},
		Binds:        []string{"/lib/modules:/lib/modules:ro"},
		Mounts: []mount.Mount{{
			Type:   mount.TypeVolume,
			Source: volume,
			Target: "/var/lib/containerd",
		}},
		// No disk limit: overlay2 enforces none except on XFS with pquota,
		// so spec.DiskBytes is not applied.
		Resources: container.Resources{
			NanoCPUs: int64(spec.CPUs) * 1e9,
			Memory:   spec.MemoryBytes,
		},
		PortBindings:  network.PortMap{},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
	}
	if privileged {
		hc.Privileged = true
		hc.SecurityOpt = []string{"seccomp=unconfined", "apparmor=unconfined"}
	} else {
		unprivileged(hc)
	}
	for _, p := range spec.Ports {
		port, _ := network.PortFrom(p, network.TCP)
		// Loopback only: the API server is not for the LAN.
		b := network.PortBinding{HostIP: netip.MustParseAddr("127.0.0.1")}
		if hp := hostPorts[p]; hp != 0 {
			b.HostPort = strconv.Itoa(int(hp))
		}
		hc.PortBindings[port] = []network.PortBinding{b}
	}
	return hc
}

func volumeName(node string) string { return node + "-containerd" }

func (d *Driver) labels(spec drivers.MachineSpec) map[string]string {
	l := map[string]string{}
	for k, v := range d.extra {
		l[k] = v
	}
	maps.Copy(l, map[string]string{
		LabelCluster: spec.Cluster,
		LabelNode:    spec.Name,
		LabelRole:    string(spec.Role),
		LabelOS:      string(spec.OS),
	})
	return l
}

// Create implements drivers.Driver.
func (d *Driver) Create(ctx context.Context, spec drivers.MachineSpec) error {
	if spec.OS != config.Linux {
		return fmt.Errorf("create node %s: the docker driver runs Linux nodes only, not %s; use hyperv, libvirt or virtualbox for Windows nodes", spec.Name, spec.OS)
	}
	c, err := d.client()
	if err != nil {
		return err
	}
	m, err := d.Inspect(ctx, spec.Ref)
	if err != nil {
		return fmt.Errorf("create node %s: %w", spec.Name, err)
	}
	if m.State != drivers.StateMissing {
		if spec.Start && m.State != drivers.StateRunning {
			return d.Start(ctx, spec.Ref)
		}
		return nil
	}
	img, err := c.ImageInspect(ctx, spec.Image)
	if cerrdefs.IsNotFound(err) {
		return &drivers.ImageMissingError{Driver: "the Docker engine", Image: spec.Image, Build: BuildCommand}
	}
	if err != nil {
		return d.wrap(c, fmt.Errorf("create node %s: inspect image %s: %w", spec.Name, spec.Image, err))
	}
	init := slices.Concat(img.Config.Entrypoint, img.Config.Cmd)
	if len(init) == 0 {
		init = []string{"/sbin/init"}
	}

	vol := volumeName(spec.Name)
	if _, err := c.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol, Labels: d.labels(spec)}); err != nil {
		return d.wrap(c, fmt.Errorf("create node %s: create volume %s: %w", spec.Name, vol, err))
	}
	seed, err := seedArchive(spec.Seed)
	if err != nil {
		return fmt.Errorf("create node %s: %w", spec.Name, err)
	}
	priv, err := d.canPrivilege(ctx, c, spec.Cluster, spec.Image)
	if err != nil {
		return fmt.Errorf("create node %s: %w", spec.Name, err)
	}
	lbl := d.labels(spec)
	lbl[LabelPrivileged] = strconv.FormatBool(priv)
	stopTimeout := stopTimeout
	exposed := network.PortSet{}
	for _, p := range spec.Ports {
		port, _ := network.PortFrom(p, network.TCP)
		exposed[port] = struct{}{}
	}
	// The engine goes on making a container after its client hangs up, so
	// a create cut short by Ctrl-C would leave a container that a `down`
	// run at once might not see yet. Let the create finish (it takes a
	// moment); the caller's cancellation is seen right after.
	hostPorts, err := d.pinPorts(c, spec.Ports)
	if err != nil {
		return fmt.Errorf("create node %s: %w", spec.Name, err)
	}
	createCtx, cancelCreate := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancelCreate()
	res, err := c.ContainerCreate(createCtx, client.ContainerCreateOptions{
		Name: spec.Name,
		Config: &container.Config{
			Image:    spec.Image,
			Hostname: spec.Name,
			Labels:   lbl,
			// systemd reads this to know it runs in a container.
			Env:         []string{"container=docker"},
			Entrypoint:  []string{entrypointPath},
			Cmd:         init,
			StopSignal:  "SIGRTMIN+3", // systemd's "halt"
			StopTimeout: &stopTimeout,
			Tty:         true, // systemd's console output goes to `docker logs`
			// Engines before API 1.44 publish only exposed ports.
			ExposedPorts: exposed,
		},
		HostConfig: hostConfig(spec, vol, priv, hostPorts),
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			NetworkName(spec.Cluster): {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: spec.IP}},
		}},
	})
	if cerrdefs.IsConflict(err) {
		return &drivers.NameInUseError{Name: spec.Name, Cluster: spec.Cluster, Owner: fmt.Sprintf("docker container %q", spec.Name), Remove: "docker rm -f " + spec.Name}
	}
	if err != nil {
		return d.wrap(c, fmt.Errorf("create node %s: %w", spec.Name, err))
	}
	if _, err := c.CopyToContainer(ctx, res.ID, client.CopyToContainerOptions{DestinationPath: "/", Content: bytes.NewReader(seed)}); err != nil {
		return d.wrap(c, fmt.Errorf("create node %s: write seed files: %w", spec.Name, err))
	}
	if spec.Start {
		return d.Start(ctx, spec.Ref)
	}
	return nil
}

// pinPorts chooses, once, the host port each guest port is published on, so
// that the kubeconfig written at up still names the API server after the
// node restarts: on a local engine, Docker Desktop's included, a loopback
// port free now. For a remote engine it returns nil: the engine picks them,
// and they change when the node restarts.
func (d *Driver) pinPorts(c *client.Client, ports []uint16) (map[uint16]uint16, error) {
	// Why: a local engine's ports are this host's; a remote engine's free
	// ports cannot be seen from here.
	if !d.localEngine(c) {
		return nil, nil
	}
	return drivers.FreeLoopbackPorts(ports)
}

// canPrivilege learns, once per driver, whether the engine starts
// privileged containers: a daemon without every capability (in a
// container, a CI sandbox) refuses them at start, not at create, so the
// only honest test is to start one.
func (d *Driver) canPrivilege(ctx context.Context, c *client.Client, cluster, image string) (bool, error) {
	d.mu.Lock()
	known := d.privileged
	d.mu.Unlock()
	if known != nil {
		return *known, nil
	}
	// As in Create: the probe container must exist for the deferred
	// remove to find it, even when the caller gives up.
	createCtx, cancelCreate := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancelCreate()
	res, err := c.ContainerCreate(createCtx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Entrypoint: []string{"/bin/true"}, Labels: map[string]string{"hwk.dev/probe": "privileged", LabelProbeFor: cluster}},
		HostConfig: &container.HostConfig{Privileged: true, AutoRemove: false},
	})
	if err != nil {
		return false, d.wrap(c, fmt.Errorf("probe for privileged containers: %w", err))
	}
	defer func() {
		_, _ = c.ContainerRemove(context.WithoutCancel(ctx), res.ID, client.ContainerRemoveOptions{Force: true})
	}()
	_, err = c.ContainerStart(ctx, res.ID, client.ContainerStartOptions{})
	ok := err == nil
	if err != nil && !strings.Contains(err.Error(), "operation not permitted") {
		return false, d.wrap(c, fmt.Errorf("probe for privileged containers: %w", err))
	}
	d.mu.Lock()
	d.privileged = &ok
	d.mu.Unlock()
	return ok, nil
}

// seedArchive returns the tar the container gets before its first start: the
// entrypoint, authorized keys and the seed's files.
func seedArchive(s drivers.Seed) ([]byte, error) {
	files := []drivers.File{{Path: entrypointPath, Mode: 0o755, Content: entrypoint}}
	if len(s.SSHAuthorizedKeys) > 0 {
		keys := strings.Join(s.SSHAuthorizedKeys, "\n") + "\n"
		files = append(files, drivers.File{Path: "/root/.ssh/authorized_keys", Mode: 0o600, Content: []byte(keys)})
	}
	files = append(files, s.Files...)
	return filetar.Pack(files)
}

// Start implements drivers.Driver.
func (d *Driver) Start(ctx context.Context, m drivers.Ref) error {
	c, id, err := d.container(ctx, m)
	if err != nil {
		return err
	}
	if _, err := c.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		// Docker Desktop reports "Ports are not available" for a port in a
		// range Windows has excluded since (netsh int ipv4 show
		// excludedportrange protocol=tcp: Hyper-V and WinNAT reserve
		// blocks of the dynamic range, which may move at a reboot).
		if msg := err.Error(); strings.Contains(msg, "port is already allocated") || strings.Contains(msg, "address already in use") || strings.Contains(msg, "Ports are not available") {
			return fmt.Errorf("start node %s: its pinned host port is taken by another program, or (on Windows) now in a range the system excludes: %w\n  fix: stop that program and run `hwk start --name %s` (on Windows `netsh int ipv4 show excludedportrange protocol=tcp` lists the excluded ranges), or delete the cluster (`hwk down --name %s`) and up it again on a new port", m.Name, err, m.Cluster, m.Cluster)
		}
		return d.wrap(c, fmt.Errorf("start node %s: %w", m.Name, err))
	}
	return nil
}

// Stop implements drivers.Driver: systemd gets SIGRTMIN+3 and stopTimeout
// seconds to halt, then the engine kills it.
func (d *Driver) Stop(ctx context.Context, m drivers.Ref) error {
	c, id, err := d.container(ctx, m)
	if err != nil {
		return err
	}
	t := stopTimeout
	if _, err := c.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &t}); err != nil && !cerrdefs.IsNotModified(err) {
		return d.wrap(c, fmt.Errorf("stop node %s: %w", m.Name, err))
	}
	return nil
}

// Delete implements drivers.Driver: the container, then every volume made
// for the node, found by label so a half-made node goes too.
func (d *Driver) Delete(ctx context.Context, m drivers.Ref) error {
	c, err := d.client()
	if err != nil {
		return err
	}
	if err := d.removeContainers(ctx, c, m); err != nil {
		return err
	}
	// A volume still in use belongs to a container the engine was still
	// making when we listed (an up interrupted mid-create): list and
	// remove again for a little while.
	deadline := time.Now().Add(deleteRetry)
	for {
		err := d.removeVolumes(ctx, c, m)
		if err == nil || !strings.Contains(err.Error(), "in use") || time.Now().After(deadline) {
			return err
		}
		if err := d.removeContainers(ctx, c, m); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// deleteRetry is how long Delete waits for containers still being made.
const deleteRetry = 15 * time.Second

// removeContainers removes every container of node m.
func (d *Driver) removeContainers(ctx context.Context, c *client.Client, m drivers.Ref) error {
	ctrs, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: nodeFilter(m)})
	if err != nil {
		return d.wrap(c, fmt.Errorf("delete node %s: %w", m.Name, err))
	}
	for _, ctr := range ctrs.Items {
		_, err := c.ContainerRemove(ctx, ctr.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return d.wrap(c, fmt.Errorf("delete node %s: remove container: %w", m.Name, err))
		}
	}
	return nil
}

// removeVolumes removes every volume made for node m.
func (d *Driver) removeVolumes(ctx context.Context, c *client.Client, m drivers.Ref) error {
	vols, err := c.VolumeList(ctx, client.VolumeListOptions{Filters: nodeFilter(m)})
	if err != nil {
		return d.wrap(c, fmt.Errorf("delete node %s: list volumes: %w", m.Name, err))
	}
	for _, v := range vols.Items {
		if _, err := c.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return d.wrap(c, fmt.Errorf("delete node %s: remove volume %s: %w", m.Name, v.Name, err))
		}
	}
	return nil
}

func nodeFilter(m drivers.Ref) client.Filters {
	return client.Filters{}.Add("label", LabelCluster+"="+m.Cluster, LabelNode+"="+m.Name)
}

// container returns the client and the ID of m's container.
func (d *Driver) container(ctx context.Context, m drivers.Ref) (*client.Client, string, error) {
	c, err := d.client()
	if err != nil {
		return nil, "", err
	}
	id, err := d.find(ctx, c, m)
	return c, id, err
}

// find returns the ID of m's container.
func (d *Driver) find(ctx context.Context, c *client.Client, m drivers.Ref) (string, error) {
	ctrs, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: nodeFilter(m)})
	if err != nil {
		return "", d.wrap(c, fmt.Errorf("find node %s: %w", m.Name, err))
	}
	if len(ctrs.Items) == 0 {
		return "", fmt.Errorf("node %s of cluster %s has no container: %w", m.Name, m.Cluster, ErrMissing)
	}
	return ctrs.Items[0].ID, nil
}

// ErrMissing is a node whose container does not exist.
var ErrMissing = errors.New("missing")

// inspect finds m's container and inspects it. A container removed
// between the two calls is ErrMissing, as if it had never been found.
func (d *Driver) inspect(ctx context.Context, m drivers.Ref) (*client.Client, container.InspectResponse, error) {
	c, id, err := d.container(ctx, m)
	if err != nil {
		return nil, container.InspectResponse{}, err
	}
	res, err := c.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, container.InspectResponse{}, fmt.Errorf("node %s of cluster %s has no container: %w", m.Name, m.Cluster, ErrMissing)
	}
	if err != nil {
		return nil, container.InspectResponse{}, d.wrap(c, fmt.Errorf("inspect node %s: %w", m.Name, err))
	}
	return c, res.Container, nil
}

// Inspect implements drivers.Driver.
func (d *Driver) Inspect(ctx context.Context, m drivers.Ref) (drivers.Machine, error) {
	_, ctr, err := d.inspect(ctx, m)
	if errors.Is(err, ErrMissing) {
		return drivers.Machine{Ref: m, State: drivers.StateMissing}, nil
	}
	if err != nil {
		return drivers.Machine{}, err
	}
	return machine(ctr), nil
}

func machine(ctr container.InspectResponse) drivers.Machine {
	l := ctr.Config.Labels
	m := drivers.Machine{
		Ref:  drivers.Ref{Cluster: l[LabelCluster], Name: l[LabelNode]},
		Role: config.Role(l[LabelRole]),
		OS:   config.OS(l[LabelOS]),
	}
	if ctr.State != nil {
		m.Detail = string(ctr.State.Status)
		switch ctr.State.Status {
		case container.StateRunning:
			m.State = drivers.StateRunning
		case container.StateCreated, container.StateExited, container.StateDead:
			m.State = drivers.StateStopped
			if ctr.State.Status == container.StateExited {
				m.Detail = fmt.Sprintf("exited (%d)", ctr.State.ExitCode)
			}
		default:
			m.State = drivers.StateOther
		}
	}
	if ctr.NetworkSettings != nil {
		if ep := ctr.NetworkSettings.Networks[NetworkName(m.Cluster)]; ep != nil {
			m.IP = ep.IPAddress
			if !m.IP.IsValid() && ep.IPAMConfig != nil {
				m.IP = ep.IPAMConfig.IPv4Address
			}
		}
	}
	return m
}

// List implements drivers.Driver.
func (d *Driver) List(ctx context.Context, cluster string) ([]drivers.Machine, error) {
	c, err := d.client()
	if err != nil {
		return nil, err
	}
	ctrs, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelCluster+"="+cluster)})
	if err != nil {
		return nil, d.wrap(c, fmt.Errorf("list nodes of %s: %w", cluster, err))
	}
	var out []drivers.Machine
	for _, ctr := range ctrs.Items {
		res, err := c.ContainerInspect(ctx, ctr.ID, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, d.wrap(c, fmt.Errorf("list nodes of %s: %w", cluster, err))
		}
		out = append(out, machine(res.Container))
	}
	slices.SortFunc(out, func(a, b drivers.Machine) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
