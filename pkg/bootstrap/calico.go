package bootstrap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/hwk-dev/hwk/images"
)

// CalicoVersion is the Calico release whose manifests are embedded.
const CalicoVersion = "v3.31.0"

// CalicoBlockSize is the IPAM block size: Windows' kube-proxy handles one
// block per host, so it must be fixed before the first pod.
const CalicoBlockSize = 26

// CalicoManifest is Calico's calico-vxlan.yaml for this cluster: the pod
// range as the first IP pool, in VXLAN mode Always (Windows cannot do
// CrossSubnet), the configured VNI and port, and node addresses taken from
// the Node objects (the kubelet's --node-ip) rather than guessed from
// interfaces.
func CalicoManifest(c Cluster) ([]byte, error) {
	raw, err := images.Manifests.ReadFile("manifests/calico-vxlan.yaml")
	if err != nil {
		return nil, err
	}
	env := []envVar{
		{"CALICO_IPV4POOL_CIDR", c.PodSubnet.String()},
		{"CALICO_IPV4POOL_VXLAN", "Always"},
		{"CALICO_IPV4POOL_IPIP", "Never"},
		{"CALICO_IPV4POOL_BLOCK_SIZE", strconv.Itoa(CalicoBlockSize)},
		{"CALICO_IPV4POOL_NAT_OUTGOING", "true"},
		{"FELIX_VXLANVNI", strconv.Itoa(c.VXLANVNI)},
		{"FELIX_VXLANPORT", strconv.Itoa(c.VXLANPort)},
		{"IP_AUTODETECTION_METHOD", "kubernetes-internal-ip"},
		// Felix clears connect-time load balancing left by a BPF dataplane
		// through libbpf, which a calico-node built without cgo (hwk's
		// source build) lacks: it panics there. hwk never runs the BPF
		// dataplane, so there is nothing to clear.
		{"FELIX_DebugSkipCTLBCleanup", "true"},
	}
	patched := false
	out, err := mapDocuments(raw, func(doc map[string]any) (bool, error) {
		if doc["kind"] != "DaemonSet" || name(doc) != "calico-node" {
			return false, nil
		}
		patched = true
		return true, setContainerEnv(doc, "calico-node", env)
	})
	if err != nil {
		return nil, fmt.Errorf("calico manifest: %w", err)
	}
	if !patched {
		return nil, errors.New("calico manifest: no calico-node DaemonSet to configure")
	}
	return out, nil
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

// mapDocuments calls fn on each YAML document of a multi-document stream
// and re-encodes the ones fn changed; the others are kept byte for byte.
func mapDocuments(stream []byte, fn func(map[string]any) (bool, error)) ([]byte, error) {
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
		changed, err := fn(m)
		if err != nil {
			return nil, err
		}
		if changed {
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
	spec, _ := doc["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	containers, _ := pod["containers"].([]any)
	for _, c := range containers {
		cm, _ := c.(map[string]any)
		if cm["name"] != container {
			continue
		}
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
	}
	return fmt.Errorf("%s %s has no container %q", doc["kind"], name(doc), container)
}
