package wsl2

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/testing/wsltest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// TestTransport checks that a node handle over the fake wsl.exe runs argv
// through -e with the caller's input, hands back the command's output and
// status, and tells wsl.exe's own failure from the command's.
func TestTransport(t *testing.T) {
	fake := wsltest.New(t, "exec.txt", nil)
	ctx := context.Background()
	h := node.New("hwk-demo-cp", config.Linux, transport{r: CLI{}, distro: "hwk-demo-cp"})
	var out bytes.Buffer
	if err := h.Run(ctx, node.Cmd{Args: []string{"cat"}, Stdin: strings.NewReader("ignored by the fake\n"), Stdout: &out}); err != nil || out.String() != "kubeadm-init.yaml\n" {
		t.Errorf("cat: %q %v", out.String(), err)
	}
	var stderr bytes.Buffer
	err := h.Run(ctx, node.Cmd{Args: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Stderr: &stderr})
	var ee *node.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || stderr.String() != "err\n" {
		t.Errorf("exit 3: %v, stderr %q", err, stderr.String())
	}
	fake.Check(t)
}

// fixed answers every call with out and exit, as a wsl.exe that failed
// itself does on Windows (exit status 0xFFFFFFFF); the fake program's -1
// is 255 on Linux, where a command's own 255 would look the same.
type fixed struct {
	out  []byte
	exit int
}

func (f fixed) Run(_ context.Context, _ io.Reader, stdout, _ io.Writer, _ ...string) (int, error) {
	_, err := stdout.Write(f.out)
	return f.exit, err
}

func (fixed) Spawn(...string) error { return errors.New("fixed does not spawn") }

// TestTransportWSLFails checks that wsl.exe failing for its own reasons
// (the distribution is gone) is its error, read from what it wrote, not
// the command's exit status.
func TestTransportWSLFails(t *testing.T) {
	msg := utf16le("There is no distribution with the supplied name.\r\nError code: Wsl/Service/WSL_E_DISTRO_NOT_FOUND\r\n")
	h := node.New("hwk-gone", config.Linux, transport{r: fixed{out: msg, exit: 0xFFFFFFFF}, distro: "hwk-gone"})
	err := h.Run(context.Background(), node.Cmd{Args: []string{"true"}})
	var ee *node.ExitError
	if errors.As(err, &ee) || !isCode(err, "WSL_E_DISTRO_NOT_FOUND") {
		t.Errorf("%v", err)
	}
}
