//go:build unix

package docker

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSocketPermission connects to a socket the test user may not open.
// As root (who may open anything) the check runs in a copy of this test
// binary started as nobody.
func TestSocketPermission(t *testing.T) {
	if sock := os.Getenv("HWK_TEST_SOCKET"); sock != "" {
		ue := preflightAt(t, "unix://"+sock, "linux")
		if ue.Reason != "permission denied on the Docker socket unix://"+sock || !strings.Contains(ue.Fix, "usermod -aG docker") {
			t.Fatalf("got %q / %q", ue.Reason, ue.Fix)
		}
		return
	}
	dir, err := os.MkdirTemp("", "hwk-perm-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	sock := filepath.Join(dir, "docker.sock")
	ln, err := net.Listen("unix", sock)
	must(t, err)
	defer ln.Close()
	must(t, os.Chmod(sock, 0o600))
	if os.Geteuid() != 0 {
		must(t, os.Chmod(sock, 0o000))
		t.Setenv("HWK_TEST_SOCKET", sock)
		TestSocketPermission(t)
		return
	}
	self, err := os.Executable()
	must(t, err)
	bin := filepath.Join(dir, "docker.test")
	data, err := os.ReadFile(self)
	must(t, err)
	must(t, os.WriteFile(bin, data, 0o755))
	cmd := exec.Command(bin, "-test.run", "^TestSocketPermission$", "-test.v")
	cmd.Env = append(os.Environ(), "HWK_TEST_SOCKET="+sock, "HOME="+dir)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSocketPermission") {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}
