package libvirt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// dialTimeout bounds connecting to the daemon's socket.
const dialTimeout = 5 * time.Second

// findSocket returns the first of sockets that exists. A system libvirt
// answers on /var/run/libvirt/libvirt-sock (the monolithic libvirtd, or
// virtproxyd forwarding to the modular daemons) or on
// /var/run/libvirt/virtqemud-sock (the modular QEMU daemon itself).
func findSocket(sockets []string) (string, error) {
	for _, s := range sockets {
		if fi, err := os.Stat(s); err == nil && fi.Mode()&fs.ModeSocket != 0 {
			return s, nil
		}
	}
	return "", &drivers.UnavailableError{
		Driver: config.DriverLibvirt,
		Reason: fmt.Sprintf("no libvirt daemon is listening (looked for %s and %s)", sockets[0], sockets[len(sockets)-1]),
		Fix:    "install and start libvirt: `sudo apt-get install libvirt-daemon-system qemu-system-x86 qemu-utils ovmf && sudo systemctl start libvirtd`",
	}
}

// connect opens a connection to uri through the first socket of sockets
// that exists.
func connect(sockets []string, uri golibvirt.ConnectURI) (*golibvirt.Libvirt, error) {
	sock, err := findSocket(sockets)
	if err != nil {
		return nil, err
	}
	l := golibvirt.NewWithDialer(dialers.NewLocal(dialers.WithSocket(sock), dialers.WithLocalTimeout(dialTimeout)))
	if err := l.ConnectToURI(uri); err != nil {
		return nil, connectError(sock, uri, err)
	}
	return l, nil
}

// connectError turns a failed connection into what the user can act on.
func connectError(sock string, uri golibvirt.ConnectURI, err error) error {
	switch {
	case errors.Is(err, syscall.EACCES) || errors.Is(err, fs.ErrPermission) || deniedOnHost(err):
		return &drivers.UnavailableError{
			Driver: config.DriverLibvirt,
			Reason: fmt.Sprintf("permission denied on the libvirt socket %s", sock),
			Fix:    "add yourself to the libvirt group: `sudo usermod -aG libvirt $USER`, then log out and in (or run `newgrp libvirt`)",
		}
	case errors.Is(err, syscall.ECONNREFUSED) || refusedOnHost(err):
		return &drivers.UnavailableError{
			Driver: config.DriverLibvirt,
			Reason: fmt.Sprintf("the libvirt socket %s is there but no daemon answers", sock),
			Fix:    "start libvirt: `sudo systemctl start libvirtd` (or `virtqemud` on hosts with the modular daemons)",
		}
	default:
		return &drivers.UnavailableError{
			Driver: config.DriverLibvirt,
			Reason: fmt.Sprintf("cannot open %s through %s: %v", uri, sock, err),
			Fix:    "check that libvirtd runs and that `virsh -c qemu:///system list` works for you",
		}
	}
}

// connect opens a connection for one operation; the caller disconnects.
func (d *Driver) connect() (*golibvirt.Libvirt, error) {
	return connect(d.sockets, d.uri)
}

// with runs fn on a connection opened for it, and closes it after.
func (d *Driver) with(fn func(l *golibvirt.Libvirt) error) error {
	_, err := withConn(d, func(l *golibvirt.Libvirt) (struct{}, error) { return struct{}{}, fn(l) })
	return err
}

// withConn does with's work for an fn that returns a value.
func withConn[T any](d *Driver, fn func(l *golibvirt.Libvirt) (T, error)) (T, error) {
	l, err := d.connect()
	if err != nil {
		var zero T
		return zero, err
	}
	defer l.Disconnect()
	return fn(l)
}

// isCode reports whether err is libvirt's error code.
func isCode(err error, code golibvirt.ErrorNumber) bool {
	var e golibvirt.Error
	return errors.As(err, &e) && e.Code == uint32(code)
}
