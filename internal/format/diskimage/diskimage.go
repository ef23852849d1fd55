// Package diskimage turns a node rootfs into the VM disk formats hwk's
// drivers boot (qcow2 for libvirt, VHDX for Hyper-V, VDI for VirtualBox),
// reads their headers back, and boot-tests a disk under QEMU.
//
// WriteRawDisk writes the raw GPT disk in Go (github.com/diskfs/go-diskfs)
// from a tar stream of the rootfs, never unpacked on the host: an EFI
// system partition with systemd-boot, the kernel and the initramfs, then
// an ext4 root named by PARTUUID. It needs no tool and no root, on any OS.
// What of a tar it cannot put in the ext4 (hard links become copies;
// device nodes outside /dev, most extended attributes and a path given
// twice are errors) is listed at writeRoot.
//
// WriteQCOW2, WriteVDI and WriteVHDX turn that raw disk into qcow2, VDI or
// VHDX in Go, reading only its data. The node image build
// (pkg/nodeimage) makes its disks with these four.
//
// The package compiles everywhere. Info and BootCheck run qemu-img and
// QEMU, and need them at run time.
package diskimage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
)

// tailLines is how much of QEMU's output a failed BootCheck quotes.
const tailLines = 20

// Info reads a disk image's format and virtual size (in bytes) with
// qemu-img info.
func Info(ctx context.Context, path string) (format string, virtualSize int64, err error) {
	qemuImg, err := lookQemuImg()
	if err != nil {
		return "", 0, fmt.Errorf("disk image info: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, qemuImg, "info", "--output=json", path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", 0, fmt.Errorf("qemu-img info %s: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &info); err != nil {
		return "", 0, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	return info.Format, info.VirtualSize, nil
}

func lookQemuImg() (string, error) {
	p, err := exec.LookPath("qemu-img")
	if err != nil {
		return "", fmt.Errorf("qemu-img is not installed (Debian/Ubuntu: apt-get install qemu-utils): %w", err)
	}
	return p, nil
}

// tailBuffer keeps the end of what is written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

// tailKeep bounds the buffer: enough for a few dozen long lines.
const tailKeep = 16 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailKeep; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Lines returns up to the last n lines written, without their line ends.
func (t *tailBuffer) Lines(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLines(string(t.buf), n)
}

func lastLines(s string, n int) []string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\r", ""), "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	return lines[max(0, len(lines)-n):]
}
