package hyperv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/pscheck"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/state"
)

// allScripts is every kind of script the driver sends, each variant.
func allScripts() map[string]string {
	gw := netip.MustParseAddr("172.31.250.1")
	spec := vmSpec{Name: "demo-cp", Dir: `C:\hwk\demo-cp`, Disk: `C:\hwk\demo-cp\disk.vhdx`, Parent: `C:\cache\disk.vhdx`, Seed: `C:\hwk\demo-cp\cidata.iso`,
		MemoryBytes: 4 << 30, CPUs: 2, MAC: "00155D1FFA0A", Notes: `hwk:{"cluster":"demo"}`, Start: true}
	win := spec
	win.Windows = true
	return map[string]string{
		"preflight.ps1":       preflightScript(),
		"network-facts.ps1":   networkFactsScript(),
		"network-make.ps1":    ensureNetworkScript(gw, 24, true, true, true),
		"network-delete.ps1":  deleteNetworkScript(gw),
		"inspect.ps1":         inspectScript("demo-cp"),
		"list.ps1":            listScript(),
		"create-facts.ps1":    createFactsScript("demo-cp", `C:\hwk\demo-cp`),
		"create-linux.ps1":    createScript(spec),
		"create-windows.ps1":  createScript(win),
		"start.ps1":           startScript("demo-cp"),
		"stop.ps1":            stopScript("demo-cp", StopGrace),
		"delete.ps1":          deleteScript("demo-cp", `C:\hwk\demo-cp`),
		"delete-files.ps1":    deleteScript("", `C:\hwk\demo-cp`),
		"install.ps1":         installScript("hwk-build-x", `C:\cache\hwk-build-x`, `C:\cache\disk.vhdx`, 40<<30, 2, 4<<30, []string{`C:\iso\server.iso`, `C:\cache\build.iso`}),
		"install-key.ps1":     pressKeyScript("hwk-build-x", pressSeconds),
		"install-state.ps1":   stateScript("hwk-build-x"),
		"install-remove.ps1":  removeInstallScript("hwk-build-x", `C:\cache\disk.vhdx`, false),
		"install-keep.ps1":    removeInstallScript("hwk-build-x", `C:\cache\disk.vhdx`, true),
		"session-setup.ps1":   sessionSetup,
		"session-request.ps1": requestLine("Write-Output 1"),
	}
}

// TestPowerShellSyntax: every script, as the session runs it (wrapped),
// through the PowerShell grammar.
func TestPowerShellSyntax(t *testing.T) {
	scripts := map[string]string{}
	for name, s := range allScripts() {
		scripts[name] = Wrap(s)
	}
	pscheck.Check(t, scripts)
}

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

// TestSessionProtocol: replies are framed and decoded, stray output is
// kept apart, error records come back structured, and one process serves
// every script until something breaks it.
func TestSessionProtocol(t *testing.T) {
	var stray bytes.Buffer
	s := &Session{Log: &stray, start: startFake(func(script string) []string {
		switch {
		case strings.Contains(script, "Get-VM -Name 'x'"):
			return []string{"WARNING: a cmdlet said something", resultMarker + `{"ok":true,"out":{"name":"x","state":"Running","ips":["172.31.250.10"]}}`, endMarker}
		case strings.Contains(script, "missing"):
			return []string{resultMarker + `{"ok":false,"error":{"message":"Hyper-V was unable to find a virtual machine with name \"missing\".","id":"InvalidParameter,Microsoft.HyperV.PowerShell.Commands.GetVM","category":"ObjectNotFound","exception":"Microsoft.HyperV.PowerShell.VirtualizationException"}}`, endMarker}
		case strings.Contains(script, "die"):
			return []string{"half a line", exitLine}
		case strings.Contains(script, "hang"):
			return nil
		}
		return []string{resultMarker + `{"ok":true,"out":null}`, endMarker}
	})}
	before := Starts()
	ctx := context.Background()
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
		t.Errorf("12 scripts started PowerShell %d times, want 1", got)
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

// TestSessionWithoutPowerShell: off Windows there is no PowerShell, and
// the driver says so with a fix, as unavailable.
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

// TestInstall: the install VM's transcript, and its VM removed with the
// disk kept; a VM removed from outside fails and takes the disk along.
func TestInstall(t *testing.T) {
	states := []string{"Running", "Running", "Off"}
	f := &fakePS{t: t}
	f.answers = []answer{{marker: "if ($vm) { [string]$vm.State }", out: nil}}
	calls := 0
	d, root, _ := testDriver(t, f)
	d.ps = runFunc(func(ctx context.Context, script string, out any) error {
		if strings.Contains(script, "[string]$vm.State } else") {
			st := states[min(calls, len(states)-1)]
			calls++
			return f.answerWith(script, st, out)
		}
		return f.Run(ctx, script, out)
	})
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

	states, calls, f.scripts = []string{"Running", ""}, 0, nil
	err := d.Install(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), "the VM was removed from outside") {
		t.Errorf("err = %v", err)
	}
	if last := f.scripts[len(f.scripts)-1]; !strings.Contains(last, "Remove-Item -LiteralPath") {
		t.Errorf("a failed install keeps its disk:\n%s", last)
	}
}

