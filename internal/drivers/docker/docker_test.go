package docker

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

func preflightAt(t *testing.T, host, hostOS string) *drivers.UnavailableError {
	t.Helper()
	d := New(client.WithHost(host))
	d.hostOS = hostOS
	_, err := d.Preflight(context.Background())
	var ue *drivers.UnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("Preflight(%s) = %v, want UnavailableError", host, err)
	}
	return ue
}

func TestNoDaemon(t *testing.T) {
	sock := "unix://" + filepath.Join(t.TempDir(), "docker.sock")
	cases := []struct{ hostOS, fix string }{
		{"linux", "sudo systemctl start docker"},
		{"windows", "start Docker Desktop"},
		{"darwin", "start Docker Desktop"},
	}
	for _, tc := range cases {
		ue := preflightAt(t, sock, tc.hostOS)
		if ue.Reason != "cannot reach a Docker engine at "+sock || !strings.Contains(ue.Fix, tc.fix) {
			t.Errorf("%s: %q / %q", tc.hostOS, ue.Reason, ue.Fix)
		}
	}
	// A listener that is there but is not answering: the same advice.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	ue := preflightAt(t, "tcp://"+addr, "linux")
	if !strings.Contains(ue.Fix, "unset DOCKER_HOST") {
		t.Errorf("tcp: %q / %q", ue.Reason, ue.Fix)
	}
}

func TestExtraLabels(t *testing.T) {
	d := New().WithLabels(map[string]string{"io.x-k8s.kind.cluster": "bench", LabelCluster: "someone-else"})
	l := d.labels(drivers.MachineSpec{Ref: drivers.Ref{Cluster: "c", Name: "c-cp"}, Role: config.ControlPlane, OS: config.Linux})
	if l["io.x-k8s.kind.cluster"] != "bench" || l[LabelCluster] != "c" || l[LabelNode] != "c-cp" {
		t.Errorf("labels = %v: want the extra label and hwk's own winning", l)
	}
	if l := New().labels(drivers.MachineSpec{Ref: drivers.Ref{Cluster: "c", Name: "n"}}); len(l) != 4 {
		t.Errorf("labels without extras = %v", l)
	}
}
