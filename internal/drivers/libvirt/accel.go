package libvirt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/hwk-dev/hwk/internal/state"
)

// accel is how QEMU runs guests on this host.
type accel struct {
	// KVM reports whether KVM runs guests here; otherwise QEMU emulates the
	// CPU (TCG).
	KVM bool `json:"kvm"`
	// Why is what the KVM probe saw when KVM is not used.
	Why string `json:"why,omitempty"`
	// TPM reports whether libvirt can give a guest an emulated TPM (swtpm).
	TPM bool `json:"tpm"`
	// Host identifies what the verdict was reached on: it is probed
	// again after a reboot or an upgrade of libvirt or QEMU.
	Host string `json:"host"`
}

// probeTimeout bounds the KVM probe: OVMF reaches its boot manager in
// about a second under KVM (several under TCG), and a broken KVM fails
// at once or hangs.
const probeTimeout = 10 * time.Second

// firmwareMarkers are what OVMF prints on the serial console once it has
// reached its boot manager: 64-bit mode, paging, interrupts and PCI all
// working, which is what a kernel needs next.
var firmwareMarkers = []string{"BdsDxe", "UEFI Interactive Shell"}

// host is what an acceleration verdict holds for: this boot of this
// kernel, and the libvirt and QEMU versions.
type host struct {
	Boot, Libvirt, QEMU string
}

func (h host) id() string {
	return fmt.Sprintf("boot %s libvirt %s qemu %s", h.Boot, h.Libvirt, h.QEMU)
}

func hostOf(l *golibvirt.Libvirt) (host, error) {
	lib, err := l.ConnectGetLibVersion()
	if err != nil {
		return host{}, fmt.Errorf("libvirt version: %w", err)
	}
	hv, err := l.ConnectGetVersion()
	if err != nil {
		return host{}, fmt.Errorf("QEMU version: %w", err)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return host{Boot: strings.TrimSpace(string(boot)), Libvirt: version(lib), QEMU: version(hv)}, nil
}

// version renders libvirt's major*1e6+minor*1e3+micro.
func version(v uint64) string {
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}

// accelCache keeps the verdict in memory and, once the driver makes a
// machine, in hwk's cache directory, so that only the first command after
// a boot or an upgrade pays for the probe. Commands that only look (hwk
// get drivers, config validate) write nothing.
type accelCache struct {
	dirs state.Dirs

	mu    sync.Mutex
	got   *accel
	saved bool
}

func (c *accelCache) path() string { return filepath.Join(c.dirs.Cache, "libvirt", "accel.json") }

// get returns the verdict for the host l runs on, and that host,
// probing when nothing valid is known; save writes the verdict to the
// cache directory.
func (c *accelCache) get(ctx context.Context, l *golibvirt.Libvirt, save bool) (accel, host, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, err := hostOf(l)
	if err != nil {
		return accel{}, h, err
	}
	id := h.id()
	if c.got == nil || c.got.Host != id {
		c.got, c.saved = nil, false
		var a accel
		if data, err := os.ReadFile(c.path()); err == nil && json.Unmarshal(data, &a) == nil && a.Host == id {
			c.got, c.saved = &a, true
		} else {
			if a, err = probeAccel(ctx, l); err != nil {
				return accel{}, h, err
			}
			a.Host = id
			c.got = &a
		}
	}
	if save && !c.saved {
		if data, err := json.Marshal(c.got); err == nil && os.MkdirAll(filepath.Dir(c.path()), 0o700) == nil {
			// Only a cache: a write that fails costs the next command a
			// probe.
			c.saved = state.WriteFileAtomic(c.path(), data, 0o644) == nil
		}
	}
	return *c.got, h, nil
}

// emulated reports whether the verdict known so far is TCG.
func (c *accelCache) emulated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got != nil && !c.got.KVM
}

// probeAccel finds how guests can run: QEMU with UEFI firmware must be
// there (else nothing boots), and KVM is used only when a guest actually
// runs under it. /dev/kvm and libvirt's capabilities are not enough: on
// some hosts (nested, or KVM variants such as PVM) they are there and a
// stock guest still fails at once or hangs.
func probeAccel(ctx context.Context, l *golibvirt.Libvirt) (accel, error) {
	tcg, err := domainCaps(l, "qemu")
	if err != nil {
		return accel{}, fmt.Errorf("QEMU cannot run x86_64 q35 guests here: %w", err)
	}
	if !hasEFI(tcg) {
		return accel{}, errNoFirmware
	}
	a := accel{TPM: hasTPMEmulator(tcg)}
	kvm, err := domainCaps(l, "kvm")
	switch {
	case err != nil:
		a.Why = "libvirt offers no KVM: " + err.Error()
	case !hasEFI(kvm):
		a.Why = "libvirt offers no UEFI firmware for KVM guests"
	default:
		if err := bootProbe(ctx, l, true); err != nil {
			a.Why = err.Error()
		} else {
			a.KVM, a.TPM = true, hasTPMEmulator(kvm)
		}
	}
	return a, nil
}

// errNoFirmware is a QEMU without OVMF.
var errNoFirmware = errors.New("QEMU has no UEFI firmware (OVMF), which hwk's node images boot with")

// domainCaps returns what libvirt can give a q35 guest of virtType.
func domainCaps(l *golibvirt.Libvirt, virtType string) (*libvirtxml.DomainCaps, error) {
	raw, err := l.ConnectGetDomainCapabilities(nil, golibvirt.OptString{"x86_64"}, golibvirt.OptString{"q35"}, golibvirt.OptString{virtType}, 0)
	if err != nil {
		return nil, err
	}
	var caps libvirtxml.DomainCaps
	if err := caps.Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("read domain capabilities: %w", err)
	}
	return &caps, nil
}

