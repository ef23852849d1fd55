package diskimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hwk-dev/hwk/internal/hostexec"
)

// consoleLines is how much of the serial console a failed BootCheck quotes.
const consoleLines = 30

// firmware is a UEFI build for QEMU: its code, mapped read-only, and the
// template of its variable store, which must be a writable copy per VM.
type firmware struct{ code, vars string }

// firmwares returns the UEFI builds to look for, in order: where
// distributions put OVMF, then QEMU's own build, which upstream installers
// (Windows, Homebrew) ship in share/ beside qemu. Each pairs code and vars
// of the same build and size.
func firmwares(qemu string) []firmware {
	fws := []firmware{
		{"/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"},       // Debian, Ubuntu: ovmf
		{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"}, // newer Debian, Ubuntu
		{"/usr/share/edk2/ovmf/OVMF_CODE.fd", "/usr/share/edk2/ovmf/OVMF_VARS.fd"},
	}
	bin := filepath.Dir(qemu)
	for _, dir := range []string{filepath.Join(bin, "share"), filepath.Join(bin, "..", "share", "qemu")} {
		fws = append(fws, firmware{filepath.Join(dir, "edk2-x86_64-code.fd"), filepath.Join(dir, "edk2-i386-vars.fd")})
	}
	return fws
}

func findFirmware(qemu string) (firmware, error) {
	for _, fw := range firmwares(qemu) {
		if isFile(fw.code) && isFile(fw.vars) {
			return fw, nil
		}
	}
	return firmware{}, errors.New("no UEFI firmware for QEMU (Debian/Ubuntu: apt-get install ovmf)")
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// BootCheck boots disk under QEMU, leaving it unchanged, with each of extra
// (raw images, such as a cidata seed disk) read-only after it. It returns
// nil once want (say, "Reached target multi-user.target") appears on the
// serial console, which it copies to console, else an error quoting its
// last lines once timeout passes or QEMU exits; QEMU is killed by then.
func BootCheck(ctx context.Context, disk string, timeout time.Duration, want string, console io.Writer, extra ...string) error {
	if want == "" {
		return errors.New("boot check: nothing to wait for")
	}
	if console == nil {
		console = io.Discard
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return fmt.Errorf("boot check: qemu-system-x86_64 is not installed (Debian/Ubuntu: apt-get install qemu-system-x86): %w", err)
	}
	fw, err := findFirmware(qemu)
	if err != nil {
		return fmt.Errorf("boot check: %w", err)
	}
	// Named, not probed: QEMU refuses to write block 0 of a disk whose
	// format it guessed, and warns about it.
	format, _, err := Info(ctx, disk)
	if err != nil {
		return fmt.Errorf("boot check: %w", err)
	}
	vars, err := copyToTemp(fw.vars, "hwk-ovmf-vars-*.fd")
	if err != nil {
		return fmt.Errorf("boot check: copy the UEFI variable store: %w", err)
	}
	defer os.Remove(vars)

	args := []string{
		// Why TCG: emulating the CPU works where KVM does not, as in most
		// CI containers.
		"-accel", "tcg",
		"-machine", "q35",
		"-smp", "2",
		"-m", "2048",
		"-drive", "if=pflash,format=raw,readonly=on,file=" + fw.code,
		"-drive", "if=pflash,format=raw,file=" + vars,
		"-drive", "if=virtio,format=" + format + ",file=" + disk,
		// The guest's writes go to a temporary overlay QEMU deletes.
		"-snapshot",
		"-nic", "none",
		"-display", "none",
		"-monitor", "none",
		"-serial", "stdio",
		// A guest that panics and reboots ends the check at once instead
		// of booting again until the timeout.
		"-no-reboot",
	}
	for _, e := range extra {
		args = append(args, "-drive", "if=virtio,format=raw,readonly=on,file="+e)
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("boot check: %w", err)
	}
	defer pr.Close()
	stderr := hostexec.NewTail(16 << 10)
	cmd := hostexec.Command(ctx, qemu, args...)
	// A file, not a writer: QEMU writes the console straight into the
	// pipe, and it closes when QEMU exits, whatever became of our side.
	cmd.Stdout = pw
	cmd.Stderr = stderr
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return fmt.Errorf("boot check: start qemu: %w", err)
	}

	scan := &consoleScanner{want: want, found: make(chan struct{})}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := pr.Read(buf)
			if n > 0 {
				// A console writer's failure must not stop the check.
				_, _ = console.Write(buf[:n])
				scan.feed(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	waitDone := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(waitDone)
	}()
	defer func() {
		cancel() // kills QEMU if it still runs
		<-waitDone
		<-readDone
	}()

	select {
	case <-scan.found:
		return nil
	case <-waitDone:
		// The console up to QEMU's exit, which may hold want itself.
		<-readDone
		select {
		case <-scan.found:
			return nil
		default:
		}
		if ctx.Err() != nil {
			break
		}
		msg := fmt.Sprintf("qemu exited (%v) before the guest printed %q", waitErr, want)
		if s := strings.Join(stderr.Lines(tailLines), "\n"); s != "" {
			msg += "; qemu said:\n" + s
		}
		return fmt.Errorf("boot check %s: %s%s", disk, msg, scan.tail())
	case <-ctx.Done():
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("boot check %s: the guest did not print %q within %s%s", disk, want, timeout, scan.tail())
	}
	return fmt.Errorf("boot check %s: %w", disk, ctx.Err())
}

func copyToTemp(src, pattern string) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// consoleScanner looks for want in a serial console's output, line by line
// with terminal escapes removed: systemd colours the unit name in its
// status lines ("Reached target \x1b[0;1;39mmulti-user.target\x1b[0m"), so
// the raw bytes never hold the text. It keeps the last lines for errors.
type consoleScanner struct {
	want  string
	found chan struct{} // closed once want is seen

	mu    sync.Mutex
	line  []byte   // the line being written, raw
	lines []string // the last complete lines, plain
	seen  bool
}

// maxLine bounds a line that never ends, such as firmware screen output.
const maxLine = 8 << 10

func (s *consoleScanner) feed(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			break
		}
		s.line = append(s.line, p[:i]...)
		s.check(s.line)
		s.lines = append(s.lines, plain(s.line))
		if len(s.lines) > 2*consoleLines {
			s.lines = append(s.lines[:0], s.lines[len(s.lines)-consoleLines:]...)
		}
		s.line = s.line[:0]
		p = p[i+1:]
	}
	s.line = append(s.line, p...)
	if len(s.line) > maxLine {
		s.line = append(s.line[:0], s.line[len(s.line)-maxLine/2:]...)
	}
	// The partial line too: want may be a prompt that no newline follows.
	s.check(s.line)
}

func (s *consoleScanner) check(line []byte) {
	if !s.seen && strings.Contains(plain(line), s.want) {
		s.seen = true
		close(s.found)
	}
}

// tail returns the console's last lines, for an error message.
func (s *consoleScanner) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := s.lines
	if p := plain(s.line); strings.TrimSpace(p) != "" {
		lines = append(lines[:len(lines):len(lines)], p)
	}
	lines = lines[max(0, len(lines)-consoleLines):]
	if len(lines) == 0 {
		return "; the console stayed empty"
	}
	return fmt.Sprintf("; the console's last %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
}

// plain removes terminal escape sequences and carriage returns.
func plain(b []byte) string {
	var sb strings.Builder
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == 0x1b && i+1 < len(b) && b[i+1] == '[':
			// CSI: parameters and intermediates up to a final byte
			// in 0x40-0x7e.
			i += 2
			for i < len(b) && (b[i] < 0x40 || b[i] > 0x7e) {
				i++
			}
		case c == 0x1b:
			i++ // a two-byte escape, or a lone ESC at the end
		case c == '\r':
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}
