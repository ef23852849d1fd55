package libvirt

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/hwk-dev/hwk/drivers"
)

// TestBootKernelXML checks the build VM's domain: the kernel booted directly
// with its command line, no firmware, network or graphics, every stop except
// a power-off ending it, and the two disks as QEMU NVMe devices with the
// serials the guest looks for, in slots libvirt does not hand out.
func TestBootKernelXML(t *testing.T) {
	spec := drivers.KernelBootSpec{Name: "hwk-build-node-x", Cmdline: "root=PARTUUID=p rw init=/bin/sh -- /hwk-vminit.sh", CPUs: 2, MemoryBytes: 2 << 30, ConsoleLog: "/c.log"}
	x, err := bootKernelXML(spec, false, "/pool/k", "/pool/root,1.qcow2", "/pool/out.raw")
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	if d.Type != "qemu" || d.OS.Kernel != "/pool/k" || d.OS.Cmdline != spec.Cmdline || d.OS.Firmware != "" || d.OS.Loader != nil {
		t.Errorf("os = %+v, type %s", d.OS, d.Type)
	}
	if d.OnPoweroff != "destroy" || d.OnReboot != "destroy" || d.OnCrash != "destroy" {
		t.Errorf("lifecycle = %s %s %s", d.OnPoweroff, d.OnReboot, d.OnCrash)
	}
	if len(d.Devices.Disks)+len(d.Devices.Interfaces)+len(d.Devices.Graphics) != 0 {
		t.Errorf("devices: %d disks, %d NICs, %d graphics", len(d.Devices.Disks), len(d.Devices.Interfaces), len(d.Devices.Graphics))
	}
	var args []string
	for _, a := range d.QEMUCommandline.Args {
		args = append(args, a.Value)
	}
	want := "-drive file=/pool/root,,1.qcow2,format=qcow2,if=none,id=hwkroot,cache=unsafe -device nvme,drive=hwkroot,serial=hwk-root,bus=pcie.0,addr=0x18 " +
		"-drive file=/pool/out.raw,format=raw,if=none,id=hwkout -device nvme,drive=hwkout,serial=hwk-out,bus=pcie.0,addr=0x19"
	if got := strings.Join(args, " "); got != want {
		t.Errorf("qemu args\n got %s\nwant %s", got, want)
	}
}

// TestOutputDisk checks that the output disk is read from its file in
// ranges; one that cannot be opened is an error naming the pool.
func TestOutputDisk(t *testing.T) {
	data := make([]byte, 3<<20+123)
	_, _ = rand.Read(data)
	p := filepath.Join(t.TempDir(), "out.raw")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	o := outputDisk{path: p}
	for _, r := range [][2]int64{{0, 256}, {4096, 1000}, {1 << 20, 2 << 20}, {int64(len(data)), 0}} {
		var b bytes.Buffer
		if err := o.CopyRange(&b, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), data[r[0]:r[0]+r[1]]) {
			t.Errorf("range %d+%d differs", r[0], r[1])
		}
	}
	err := outputDisk{path: filepath.Join(t.TempDir(), "gone")}.CopyRange(io.Discard, 0, 1)
	if err == nil || !strings.Contains(err.Error(), poolDir) {
		t.Errorf("a missing disk: %v", err)
	}
}