func hasEFI(c *libvirtxml.DomainCaps) bool {
	if c.OS == nil || c.OS.Supported != "yes" {
		return false
	}
	return slices.ContainsFunc(c.OS.Enums, func(e libvirtxml.DomainCapsEnum) bool {
		return e.Name == "firmware" && slices.Contains(e.Values, "efi")
	})
}

func hasTPMEmulator(c *libvirtxml.DomainCaps) bool {
	if c.Devices == nil || c.Devices.TPM == nil || c.Devices.TPM.Supported != "yes" {
		return false
	}
	return slices.ContainsFunc(c.Devices.TPM.Enums, func(e libvirtxml.DomainCapsEnum) bool {
		return e.Name == "backendModel" && slices.Contains(e.Values, "emulator")
	})
}

// probeName is the probe's transient domain.
const probeName = "hwk-accel-probe"

// probeXML returns a guest with UEFI firmware and nothing to boot: the
// firmware itself is the test. Its CPU is what hwk's nodes get.
func probeXML(kvm bool, nvram string) (string, error) {
	typ, cpu := virtCPU(kvm)
	d := &libvirtxml.Domain{
		Type:        typ,
		Name:        probeName,
		Description: "hwk: checks whether " + typ + " runs guests on this host; removed at once",
		Memory:      &libvirtxml.DomainMemory{Value: 256, Unit: "MiB"},
		VCPU:        &libvirtxml.DomainVCPU{Value: 1},
		CPU:         cpu,
		OS:          uefi(nvram),
		Features:    &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}, APIC: &libvirtxml.DomainFeatureAPIC{}},
		OnCrash:     "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Serials: []libvirtxml.DomainSerial{{
				Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
				Target: &libvirtxml.DomainSerialTarget{Port: new(uint)},
			}},
		},
	}
	return d.Marshal()
}

// bootProbe starts a throwaway guest (under KVM, or TCG) and waits for
// its firmware to reach the boot manager on the serial console.
func bootProbe(ctx context.Context, l *golibvirt.Libvirt, kvm bool) error {
	virtType, _ := virtCPU(kvm)
	pool, err := ensurePool(l)
	if err != nil {
		return err
	}
	// The firmware's variables go in hwk's pool, where they are removed
	// with the guest; libvirt would leave them in its nvram directory.
	nvram := poolDir + "/" + probeName + "_VARS.fd"
	defer func() {
		_ = l.StoragePoolRefresh(pool, 0)
		_ = deleteVolume(l, pool, probeName+"_VARS.fd")
	}()
	if d, err := l.DomainLookupByName(probeName); err == nil {
		// Left by a probe that was killed.
		_ = l.DomainDestroy(d)
	}
	xml, err := probeXML(kvm, nvram)
	if err != nil {
		return err
	}
	// Autodestroy: the guest goes with this connection, even if hwk dies.
	d, err := l.DomainCreateXML(xml, golibvirt.DomainStartAutodestroy)
	if err != nil {
		return fmt.Errorf("QEMU could not start a %s guest: %s", virtType, firstLine(libvirtMessage(err)))
	}
	defer func() { _ = l.DomainDestroy(d) }()

	console := &markerWriter{markers: firmwareMarkers, found: make(chan struct{})}
	go func() {
		// Returns when the guest is destroyed or the connection closes.
		_ = l.DomainOpenConsole(d, nil, console, uint32(golibvirt.DomainConsoleForce))
	}()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-console.found:
			return nil
		case <-ctx.Done():
			if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return fmt.Errorf("a %s guest's firmware did not reach its boot manager within %s (it printed %d bytes)", virtType, probeTimeout, console.size())
		case <-tick.C:
			s, reason, err := l.DomainGetState(d, 0)
			if err != nil || golibvirt.DomainState(s) != golibvirt.DomainRunning {
				return fmt.Errorf("a %s guest stopped while its firmware started (state %d, reason %d)", virtType, s, reason)
			}
		}
	}
}

// libvirtMessage returns the message of a libvirt error without its code.
func libvirtMessage(err error) string {
	var e golibvirt.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// firstLine returns the most telling line of QEMU's complaint: its first,
// without libvirt's "internal error: qemu unexpectedly closed the
// monitor:" and the timestamp QEMU puts before its own words.
func firstLine(msg string) string {
	if i := strings.Index(msg, "monitor: "); i >= 0 {
		msg = msg[i+len("monitor: "):]
	}
	line, _, _ := strings.Cut(msg, "\n")
	if i := strings.Index(line, "Z qemu-system"); i >= 0 {
		line = line[i+2:]
	}
	return strings.TrimSpace(line)
}

// markerWriter watches a console for any of markers.
type markerWriter struct {
	markers []string
	found   chan struct{}

	mu   sync.Mutex
	buf  []byte // the last bytes seen, enough to hold a marker cut in two
	seen int
	done bool
}

func (w *markerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	w.seen += len(p)
	w.buf = append(w.buf, p...)
	for _, m := range w.markers {
		if bytes.Contains(w.buf, []byte(m)) {
			w.done = true
			close(w.found)
			break
		}
	}
	if len(w.buf) > 256 {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-256:]...)
	}
	return len(p), nil
}

func (w *markerWriter) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}