type runFunc func(ctx context.Context, script string, out any) error

func (r runFunc) Run(ctx context.Context, script string, out any) error { return r(ctx, script, out) }

// answerWith records script and answers v.
func (f *fakePS) answerWith(script string, v any, out any) error {
	f.answers = append([]answer{{marker: script, out: v}}, f.answers...)
	err := f.Run(context.Background(), script, out)
	f.answers = f.answers[1:]
	return err
}

// TestCommandStartsPowerShellOnce: every Hyper-V call of a `hwk up` of a
// Linux control plane and a Windows worker (preflight, the network, both
// nodes made and started, their endpoints and handles), then of a `hwk
// down`, goes through one session each: one PowerShell start per command.
func TestCommandStartsPowerShellOnce(t *testing.T) {
	cp := metadata{Cluster: "demo", Name: "demo-cp", Role: "control-plane", OS: "linux", IP: "172.31.250.10"}.notes()
	win := metadata{Cluster: "demo", Name: "demo-win-1", Role: "worker", OS: "windows", IP: "172.31.250.11"}.notes()
	inspect := func(name string) string {
		return "Get-VM -Name '" + name + "' -ErrorAction SilentlyContinue\nif ($vm) { [pscustomobject]"
	}
	f := (&fakePS{t: t}).on("Win32_OptionalFeature", hostReady).
		on("[pscustomobject]@{\n    switch", netFactsFresh(true)).
		on(createFacts, freshCreate()).
		on(inspect("demo-cp"), vm("demo-cp", "Running", cp)).
		on(inspect("demo-win-1"), vm("demo-win-1", "Running", win, "172.31.250.11")).
		on("$kept = @()", map[string]any{"kept": []string{}}).
		on("Where-Object { $_.Notes -like", []any{vm("demo-cp", "Running", cp), vm("demo-win-1", "Running", win, "172.31.250.11")})
	// The fake PowerShell answers each script as fakePS would, framed as
	// the session's protocol has it.
	answer := func(script string) []string {
		var out json.RawMessage
		err := f.Run(context.Background(), script, &out)
		rep := map[string]any{"ok": true, "out": out}
		var pe *PSError
		if errors.As(err, &pe) {
			rep = map[string]any{"ok": false, "error": pe}
		}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Error(err)
		}
		return []string{resultMarker + string(b), endMarker}
	}
	root := t.TempDir()
	dirs := state.Dirs{Data: root, Cache: filepath.Join(root, "cache"), Config: filepath.Join(root, "config")}
	command := func(run func(d *Driver) error) int64 {
		t.Helper()
		s := &Session{start: startFake(answer)}
		defer s.Close()
		before := Starts()
		if err := run(New(Options{Dirs: dirs, Runner: s})); err != nil {
			t.Fatal(err)
		}
		return Starts() - before
	}
	ctx := context.Background()
	up := command(func(d *Driver) error {
		if _, err := d.Preflight(ctx); err != nil {
			return err
		}
		if err := d.EnsureNetwork(ctx, clusterNet); err != nil {
			return err
		}
		for _, s := range []drivers.MachineSpec{
			nodeSpec("demo-cp", config.Linux, config.ControlPlane, "172.31.250.10", vhdx(t, t.TempDir())),
			nodeSpec("demo-win-1", config.Windows, config.Worker, "172.31.250.11", vhdx(t, t.TempDir())),
		} {
			if err := d.Create(ctx, s); err != nil {
				return err
			}
			if _, err := d.HostEndpoint(ctx, s.Ref, 22); err != nil {
				return err
			}
			if _, err := d.Node(ctx, s.Ref); err != nil {
				return err
			}
		}
		_, err := d.List(ctx, "demo")
		return err
	})
	sent := len(f.scripts)
	down := command(func(d *Driver) error {
		ms, err := d.List(ctx, "demo")
		if err != nil {
			return err
		}
		for _, m := range ms {
			if err := d.Delete(ctx, m.Ref); err != nil {
				return err
			}
		}
		return d.DeleteNetwork(ctx, "demo")
	})
	if up != 1 || down != 1 {
		t.Errorf("PowerShell started %d times for up (%d scripts) and %d for down (%d scripts), want once each", up, sent, down, len(f.scripts)-sent)
	}
	t.Logf("up: %d scripts, 1 PowerShell; down: %d scripts, 1 PowerShell", sent, len(f.scripts)-sent)
}
