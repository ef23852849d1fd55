package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/testing/pscheck"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// scriptedNode is a Windows node's SSH handle that answers each kind of
// command from a script of replies, and records what it was asked.
type scriptedNode struct {
	mu      sync.Mutex
	replies map[string][]reply // by step kind; the last reply repeats
	asked   []string
}

type reply struct {
	out  string
	code int   // non-zero: the command ran and failed
	err  error // the transport failed (SSH not up)
}

var errNoSSH = errors.New("ssh 172.31.250.11:22: connect: connection refused")

func decodePS(args []string) string {
	if s, ok := node.ScriptOf(args); ok && args[0] == "powershell.exe" {
		return s
	}
	return strings.Join(args, " ")
}

// kind names a command by what it does.
func kind(script string) string {
	switch {
	case script == windowsBuildScript:
		return "build"
	case strings.Contains(script, "kubeadm.exe' join"):
		return "join"
	case script == calicoNetworkScript:
		return "network"
	case script == restartKubeletScript:
		return "restart-kubelet"
	case strings.Contains(script, `NetTCPIP\New-NetRoute`):
		return "route"
	}
	return "unknown: " + script
}

func (s *scriptedNode) Run(_ context.Context, cmd node.Cmd) error {
	if cmd.Stdin != nil {
		_, _ = io.Copy(io.Discard, cmd.Stdin)
	}
	r := s.next(kind(decodePS(cmd.Args)))
	if r.err != nil {
		return r.err
	}
	fmt.Fprint(cmd.Stdout, r.out)
	if r.code != 0 {
		fmt.Fprint(cmd.Stderr, "it failed")
		return &node.ExitError{Code: r.code}
	}
	return nil
}

// WriteFile takes a file as SSH's SFTP does: only the join
// configuration is expected.
func (s *scriptedNode) WriteFile(_ context.Context, in io.Reader, p string, _ fs.FileMode) error {
	_, _ = io.Copy(io.Discard, in)
	k := "copy-config"
	if p != "/C:/hwk/kubeadm-join.yaml" {
		k = "unknown file: " + p
	}
	r := s.next(k)
	if r.err != nil {
		return r.err
	}
	if r.code != 0 {
		return fmt.Errorf("sftp: write %s: permission denied", p)
	}
	return nil
}

// next records a command of kind k and takes its reply.
func (s *scriptedNode) next(k string) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, k)
	rs := s.replies[k]
	var r reply
	if len(rs) > 0 {
		r = rs[0]
		if len(rs) > 1 {
			s.replies[k] = rs[1:]
		}
	}
	return r
}

func (s *scriptedNode) sequence() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.asked, " ")
}

func happyReplies() map[string][]reply {
	return map[string][]reply{
		"build":           {{err: errNoSSH}, {err: errNoSSH}, {out: "20348\r\n"}},
		"network":         {{out: "no\r\n"}, {out: "yes\r\n"}},
		"restart-kubelet": {{out: "Running\r\n"}},
	}
}

func runJoin(t *testing.T, replies map[string][]reply, version string) (*scriptedNode, error) {
	t.Helper()
	s := &scriptedNode{replies: replies}
	j := &WindowsJoin{
		Node: node.New("hwk-win-1", config.Windows, s), Version: version, Config: []byte("kind: JoinConfiguration\n"),
		Log: io.Discard, SSH: 200 * time.Millisecond, Network: 200 * time.Millisecond, Poll: 10 * time.Millisecond,
	}
	return s, j.Run(context.Background())
}

func TestWindowsJoinSequence(t *testing.T) {
	s, err := runJoin(t, happyReplies(), "2022")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.sequence(), "build build build copy-config join network network restart-kubelet"; got != want {
		t.Errorf("commands:\n got %s\nwant %s", got, want)
	}
}

