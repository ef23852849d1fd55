package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/pkg/node"
)

// CalicoVersion is the Calico release whose manifests are embedded.
const CalicoVersion = "v3.31.0"

// CalicoBlockSize is the IPAM block size: Windows' kube-proxy handles one
// block per host, so it must be fixed before the first pod.
const CalicoBlockSize = 26

// CalicoManifest returns Calico's calico-vxlan.yaml configured for c (pod
// range as the first IP pool, VXLAN VNI and port), less
// calico-kube-controllers (see CalicoControllersManifest). nodePlugins
// reports whether every Linux node has CalicoCNIImage's plugins
// (NodeHasCalicoPlugins); only then does install-cni keep them.
func CalicoManifest(c Cluster, nodePlugins bool) ([]byte, error) {
	raw, err := images.Manifests.ReadFile("manifests/calico-vxlan.yaml")
	if err != nil {
		return nil, err
	}
	env := []envVar{
		{"CALICO_IPV4POOL_CIDR", c.PodSubnet.String()},
		{"CALICO_IPV4POOL_VXLAN", "Always"}, // Why: Windows cannot do CrossSubnet.
		{"CALICO_IPV4POOL_IPIP", "Never"},
		{"CALICO_IPV4POOL_BLOCK_SIZE", strconv.Itoa(CalicoBlockSize)},
		{"CALICO_IPV4POOL_NAT_OUTGOING", "true"},
		{"FELIX_VXLANVNI", strconv.Itoa(c.VXLANVNI)},
		{"FELIX_VXLANPORT", strconv.Itoa(c.VXLANPort)},
		// Why: node addresses come from the Node objects (the kubelet's
		// --node-ip) rather than being guessed from interfaces.
		{"IP_AUTODETECTION_METHOD", "kubernetes-internal-ip"},
		// Felix clears connect-time load balancing left by a BPF dataplane
		// through libbpf, which a calico-node built without cgo (hwk's
		// source build) lacks: it panics there. hwk never runs the BPF
		// dataplane, so there is nothing to clear.
		{"FELIX_DebugSkipCTLBCleanup", "true"},
		{"GOGC", strconv.Itoa(GOGC)},
	}
	patched := false
	out, err := mapDocuments(raw, func(doc map[string]any) (edit, error) {
		switch {
		case isControllers(doc):
			return drop, nil
		case doc["kind"] != "DaemonSet" || name(doc) != "calico-node":
			return keep, nil
		}
		patched = true
		if err := setContainerEnv(doc, "calico-node", env); err != nil {
			return keep, err
		}
		// Why: calicoNodeStart drops node-status-reporter and
		// monitor-addresses, each a calico-node process of its own (about
		// 18 MiB) that an hwk node has no use for: node-status-reporter
		// reports BGP sessions, and there are none in VXLAN mode;
		// monitor-addresses follows a node whose address changes while it
		// runs, and an hwk node's address is fixed (a new one comes only
		// with a restart, when startup reads it again).
		if err := setContainerField(doc, "calico-node", "command", []any{"/bin/sh", "-c", calicoNodeStart}); err != nil {
			return keep, err
		}
		// Why: install-cni would copy the 57 MB plugin to two files and
		// read each back, and the kernel charges those pages to the node;
		// the node image already has them (node-images/linux/components.yaml's
		// fromImages). Only with nodePlugins: a node image made by another
		// hwk may carry another Calico's, which install-cni must replace.
		if nodePlugins {
			if err := setContainerEnv(doc, "install-cni", []envVar{{"UPDATE_CNI_BINARIES", "false"}}); err != nil {
				return keep, err
			}
		}
		// Why: liveness, like readiness, asks Felix's health endpoint
		// instead of starting calico-node -felix-live every ten seconds.
		if err := setContainerField(doc, "calico-node", "livenessProbe", map[string]any{
			"httpGet":             map[string]any{"host": "localhost", "path": "/liveness", "port": 9099},
			"periodSeconds":       10,
			"initialDelaySeconds": 10,
			"failureThreshold":    6,
			"timeoutSeconds":      10,
		}); err != nil {
			return keep, err
		}
		// Felix serves its health on localhost (FELIX_HEALTHHOST), in the
		// node's network namespace, which is the kubelet's.
		// Why: asked every second, calico-node is Ready sooner; the
		// manifest runs calico-node -felix-ready every ten, which asks the
		// same endpoint.
		return changed, setContainerField(doc, "calico-node", "readinessProbe", map[string]any{
			"httpGet":          map[string]any{"host": "localhost", "path": "/readiness", "port": 9099},
			"periodSeconds":    1,
			"timeoutSeconds":   1,
			"failureThreshold": 3,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("calico manifest: %w", err)
	}
	if !patched {
		return nil, errors.New("calico manifest: no calico-node DaemonSet to configure")
	}
	// Why: calico-node and its init containers reach the API server at its
	// own address (Calico's kubernetes-services-endpoint ConfigMap) rather
	// than through the kubernetes Service, which works only once kube-proxy
	// has programmed it: before that install-cni fails and is restarted ten
	// seconds later, and the node waits for it to be Ready.
	// The endpoint comes first: calico-node reads it only if it exists
	// when its containers start (envFrom, optional).
	endpoint := c.APIServerEndpoint()
	return append([]byte(fmt.Sprintf(`---
# Where Calico's Linux pods reach the API server (see CalicoManifest).
apiVersion: v1
kind: ConfigMap
metadata:
  name: kubernetes-services-endpoint
  namespace: kube-system
data:
  KUBERNETES_SERVICE_HOST: "%s"
  KUBERNETES_SERVICE_PORT: "%d"
`, endpoint.Addr(), endpoint.Port())), out...), nil
}

// CalicoCNIImage is the image of calico-node's install-cni container in
// CalicoManifest: the one whose plugins a node image may carry.
const CalicoCNIImage = "quay.io/calico/cni:" + CalicoVersion

// NodeHasCalicoPlugins reports whether the Linux node n's root has
// Calico's CNI plugin from CalicoCNIImage, as the node image records
// (images.RootFilesRecord). Any failure to tell is a no: install-cni then
// copies the plugins, as upstream's manifest does.
func NodeHasCalicoPlugins(ctx context.Context, n *node.Node) bool {
	return n.Run(ctx, node.Cmd{Args: []string{"grep", "-qxF", CalicoCNIImage + " opt/cni/bin/calico", "/" + images.RootFilesRecord}}) == nil
}

// calicoNodeStart is the script calico-node's container runs instead of
// the image's start_runit (calico node/filesystem/sbin/start_runit): the
// same steps, less the node-status-reporter and monitor-addresses services
// Calico's rc.local enables (see CalicoManifest for why).
const calicoNodeStart = `env > /etc/envvars
/etc/rc.local || { retval=$?; echo >&2 "Calico node failed to start"; exit $retval; }
rm -rf /etc/service/enabled/node-status-reporter /etc/service/enabled/monitor-addresses
NODENAME=$(cat /var/lib/calico/nodename)
export NODENAME
exec runsvdir -P /etc/service/enabled
`

// CalicoControllersManifest returns calico-kube-controllers from Calico's
// manifest (its Deployment and PodDisruptionBudget), which up applies
// apart from the rest: its pod, like CoreDNS's, needs calico-node running
// on its node (see InstallCoreDNS). Its readiness is looked at every two
// seconds rather than ten, and it runs with GOGC as the rest of the node.
func CalicoControllersManifest() ([]byte, error) {
	raw, err := images.Manifests.ReadFile("manifests/calico-vxlan.yaml")
	if err != nil {
		return nil, err
	}
	found := false
	out, err := mapDocuments(raw, func(doc map[string]any) (edit, error) {
		if !isControllers(doc) {
			return drop, nil
		}
		if doc["kind"] != "Deployment" {
			return keep, nil
		}
		found = true
		if err := setContainerEnv(doc, "calico-kube-controllers", []envVar{{"GOGC", strconv.Itoa(GOGC)}}); err != nil {
			return keep, err
		}
		return changed, editContainer(doc, "calico-kube-controllers", func(c map[string]any) error {
			probe, _ := c["readinessProbe"].(map[string]any)
			if probe == nil {
				return errors.New("no readinessProbe")
			}
			probe["periodSeconds"] = 2
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("calico-kube-controllers manifest: %w", err)
	}
	if !found {
		return nil, errors.New("calico manifest: no calico-kube-controllers Deployment")
	}
	return out, nil
}

// isControllers reports whether a document of Calico's manifest is
// calico-kube-controllers' Deployment or PodDisruptionBudget (its
// ServiceAccount and RBAC stay with the rest).
func isControllers(doc map[string]any) bool {
	return (doc["kind"] == "Deployment" || doc["kind"] == "PodDisruptionBudget") && name(doc) == "calico-kube-controllers"
}

// IPAMConfigManifest turns on strict block affinity: without it a Linux
// node borrows addresses from a Windows node's block, which Windows
// cannot route. It must exist before any Windows node joins; applying it
// needs Calico's CRDs in place first.
func IPAMConfigManifest() []byte {
	return []byte(`# Calico IPAM settings (what calicoctl ipam configure --strictaffinity=true writes).
apiVersion: crd.projectcalico.org/v1
kind: IPAMConfig
metadata:
  name: default
spec:
  strictAffinity: true
  autoAllocateBlocks: true
  maxBlocksPerHost: 0
`)
}

type envVar struct{ name, value string }

// edit is what mapDocuments does with a document.
type edit int

const (
	keep    edit = iota // as it was, byte for byte
	changed             // re-encoded from what fn left in the map
	drop                // left out
)

// mapDocuments calls fn on each YAML document of a multi-document stream
// and keeps, re-encodes or drops it as fn returns.
func mapDocuments(stream []byte, fn func(map[string]any) (edit, error)) ([]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var out bytes.Buffer
	for {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if m == nil {
			continue // comments only
		}
		e, err := fn(m)
		if err != nil {
			return nil, err
		}
		switch e {
		case drop:
			continue
		case changed:
			if doc, err = yaml.Marshal(m); err != nil {
				return nil, err
			}
		}
		out.WriteString("---\n")
		out.Write(bytes.TrimLeft(doc, "\n"))
		if !bytes.HasSuffix(doc, []byte("\n")) {
			out.WriteByte('\n')
		}
	}
	return out.Bytes(), nil
}

func name(doc map[string]any) string {
	md, _ := doc["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}

// setContainerEnv sets env on the named container of a workload's pod
// template, replacing variables of the same name and appending the rest.
func setContainerEnv(doc map[string]any, container string, env []envVar) error {
	return editContainer(doc, container, func(cm map[string]any) error {
		vars, _ := cm["env"].([]any)
		for _, e := range env {
			found := false
			for i, v := range vars {
				vm, _ := v.(map[string]any)
				if vm["name"] == e.name {
					vars[i] = map[string]any{"name": e.name, "value": e.value}
					found = true
				}
			}
			if !found {
				vars = append(vars, map[string]any{"name": e.name, "value": e.value})
			}
		}
		cm["env"] = vars
		return nil
	})
}

// setContainerField sets one field of the named container of a
// workload's pod template.
func setContainerField(doc map[string]any, container, field string, value any) error {
	return editContainer(doc, container, func(cm map[string]any) error {
		cm[field] = value
		return nil
	})
}

// editContainer calls fn on the named container of a workload's pod
// template.
func editContainer(doc map[string]any, container string, fn func(map[string]any) error) error {
	spec, _ := doc["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	containers, _ := pod["containers"].([]any)
	inits, _ := pod["initContainers"].([]any)
	for _, c := range append(containers, inits...) {
		if cm, _ := c.(map[string]any); cm["name"] == container {
			if err := fn(cm); err != nil {
				return fmt.Errorf("%s %s, container %s: %w", doc["kind"], name(doc), container, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%s %s has no container %q", doc["kind"], name(doc), container)
}
