package bootstrap

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"embed"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

//go:embed templates
var templates embed.FS

var tmpl = template.Must(template.ParseFS(templates, "templates/*"))

// CRI sockets as kubeadm spells them.
const (
	LinuxCRISocket   = "unix:///run/containerd/containerd.sock"
	WindowsCRISocket = "npipe:////./pipe/containerd-containerd"
)

// TokenTTL is how long the bootstrap token lives: long enough to add a
// node to a dev cluster later in the day.
const TokenTTL = "24h0m0s"

// containerPreflight are kubeadm's checks that a node container fails
// for reasons that do not matter there: the kernel config and modules are
// the host's, and swap is the host's too.
var containerPreflight = []string{"SystemVerification", "Swap", "FileContent--proc-sys-net-bridge-bridge-nf-call-iptables"}

// Taint is a node taint.
type Taint struct{ Key, Value, Effect string }

// WindowsTaint keeps Linux pods off Windows nodes; Windows workloads
// tolerate it through their RuntimeClass.
var WindowsTaint = Taint{Key: "os", Value: "windows", Effect: "NoSchedule"}

// InitConfig returns the kubeadm config for `kubeadm init` on the control
// plane.
func InitConfig(c Cluster) ([]byte, error) {
	sans := []string{c.ControlPlane.IP.String(), c.ControlPlane.Name, "localhost", "127.0.0.1"}
	for _, s := range c.ExtraSANs {
		if !slices.Contains(sans, s) {
			sans = append(sans, s)
		}
	}
	var ignore []string
	if c.ControlPlane.Container {
		ignore = containerPreflight
	}
	return render("kubeadm-init.yaml", map[string]any{
		"ClusterName":           c.Name,
		"KubernetesVersion":     c.KubernetesVersion,
		"Token":                 c.Token,
		"TokenTTL":              TokenTTL,
		"NodeName":              c.ControlPlane.Name,
		"NodeIP":                c.ControlPlane.IP,
		"APIServerPort":         c.APIServerPort,
		"APIServerEndpoint":     c.APIServerEndpoint(),
		"CRISocket":             LinuxCRISocket,
		"PodSubnet":             c.PodSubnet,
		"ServiceSubnet":         c.ServiceSubnet,
		"DNSDomain":             DNSDomain,
		"CertSANs":              sans,
		"IgnorePreflightErrors": ignore,
		"PatchesDir":            PatchesDir,
		"GOGC":                  GOGC,
	})
}

// JoinConfig returns the kubeadm config with which worker n joins, given the
// hash of the cluster CA (see CACertHash). Windows workers get the npipe
// CRI socket and the os=windows taint.
func JoinConfig(c Cluster, n Node, caCertHash string) ([]byte, error) {
	if caCertHash == "" {
		return nil, errors.New("join config: no CA certificate hash")
	}
	socket, taints := LinuxCRISocket, []Taint(nil)
	if n.OS == config.Windows {
		socket, taints = WindowsCRISocket, []Taint{WindowsTaint}
	}
	var ignore []string
	if n.Container {
		ignore = containerPreflight
	}
	return render("kubeadm-join.yaml", map[string]any{
		"NodeName":              n.Name,
		"OS":                    n.OS,
		"NodeIP":                n.IP,
		"APIServerEndpoint":     c.APIServerEndpoint(),
		"Token":                 c.Token,
		"CACertHash":            caCertHash,
		"CRISocket":             socket,
		"Taints":                taints,
		"IgnorePreflightErrors": ignore,
	})
}

func render(name string, data any) ([]byte, error) {
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// NewToken makes a random bootstrap token, "[a-z0-9]{6}.[a-z0-9]{16}" as
// kubeadm wants it. hwk picks it before init so that every join config,
// Windows' included, can be written as soon as the CA exists.
func NewToken() string {
	// rand.Text is 26 base32 characters (A-Z, 2-7): 130 random bits, and
	// lowercased a subset of kubeadm's alphabet.
	t := strings.ToLower(rand.Text())
	return t[:6] + "." + t[6:22]
}

// CACertHash returns kubeadm's discovery hash of a CA certificate (PEM): the
// SHA-256 of its SubjectPublicKeyInfo, as "sha256:<hex>".
func CACertHash(caPEM []byte) (string, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", errors.New("CA certificate: no PEM certificate block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("CA certificate: %w", err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
