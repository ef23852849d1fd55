package hyperv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
)

// exitLine, as a reply line, makes the fake process exit there.
const exitLine = "\x00exit"

// fakeProcess is a PowerShell that answers each request line by
// decoding it and asking handle for the reply lines.
type fakeProcess struct {
	in     *io.PipeWriter
	out    *io.PipeReader
	killed bool
	mu     sync.Mutex
}

func startFake(handle func(script string) []string) func(io.Writer) (process, error) {
	return func(io.Writer) (process, error) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		p := &fakeProcess{in: inW, out: outR}
		go func() {
			defer outW.Close()
			sc := bufio.NewScanner(inR)
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			re := regexp.MustCompile(`FromBase64String\('([^']*)'\)`)
			for sc.Scan() {
				if sc.Text()+"\n" == readyLine {
					if _, err := io.WriteString(outW, readyMarker+"\r\n"); err != nil {
						return
					}
					continue
				}
				m := re.FindStringSubmatch(sc.Text())
				if m == nil {
					continue // the setup line
				}
				script, _ := base64.StdEncoding.DecodeString(m[1])
				for _, l := range handle(string(script)) {
					if l == exitLine {
						return // the process ends mid-reply
					}
					if _, err := io.WriteString(outW, l+"\r\n"); err != nil {
						return
					}
				}
			}
		}()
		return p, nil
	}
}

func (p *fakeProcess) Write(b []byte) (int, error) { return p.in.Write(b) }
func (p *fakeProcess) Stdout() io.Reader           { return p.out }
func (p *fakeProcess) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killed = true
	p.in.Close()
	p.out.Close()
	return nil
}