func TestWindowsJoinFailures(t *testing.T) {
	for name, c := range map[string]struct {
		mod     func(map[string][]reply)
		version string
		step    string
		want    []string
		seq     string
	}{
		"ssh never comes up": {
			mod:  func(r map[string][]reply) { r["build"] = []reply{{err: errNoSSH}} },
			step: StepSSH, want: []string{"no answer within 200ms", "connection refused", "first boot"},
		},
		"build does not match": {
			mod:     func(r map[string][]reply) { r["build"] = []reply{{out: "26100\r\n"}} },
			version: "2022", step: StepBuild,
			want: []string{"the node runs Windows build 26100, but the cluster asked for Windows Server 2022 (build 20348)", "hwk node-image build windows --version 2022"},
			seq:  "build",
		},
		"build unreadable": {
			mod:  func(r map[string][]reply) { r["build"] = []reply{{code: 1}} },
			step: StepBuild, want: []string{"read the build", "exited with status 1"}, seq: "build",
		},
		"the configuration cannot be written": {
			mod:  func(r map[string][]reply) { r["copy-config"] = []reply{{code: 1}} },
			step: StepJoin, want: []string{`copy to C:\hwk\kubeadm-join.yaml on node hwk-win-1`, "sftp: write /C:/hwk/kubeadm-join.yaml: permission denied"},
			seq: "build build build copy-config",
		},
		"join fails": {
			mod:  func(r map[string][]reply) { r["join"] = []reply{{code: 1}} },
			step: StepJoin, want: []string{"exited with status 1", "it failed"},
			seq: "build build build copy-config join",
		},
		"no calico network": {
			mod:  func(r map[string][]reply) { r["network"] = []reply{{out: "no"}} },
			step: StepNetwork, want: []string{"after 200ms", `HNS network "Calico"`},
		},
		"no HNS cmdlets": {
			mod:  func(r map[string][]reply) { r["network"] = []reply{{out: "no-hns\r\n"}} },
			step: StepNetwork, want: []string{"no HostNetworkingService PowerShell module", "hwk node-image build windows"},
			seq: "build build build copy-config join network",
		},
		"kubelet does not come back": {
			mod:  func(r map[string][]reply) { r["restart-kubelet"] = []reply{{out: "Stopped"}} },
			step: StepKubelet, want: []string{"the kubelet is Stopped after its restart"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := happyReplies()
			c.mod(r)
			version := c.version
			if version == "" {
				version = "2022"
			}
			s, err := runJoin(t, r, version)
			var we *WindowsJoinError
			if !errors.As(err, &we) || we.Step != c.step {
				t.Fatalf("err = %v, want a %q failure", err, c.step)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if c.seq != "" && s.sequence() != c.seq {
				t.Errorf("commands after the failure: %s, want %s", s.sequence(), c.seq)
			}
		})
	}
}

// TestWindowsJoinRoutesThroughTheHost checks that with a control plane in
// WSL2 the node routes its address through the host before it joins, and
// again once Calico's vSwitch has moved its address, with the address and
// gateway it was given; a route that fails stops the join there, saying so.
func TestWindowsJoinRoutesThroughTheHost(t *testing.T) {
	for _, fails := range []bool{false, true} {
		r := happyReplies()
		if fails {
			r["route"] = []reply{{code: 1}}
		}
		s := &scriptedNode{replies: r}
		var scripts []string
		j := &WindowsJoin{
			Node: node.New("hwk-win-1", config.Windows, recordScripts{s, &scripts}), Version: "2022", Config: []byte("kind: JoinConfiguration\n"),
			Log: io.Discard, SSH: 200 * time.Millisecond, Network: 200 * time.Millisecond, Poll: 10 * time.Millisecond,
			ViaGateway: []netip.Addr{netip.MustParseAddr("172.31.250.10")}, Gateway: netip.MustParseAddr("172.31.250.1"),
		}
		err := j.Run(context.Background())
		if fails {
			var we *WindowsJoinError
			if !errors.As(err, &we) || we.Step != StepRoute || !strings.Contains(err.Error(), "route 172.31.250.10 through the host (172.31.250.1)") {
				t.Errorf("a failed route: %v", err)
			}
			if got := s.sequence(); got != "build build build route" {
				t.Errorf("commands after a failed route: %s", got)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s.sequence(), "build build build route copy-config join network network route restart-kubelet"; got != want {
			t.Errorf("commands:\n got %s\nwant %s", got, want)
		}
		for _, sc := range scripts {
			if kind(sc) == "route" && (!strings.Contains(sc, "$dest = '172.31.250.10/32'") || !strings.Contains(sc, "$gw = '172.31.250.1'")) {
				t.Errorf("route script:\n%s", sc)
			}
		}
	}
}

// recordScripts keeps the scripts a node was sent.
type recordScripts struct {
	*scriptedNode
	scripts *[]string
}

func (r recordScripts) Run(ctx context.Context, cmd node.Cmd) error {
	*r.scripts = append(*r.scripts, decodePS(cmd.Args))
	return r.scriptedNode.Run(ctx, cmd)
}

// TestWindowsJoinKubeletRestartWarnings checks that a kubelet that restarted
// is taken as restarted whatever came before its state: Restart-Service
// warns every two seconds while a service takes its time to stop or start
// ("Waiting for service '{DisplayName} ({Name})' to stop...": PowerShell's
// ServiceCommands.cs, DoWaitForStatus).
func TestWindowsJoinKubeletRestartWarnings(t *testing.T) {
	r := happyReplies()
	r["restart-kubelet"] = []reply{{out: "WARNING: Waiting for service 'Kubernetes kubelet (kubelet)' to stop...\r\n" +
		"WARNING: Waiting for service 'Kubernetes kubelet (kubelet)' to start...\r\nRunning\r\n"}}
	if _, err := runJoin(t, r, "2022"); err != nil {
		t.Fatal(err)
	}
}

// TestWindowsJoinRetriesUntilTimeout checks that the SSH wait keeps trying
// at the poll interval and gives up after its timeout, not at once, not
// never.
func TestWindowsJoinRetriesUntilTimeout(t *testing.T) {
	r := happyReplies()
	r["build"] = []reply{{err: errNoSSH}}
	start := time.Now()
	s, err := runJoin(t, r, "2022")
	took := time.Since(start)
	if err == nil || took < 200*time.Millisecond || took > 30*time.Second {
		t.Errorf("gave up after %s with %v", took, err)
	}
	if n := strings.Count(s.sequence(), "build"); n < 5 {
		t.Errorf("tried %d times in %s at a 10ms poll", n, took)
	}
}

func TestWindowsJoinStopsOnCancel(t *testing.T) {
	s := &scriptedNode{replies: map[string][]reply{"build": {{err: errNoSSH}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	j := &WindowsJoin{Node: node.New("w", config.Windows, s), Version: "2022", Log: io.Discard, SSH: time.Hour, Network: time.Hour, Poll: 10 * time.Millisecond}
	if err := j.Run(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's", err)
	}
}

func TestCheckWindowsBuild(t *testing.T) {
	if err := CheckWindowsBuild("2025", "26100"); err != nil {
		t.Error(err)
	}
	for _, c := range [][2]string{{"2025", "20348"}, {"2019", "17763"}, {"2022", "x"}} {
		if err := CheckWindowsBuild(c[0], c[1]); err == nil {
			t.Errorf("CheckWindowsBuild(%s, %s) passed", c[0], c[1])
		}
	}
}

func TestWindowsLogs(t *testing.T) {
	s := &scriptedNode{}
	out := WindowsLogs(context.Background(), node.New("w", config.Windows, &logNode{s}), 5)
	for _, want := range []string{
		`--- kubelet (C:\var\log\kubelet\kubelet.err.log)`, "E1122 kubelet line",
		`--- containerd (C:\var\log\containerd\containerd.log)`, "(cannot read it:",
		`--- calico-node-windows, container node (C:\var\log\pods\kube-system_calico-node-windows-*\node\*.log)`, "calico line",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
}

// logNode answers log reads: the kubelet's log exists, containerd's not.
type logNode struct{ *scriptedNode }

func (l *logNode) Run(_ context.Context, cmd node.Cmd) error {
	script := decodePS(cmd.Args)
	switch {
	case strings.Contains(script, "kubelet.err.log"):
		fmt.Fprint(cmd.Stdout, "E1122 kubelet line\r\n")
		return nil
	case strings.Contains(script, "containerd.log"):
		return &node.ExitError{Code: 1}
	}
	fmt.Fprint(cmd.Stdout, "calico line\r\n")
	return nil
}

func TestWindowsJoinScriptsParse(t *testing.T) {
	pscheck.Check(t, map[string]string{
		"build.ps1":   windowsBuildScript,
		"network.ps1": calicoNetworkScript,
		"restart.ps1": restartKubeletScript,
		"tail.ps1":    logTailScript(`C:\var\log\it's.log`, 10),
	})
}
