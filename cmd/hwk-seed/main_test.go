package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/powershell"
	"github.com/hwk-dev/hwk/internal/sshkey"
	"github.com/hwk-dev/hwk/internal/testing/fakeprog"
)

func writeSeed(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	key, err := sshkey.New("test")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"hostname":        "hwk-win-1\n",
		"network":         "ADDRESS=172.31.250.11/24\nGATEWAY=172.31.250.1\nDNS=172.31.250.1\n",
		"authorized_keys": key.Public + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPrint(t *testing.T) {
	dir := writeSeed(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"--seed", dir, "--print"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "-IPAddress '172.31.250.11' -PrefixLength 24") || !strings.Contains(out.String(), "$seed = '"+dir+"'") {
		t.Errorf("printed:\n%s", out.String())
	}
	if strings.Contains(out.String(), "ssh_host_ed25519_key") {
		t.Error("a seed without a host key got host key steps")
	}
}

func TestErrors(t *testing.T) {
	bad := writeSeed(t)
	if err := os.WriteFile(filepath.Join(bad, "hostname"), []byte("a-name-far-too-long-for-windows\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A missing seed is reported in the OS's own words ("no such file or
	// directory", "The system cannot find the file specified.").
	missing := filepath.Join(bad, "nope")
	_, notThere := os.Stat(missing)
	if !errors.Is(notThere, fs.ErrNotExist) {
		t.Fatalf("stat %s: %v", missing, notThere)
	}
	if err := apply(missing, true, platform, io.Discard, io.Discard); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("apply of a missing seed = %v; want an error wrapping fs.ErrNotExist", err)
	}
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"bad seed":     {[]string{"--seed", bad, "--print"}, "at most 15"},
		"missing seed": {[]string{"--seed", missing, "--print"}, "hwk-seed: seed " + missing + ": " + notThere.Error()},
		"bad flag":     {[]string{"--nope"}, "flag provided but not defined"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(c.args, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want %q", code, errOut.String(), c.want)
			}
		})
	}
	if runtime.GOOS != "windows" {
		var out, errOut bytes.Buffer
		if code := run(nil, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no --seed directory given") {
			t.Errorf("no seed on %s: exit %d %q", runtime.GOOS, code, errOut.String())
		}
		if code := run([]string{"--seed", writeSeed(t)}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "only on Windows") {
			t.Errorf("applying on %s: exit %d %q", runtime.GOOS, code, errOut.String())
		}
	}
}

// TestRetries checks that a seed disk not found yet, an adapter wait that
// ends and a script that fails are tried again (Task Scheduler would not
// run hwk-seed again before the next boot), each attempt logged; that a
// wrong seed is not retried; and that the retries end at their bound.
func TestRetries(t *testing.T) {
	dir := writeSeed(t)
	var finds, waits, runs int
	var pauses []time.Duration
	st := steps{
		findSeed: func() (string, error) {
			if finds++; finds < 3 {
				return "", errors.New("no disk labelled cidata")
			}
			return dir, nil
		},
		waitReady: func(io.Writer) error {
			if waits++; waits == 1 {
				return errors.New("the network adapter did not come up within 2m0s")
			}
			return nil
		},
		runScript: func(script string, _, _ io.Writer) error {
			if runs++; runs == 1 {
				return errors.New("exit status 1")
			}
			if !strings.Contains(script, "172.31.250.11") {
				return errors.New("not the seed's script")
			}
			return nil
		},
		sleep:    func(d time.Duration) { pauses = append(pauses, d) },
		retryFor: time.Hour,
	}
	var out, errOut bytes.Buffer
	if code := runWith(nil, st, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if finds != 5 || waits != 3 || runs != 2 || len(pauses) != 4 {
		t.Errorf("finds %d, waits %d, runs %d, pauses %v", finds, waits, runs, pauses)
	}
	for _, want := range []string{"attempt 1 failed: no disk labelled cidata", "attempt 3 failed: the network adapter did not come up", "attempt 4 failed: exit status 1"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, errOut.String())
		}
	}

	// A wrong seed: once.
	bad := writeSeed(t)
	os.WriteFile(filepath.Join(bad, "network"), []byte("DHCP=yes\n"), 0o600)
	finds = 0
	st.findSeed = func() (string, error) { finds++; return bad, nil }
	errOut.Reset()
	if code := runWith(nil, st, &out, &errOut); code != 1 || finds != 1 || !strings.Contains(errOut.String(), "DHCP=yes") {
		t.Errorf("a wrong seed: exit %d after %d attempts: %s", code, finds, errOut.String())
	}

	// The bound: a seed disk that never comes.
	st.findSeed = func() (string, error) { return "", errors.New("no disk labelled cidata") }
	st.retryFor = 0
	errOut.Reset()
	if code := runWith(nil, st, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no disk labelled cidata") {
		t.Errorf("past the bound: exit %d: %s", code, errOut.String())
	}
}

// TestRunEncodedDecodesCLIXML checks that when the script's powershell.exe
// (a fake first on PATH) writes its error record as CLIXML on stderr, as
// Windows PowerShell writes it to a pipe, hwk-seed's log and its error get
// the record as text.
func TestRunEncodedDecodesCLIXML(t *testing.T) {
	const script = "Write-Output 'hwk-seed: renamed the computer to demo-win-1'\nthrow 'x'\n"
	tr := &fakeprog.Transcript{Name: t.Name(), Exchanges: []fakeprog.Exchange{{Name: "apply", Args: powershell.Args(script), Times: 1, Reply: "apply/dns-refused"}}}
	fake := fakeprog.New(t, fakeprog.Config{Program: "powershell.exe", Transcript: tr, Replies: "testdata/replies"})
	var out, errOut bytes.Buffer
	err := runEncoded("powershell.exe", script, &out, &errOut)
	if u := fake.Unexpected(); u != "" {
		t.Fatalf("powershell.exe was called in a way it did not expect:\n%s", u)
	}
	if err == nil || !strings.HasSuffix(err.Error(), ": exit status 1: Set-DnsClientServerAddress : The parameter is incorrect.") {
		t.Errorf("err = %v", err)
	}
	if out.String() != "hwk-seed: renamed the computer to demo-win-1\r\n" {
		t.Errorf("stdout %q", out.String())
	}
	log := errOut.String()
	if !strings.HasPrefix(log, "Set-DnsClientServerAddress : The parameter is incorrect. \nAt line:41 char:5\n") || strings.Contains(log, "CLIXML") || strings.Contains(log, "_x000D_") {
		t.Errorf("stderr as logged:\n%s", log)
	}
}