// TestSessionProtocol checks that replies are framed and decoded, stray
// output is kept apart, error records come back structured, and one
// process serves every script until something breaks it.
func TestSessionProtocol(t *testing.T) {
	var stray bytes.Buffer
	s := &Session{Log: &stray, start: startFake(func(script string) []string {
		switch {
		case strings.Contains(script, "Get-VM -Name 'x'"):
			return []string{"WARNING: a cmdlet said something", resultMarker + `{"ok":true,"out":{"name":"x","state":"Running","ips":["172.31.250.10"]}}`, endMarker}
		case strings.Contains(script, "missing"):
			return []string{resultMarker + `{"ok":false,"error":{"message":"Hyper-V was unable to find a virtual machine with name \"missing\".","id":"InvalidParameter,Microsoft.HyperV.PowerShell.Commands.GetVM","category":"ObjectNotFound","exception":"Microsoft.HyperV.PowerShell.VirtualizationException"}}`, endMarker}
		case strings.Contains(script, "first-output"):
			// The first bytes of the process's output led by a UTF-8
			// byte order mark.
			return []string{"\ufeff" + resultMarker + `{"ok":true,"out":"Running"}`, endMarker}
		case strings.Contains(script, "die"):
			return []string{"half a line", exitLine}
		case strings.Contains(script, "hang"):
			return nil
		}
		return []string{resultMarker + `{"ok":true,"out":null}`, endMarker}
	})}
	before := Starts()
	ctx := context.Background()
	var state string
	if err := s.Run(ctx, "first-output", &state); err != nil || state != "Running" {
		t.Fatalf("a reply after a byte order mark: %q %v", state, err)
	}
	var v vmInfo
	if err := s.Run(ctx, inspectScript("x"), &v); err != nil || v.State != "Running" || v.IPs[0] != "172.31.250.10" {
		t.Fatalf("inspect: %+v %v", v, err)
	}
	if !strings.Contains(stray.String(), "WARNING: a cmdlet said something") {
		t.Errorf("stray output: %q", stray.String())
	}
	err := s.Run(ctx, "Hyper-V\\Get-VM -Name 'missing'", nil)
	var pe *PSError
	if !errors.As(err, &pe) || !IsNotFound(err) || pe.Exception != "Microsoft.HyperV.PowerShell.VirtualizationException" ||
		err.Error() != `Hyper-V was unable to find a virtual machine with name "missing". (ObjectNotFound)` {
		t.Errorf("error record: %#v", err)
	}
	for range 10 {
		if err := s.Run(ctx, "Write-Output 1", nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := Starts() - before; got != 1 {
		t.Errorf("13 scripts started PowerShell %d times, want 1", got)
	}
	if err := s.Run(ctx, "die", nil); err == nil || !strings.Contains(err.Error(), "exited in the middle of a reply") {
		t.Errorf("a dying process: %v", err)
	}
	if err := s.Run(ctx, "Write-Output 1", nil); err != nil {
		t.Fatal(err)
	}
	if got := Starts() - before; got != 2 {
		t.Errorf("after a dead process: %d starts, want 2", got)
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := s.Run(cctx, "hang", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a script that never answers: %v", err)
	}
	s.Close()
}

// TestSessionWithoutPowerShell checks that off Windows, where there is no
// PowerShell, the driver is unavailable, with the reason and a fix.
func TestSessionWithoutPowerShell(t *testing.T) {
	s := &Session{start: func(io.Writer) (process, error) { return nil, errors.New("Hyper-V runs only on Windows") }}
	d := New(Options{Runner: s})
	_, err := d.Preflight(context.Background())
	var ue *drivers.UnavailableError
	if !errorAs(err, &ue) || ue.Reason != "Hyper-V runs only on Windows" || !strings.Contains(ue.Fix, "libvirt") {
		t.Errorf("preflight: %v", err)
	}
	if _, err := d.List(context.Background(), "demo"); !errorAs(err, &ue) {
		t.Errorf("list: %v", err)
	}
	// A PowerShell that runs but answers in a shape hwk cannot read is
	// the operation failing, not the driver unavailable.
	s = &Session{start: startFake(func(string) []string { return []string{resultMarker + `{"ok":true,"out":"not a list"}`, endMarker} })}
	defer s.Close()
	d = New(Options{Runner: s})
	if _, err := d.List(context.Background(), "demo"); err == nil || errorAs(err, &ue) || !strings.Contains(err.Error(), "PowerShell's reply: json: cannot unmarshal") {
		t.Errorf("list with an unreadable reply: %v", err)
	}
}

// TestSessionSilentPowerShell checks that a powershell.exe that starts and
// never answers (as Wine's stub) fails the first script within the
// session's start limit, as PowerShell missing: Preflight reports the
// driver unusable and why, instead of waiting without end.
func TestSessionSilentPowerShell(t *testing.T) {
	var started int
	silent := func(io.Writer) (process, error) {
		started++
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		go func() { io.Copy(io.Discard, inR); outW.Close() }()
		return &fakeProcess{in: inW, out: outR}, nil
	}
	s := &Session{start: silent, startTimeout: 200 * time.Millisecond}
	d := New(Options{Runner: s})
	began := time.Now()
	_, err := d.Preflight(context.Background())
	var ue *drivers.UnavailableError
	if !errorAs(err, &ue) || !strings.Contains(ue.Reason, "powershell.exe started but did not answer in 200ms") {
		t.Errorf("preflight with a silent PowerShell: %v", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("preflight took %s", took)
	}
	// The next scripts of the command fail the same way without starting
	// PowerShell again: doctor's and up's checks wait for it once.
	for range 2 {
		if err := s.Run(context.Background(), "Write-Output 1", nil); !errors.Is(err, errNoPowerShell) || !strings.Contains(err.Error(), "did not answer in 200ms") {
			t.Errorf("a later script: %v", err)
		}
	}
	if started != 1 {
		t.Errorf("PowerShell started %d times in one command", started)
	}
	// A new command's session tries again.
	s.Close()
	if err := s.Run(context.Background(), "Write-Output 1", nil); !errors.Is(err, errNoPowerShell) || started != 2 {
		t.Errorf("after Close: %v, %d starts", err, started)
	}
}

// TestInstall checks the install VM's transcript, and its VM removed with
// the disk kept; and that a VM removed from outside fails and takes the
// disk along.
func TestInstall(t *testing.T) {
	const removeInstall, stateMark = "if ($vm) {\n    if ($vm.State -ne 'Off')", "if ($vm) { [string]$vm.State } else { '' }"
	f := (&fakePS{t: t}).quiet(removeInstall).quiet("-SizeBytes").quiet("Msvm_Keyboard")
	f.add(fakeprog.Exchange{Script: []string{stateMark}, Reply: "vm/state-running", Times: 2}).
		add(fakeprog.Exchange{Script: []string{stateMark}, Reply: "vm/state-off"})
	d, root, _ := testDriver(t, f)
	old := installPoll
	installPoll = time.Millisecond
	defer func() { installPoll = old }()
	spec := drivers.InstallSpec{Name: "hwk-build-x", Media: []string{filepath.Join(root, "server.iso"), filepath.Join(root, "build.iso")}, PressKey: true,
		Disk: filepath.Join(root, "disk.vhdx"), DiskBytes: 40 << 30, CPUs: 2, MemoryBytes: 4 << 30, ConsoleLog: filepath.Join(root, "console.log")}
	if err := d.Install(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	golden(t, "install.ps1", f.transcript(root))
	last := f.scripts[len(f.scripts)-1]
	if !strings.Contains(last, "Hyper-V\\Remove-VM") || strings.Contains(last, "Remove-Item") {
		t.Errorf("after a finished install the VM goes and the disk stays:\n%s", last)
	}

	f.reset().quiet(removeInstall).quiet("-SizeBytes").quiet("Msvm_Keyboard")
	f.add(fakeprog.Exchange{Script: []string{stateMark}, Reply: "vm/state-running", Times: 1}).
		add(fakeprog.Exchange{Script: []string{stateMark}, Reply: "vm/state-gone"})
	f.scripts = nil
	err := d.Install(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), "the VM was removed from outside") {
		t.Errorf("err = %v", err)
	}
	if last := f.scripts[len(f.scripts)-1]; !strings.Contains(last, "Remove-Item -LiteralPath") {
		t.Errorf("a failed install keeps its disk:\n%s", last)
	}
}

// TestInstallConsole checks that the install VM's console is copied to
// the log once its pipe is there (opens fail with "not found" until
// Hyper-V makes it), and that a pipe hwk is refused fails the install at
// once with what to do, the VM going with its disk, instead of a build
// that waits out its time on a dark console (review 4, D9).
func TestInstallConsole(t *testing.T) {
	const removeInstall, stateMark = "if ($vm) {\n    if ($vm.State -ne 'Off')", "if ($vm) { [string]$vm.State } else { '' }"
	old := installPoll
	installPoll = 20 * time.Millisecond
	defer func() { installPoll = old }()

	f := (&fakePS{t: t}).quiet(removeInstall).quiet("-SizeBytes").quiet("Msvm_Keyboard")
	f.add(fakeprog.Exchange{Script: []string{stateMark}, Reply: "vm/state-running", Times: 5}).
		add(fakeprog.Exchange{Script: []string{stateMark}, Reply: "vm/state-off"})
	d, root, _ := testDriver(t, f)
	spec := drivers.InstallSpec{Name: "hwk-build-x", Media: []string{filepath.Join(root, "server.iso")},
		Disk: filepath.Join(root, "disk.vhdx"), DiskBytes: 40 << 30, CPUs: 2, MemoryBytes: 4 << 30, ConsoleLog: filepath.Join(root, "console.log")}
	var opens int
	d.pipePoll = time.Millisecond
	d.openPipe = func(p string) (io.ReadCloser, error) {
		if p != `\\.\pipe\hwk-hwk-build-x` {
			t.Errorf("opened %s", p)
		}
		if opens++; opens < 3 {
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		}
		if opens == 3 {
			return io.NopCloser(strings.NewReader("hwk-provision: phase 1\r\n")), nil
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	if err := d.Install(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(spec.ConsoleLog); err != nil || string(b) != "hwk-provision: phase 1\r\n" {
		t.Errorf("console log %q, %v", b, err)
	}

	f.reset().quiet(removeInstall).quiet("-SizeBytes").quiet("Msvm_Keyboard")
	f.add(fakeprog.Exchange{Script: []string{stateMark}, Reply: "vm/state-running"})
	f.scripts = nil
	d.openPipe = func(p string) (io.ReadCloser, error) {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrPermission}
	}
	err := d.Install(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), `read the VM's console: open \\.\pipe\hwk-hwk-build-x`) || !strings.Contains(err.Error(), "Run as administrator") {
		t.Errorf("err = %v", err)
	}
	if last := f.scripts[len(f.scripts)-1]; !strings.Contains(last, "Remove-Item -LiteralPath") {
		t.Errorf("a failed install keeps its disk:\n%s", last)
	}
}
