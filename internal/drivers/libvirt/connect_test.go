package libvirt

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/hwk-dev/hwk/drivers"
)

func TestFindSocket(t *testing.T) {
	dir := t.TempDir()
	mono, modular := filepath.Join(dir, "libvirt-sock"), filepath.Join(dir, "virtqemud-sock")
	_, err := findSocket([]string{mono, modular})
	var ue *drivers.UnavailableError
	if !errors.As(err, &ue) || ue.Reason != fmt.Sprintf("no libvirt daemon is listening (looked for %s and %s)", mono, modular) ||
		ue.Fix != "install and start libvirt: `sudo apt-get install libvirt-daemon-system qemu-system-x86 qemu-utils ovmf && sudo systemctl start libvirtd`" {
		t.Errorf("no sockets: %v", err)
	}
	// A plain file is not a socket.
	if err := os.WriteFile(mono, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", modular)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, err := findSocket([]string{mono, modular}); err != nil || got != modular {
		t.Errorf("findSocket = %q, %v; want the modular socket", got, err)
	}
}

func TestConnectErrors(t *testing.T) {
	type errCase struct {
		err         error
		reason, fix string
	}
	cases := []errCase{
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.EACCES)},
			"permission denied on the libvirt socket /s",
			"add yourself to the libvirt group: `sudo usermod -aG libvirt $USER`, then log out and in (or run `newgrp libvirt`)"},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)},
			"the libvirt socket /s is there but no daemon answers",
			"start libvirt: `sudo systemctl start libvirtd` (or `virtqemud` on hosts with the modular daemons)"},
		{errors.New("rpc: unknown procedure"),
			"cannot open qemu:///system through /s: rpc: unknown procedure",
			"check that libvirtd runs and that `virsh -c qemu:///system list` works for you"},
	}
	if runtime.GOOS == "windows" {
		// Windows' AF_UNIX connect fails with Winsock's errors, as Go's
		// net returns them: WSAEACCES (10013), WSAECONNREFUSED (10061).
		cases = append(cases,
			errCase{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.Errno(10013))},
				"permission denied on the libvirt socket /s", cases[0].fix},
			errCase{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.Errno(10061))},
				"the libvirt socket /s is there but no daemon answers", cases[1].fix})
	}
	for _, tc := range cases {
		var ue *drivers.UnavailableError
		if err := connectError("/s", golibvirt.QEMUSystem, tc.err); !errors.As(err, &ue) || ue.Reason != tc.reason || ue.Fix != tc.fix {
			t.Errorf("connectError(%v) = %v", tc.err, err)
		}
	}
}

// TestConnectToDeadSocket checks that a socket file nobody listens on is
// reported as a daemon that does not answer.
func TestConnectToDeadSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "libvirt-sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	// Closing a listener removes its file; keep the file, lose the listener.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	_, err = connect([]string{path}, golibvirt.QEMUSystem)
	var ue *drivers.UnavailableError
	if !errors.As(err, &ue) || ue.Reason != "the libvirt socket "+path+" is there but no daemon answers" {
		t.Errorf("connect to a dead socket: %v", err)
	}
}
