package libvirt

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/drivers/vmnode"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// TestVolumesOnSystemLibvirt uploads a base disk and a seed into the hwk
// pool of a real libvirtd, makes a node overlay over the base, checks
// with qemu-img that the overlay is a thin qcow2 backed by the base, and
// deletes them all.
func TestVolumesOnSystemLibvirt(t *testing.T) {
	l := daemon(t, golibvirt.QEMUSystem)
	if _, err := exec.LookPath("qemu-img"); err != nil {
		if os.Getenv("HWK_REQUIRE_QEMU") == "1" {
			t.Fatal("HWK_REQUIRE_QEMU=1 but there is no qemu-img (Debian: qemu-utils)")
		}
		t.Skip("no qemu-img (Debian: qemu-utils) to check the volumes with")
	}
	pool, err := ensurePool(l)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base := filepath.Join(dir, "base.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", base, "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v\n%s", err, out)
	}
	data, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"hwk-it-base.qcow2", "hwk-it-cp.qcow2", "hwk-it-cp-seed.iso"}
	t.Cleanup(func() {
		for _, n := range names {
			_ = deleteVolume(l, pool, n)
		}
	})
	basePath, err := uploadVolume(l, pool, names[0], bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	overlay, err := overlayVolume(l, pool, names[1], basePath, 128<<20)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("qemu-img", "info", "--output=json", "-U", overlay).Output()
	if err != nil {
		t.Fatalf("qemu-img info %s: %v", overlay, err)
	}
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
		ActualSize  int64  `json:"actual-size"`
		Backing     string `json:"backing-filename"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	if info.Format != "qcow2" || info.Backing != basePath || info.VirtualSize != 128<<20 || info.ActualSize > 1<<20 {
		t.Errorf("overlay %+v, want a thin qcow2 of 128M over %s", info, basePath)
	}

	s := spec("it-cp", config.Linux, config.ControlPlane, "172.31.250.10")
	files, err := seedFiles(s, subnet)
	if err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(dir, "seed.iso")
	if err := vmnode.WriteSeedISO(iso, files); err != nil {
		t.Fatal(err)
	}
	isoData, err := os.ReadFile(iso)
	if err != nil {
		t.Fatal(err)
	}
	seedPath, err := uploadVolume(l, pool, names[2], bytes.NewReader(isoData), int64(len(isoData)))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(seedPath); err == nil && !bytes.Equal(got, isoData) {
		t.Errorf("the uploaded seed differs from the ISO")
	}

	for _, n := range names {
		for range 2 {
			if err := deleteVolume(l, pool, n); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.StorageVolLookupByName(pool, n); !isCode(err, golibvirt.ErrNoStorageVol) {
			t.Errorf("volume %s after delete: %v", n, err)
		}
	}
	for _, p := range []string{basePath, overlay, seedPath} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", p, err)
		}
	}
}

func TestVolumeXML(t *testing.T) {
	got, err := volumeXML("n.qcow2", "qcow2", 20<<30, "/var/lib/libvirt/images/hwk/base.qcow2")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "volume-overlay.xml", got)
	got, err = poolXML()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "pool.xml", got)
}

// TestWindowsDomainOnSystemLibvirt checks that the Windows domain the driver
// generates, with this host's acceleration and its TPM, is accepted by the
// real libvirt and QEMU and runs (its firmware, as there is no Windows image
// to boot yet), then goes without a trace.
func TestWindowsDomainOnSystemLibvirt(t *testing.T) {
	l := daemon(t, golibvirt.QEMUSystem)
	a, _, err := (&accelCache{dirs: state.Dirs{Cache: t.TempDir()}}).get(context.Background(), l, false)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := ensurePool(l)
	if err != nil {
		t.Fatal(err)
	}
	ref := drivers.Ref{Cluster: "hwk-it", Name: "hwk-it-win"}
	clean := func() {
		_ = removeDomain(l, ref.Name)
		for _, n := range []string{overlayName(ref), seedName(ref), nvramName(ref)} {
			_ = deleteVolume(l, pool, n)
		}
	}
	// An earlier run killed before its cleanup leaves these behind.
	clean()
	t.Cleanup(clean)
	xml, err := volumeXML(overlayName(ref), "qcow2", 1<<30, "")
	if err != nil {
		t.Fatal(err)
	}
	vol, err := l.StorageVolCreateXML(pool, xml, 0)
	if err != nil {
		t.Fatal(err)
	}
	disk, err := l.StorageVolGetPath(vol)
	if err != nil {
		t.Fatal(err)
	}
	s := spec(ref.Name, config.Windows, config.Worker, "172.31.250.11")
	s.Cluster = ref.Cluster
	files, err := seedFiles(s, subnet)
	if err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(t.TempDir(), "seed.iso")
	if err := vmnode.WriteSeedISO(iso, files); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(iso)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := uploadVolume(l, pool, seedName(ref), bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	console := filepath.Join(t.TempDir(), "console.log")
	x, err := domainXML(domainSpec{MachineSpec: s, Disk: disk, Seed: seed, NVRAM: poolDir + "/" + nvramName(ref), Console: console, KVM: a.KVM, TPM: a.TPM})
	if err != nil {
		t.Fatal(err)
	}
	// No network: the domain's NIC would need hwk-hwk-it; the test
	// leaves it out rather than make one.
	x = strings.Replace(x, x[strings.Index(x, "<interface"):strings.Index(x, "</interface>")+len("</interface>")], "", 1)
	if _, err := l.DomainDefineXMLFlags(x, 0); err != nil {
		t.Fatalf("define: %v\n%s", err, x)
	}
	if err := startDomain(l, ref.Name); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if st, _, err := domainState(l, ref.Name); err != nil || st != golibvirt.DomainRunning {
		t.Fatalf("state %v (%v)", st, err)
	}
	t.Logf("a Windows domain runs under %s with TPM %v", map[bool]string{true: "KVM", false: "TCG"}[a.KVM], a.TPM)
	if err := removeDomain(l, ref.Name); err != nil {
		t.Fatal(err)
	}
	_ = l.StoragePoolRefresh(pool, 0)
	if _, err := l.StorageVolLookupByName(pool, nvramName(ref)); !isCode(err, golibvirt.ErrNoStorageVol) {
		t.Errorf("the domain's UEFI variables outlived it: %v", err)
	}
}
