package libvirt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/format/isoimage"
	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/internal/testing/winimagetest"
)

// TestInstallDomainXML checks that the install VM boots the first medium,
// then the disk; media are read-only SATA CD-ROMs; no network; COM1 is
// logged.
func TestInstallDomainXML(t *testing.T) {
	spec := drivers.InstallSpec{Name: "hwk-build-x", Media: []string{"/h/server.iso", "/h/build.iso"}, Disk: "/h/d.qcow2",
		DiskBytes: 40 << 30, CPUs: 2, MemoryBytes: 4 << 30, ConsoleLog: "/h/console.log"}
	x, err := installDomainXML(spec, false, "/pool/install_x.qcow2", []string{"/pool/m0.iso", "/pool/m1.iso"}, "/pool/VARS.fd")
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	disks := d.Devices.Disks
	if len(disks) != 3 {
		t.Fatalf("disks: %d", len(disks))
	}
	if disks[0].Device != "disk" || disks[0].Boot == nil || disks[0].Boot.Order != 3 || disks[0].Source.File.File != "/pool/install_x.qcow2" {
		t.Errorf("disk %+v", disks[0])
	}
	if disks[1].Device != "cdrom" || disks[1].Boot == nil || disks[1].Boot.Order != 1 || disks[1].ReadOnly == nil || disks[1].Target.Bus != "sata" {
		t.Errorf("boot medium %+v", disks[1])
	}
	if disks[2].Device != "cdrom" || disks[2].Boot != nil || disks[2].Target.Dev != "sdc" {
		t.Errorf("second medium %+v", disks[2])
	}
	if len(d.Devices.Interfaces) != 0 {
		t.Error("the install VM has a NIC; the guest downloads nothing")
	}
	if d.Devices.Serials[0].Log.File != "/h/console.log" || d.OnReboot != "restart" || d.Type != "qemu" || d.Memory.Value != 4096 {
		t.Errorf("serial %+v, on_reboot %s, type %s, memory %d", d.Devices.Serials[0].Log, d.OnReboot, d.Type, d.Memory.Value)
	}
	if d.Clock == nil || d.Clock.Offset != "utc" {
		t.Error("the Windows guest's RTC is not on UTC, the time zone its answer file sets")
	}
}

// TestInstallOnSystemLibvirt runs Install for real: the media go into the
// pool, a UEFI VM boots (under KVM or TCG), a key is pressed, the guest
// powers itself off, the disk comes back out as a qcow2, and nothing is
// left in libvirt.
func TestInstallOnSystemLibvirt(t *testing.T) {
	if os.Getenv("HWK_LIBVIRT_BOOT_TEST") != "1" {
		t.Skip("boots a UEFI VM; set HWK_LIBVIRT_BOOT_TEST=1 (make test-libvirt)")
	}
	l := daemon(t, golibvirt.QEMUSystem)
	// A stand-in for Windows Setup that ends the way it does: the last
	// line of provisioning on COM1, then the guest powers off.
	medium := winimagetest.ShellISO(t, map[string][]byte{"README.TXT": []byte("x")},
		"echo \"hwk-provision: done: the UEFI shell powers off\"\r\nreset -s\r\n")
	second := filepath.Join(t.TempDir(), "build.iso")
	if err := isoimage.Write(second, "HWKSEED", []isoimage.File{{Name: "build.json", Data: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	dirs := state.Dirs{Cache: t.TempDir(), Data: t.TempDir()}
	d := New(Options{Dirs: dirs})
	out := t.TempDir()
	// The serial log is written by virtlogd, which must reach the file.
	if err := os.Chmod(out, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := drivers.InstallSpec{
		Name: "hwk-it-install", Media: []string{medium, second}, PressKey: true,
		Disk: filepath.Join(out, "disk.qcow2"), DiskBytes: 1 << 30, CPUs: 1, MemoryBytes: 512 << 20,
		ConsoleLog: filepath.Join(out, "console.log"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	if err := d.Install(ctx, spec); err != nil {
		console, _ := os.ReadFile(spec.ConsoleLog)
		t.Fatalf("install: %v\nconsole:\n%s", err, console)
	}
	t.Logf("the VM booted, ran the shell script and powered off in %s", time.Since(start).Round(time.Second))
	console, err := os.ReadFile(spec.ConsoleLog)
	if err != nil || !strings.Contains(string(console), "hwk-provision: done: the UEFI shell powers off") {
		t.Errorf("console (%v):\n%s", err, console)
	}
	size, err := qcow2Size(spec.Disk)
	if err != nil || size != 1<<30 {
		t.Errorf("the installed disk: %d bytes, %v", size, err)
	}
	if _, found, err := domainState(l, spec.Name); err != nil || found {
		t.Errorf("the install VM is still defined (%v)", err)
	}
	pool, err := ensurePool(l)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.StoragePoolRefresh(pool, 0)
	for _, v := range []string{installDisk(spec.Name), installMedium(spec.Name, 0), installMedium(spec.Name, 1), installNVRAM(spec.Name)} {
		if _, err := l.StorageVolLookupByName(pool, v); !isCode(err, golibvirt.ErrNoStorageVol) {
			t.Errorf("volume %s outlived the install: %v", v, err)
		}
	}
}

// TestInstallFailsWhenStoppedFromOutside checks that a VM turned off by
// someone else is not a finished install: the error reports it and the
// disk is not kept.
func TestInstallFailsWhenStoppedFromOutside(t *testing.T) {
	l := daemon(t, golibvirt.QEMUSystem)
	second := filepath.Join(t.TempDir(), "build.iso")
	if err := isoimage.Write(second, "HWKSEED", []isoimage.File{{Name: "build.json", Data: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	d := New(Options{Dirs: state.Dirs{Cache: t.TempDir(), Data: t.TempDir()}})
	out := t.TempDir()
	os.Chmod(out, 0o755)
	spec := drivers.InstallSpec{
		Name: "hwk-it-install-stop", Media: []string{second}, Disk: filepath.Join(out, "disk.qcow2"),
		DiskBytes: 1 << 30, CPUs: 1, MemoryBytes: 512 << 20, ConsoleLog: filepath.Join(out, "console.log"),
	}
	old := installPoll
	installPoll = 200 * time.Millisecond
	defer func() { installPoll = old }()
	go func() {
		for range 100 {
			time.Sleep(300 * time.Millisecond)
			if dom, err := l.DomainLookupByName(spec.Name); err == nil {
				if st, _, err := l.DomainGetState(dom, 0); err == nil && golibvirt.DomainState(st) == golibvirt.DomainRunning {
					_ = l.DomainDestroy(dom)
					return
				}
			}
		}
	}()
	err := d.Install(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), "stopped without the guest powering it off (destroyed") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(spec.Disk); !os.IsNotExist(err) {
		t.Errorf("a failed install left its disk: %v", err)
	}
	if _, found, _ := domainState(l, spec.Name); found {
		t.Error("the install VM is still defined")
	}
}
