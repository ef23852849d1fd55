package libvirt

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// TestVolumesOnSystemLibvirt uploads a base disk and a seed into the hwk
// pool of a real libvirtd, makes a node overlay over the base, checks
// with qemu-img that the overlay is a thin qcow2 backed by the base, and
// deletes them all.
func TestVolumesOnSystemLibvirt(t *testing.T) {
	l := daemon(t, golibvirt.QEMUSystem)
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("no qemu-img")
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
	if err := writeSeedISO(iso, files); err != nil {
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
