// Command hwk-kubelet runs the kubelet as a Windows service on hwk's
// Windows nodes. Windows services must answer the service control
// manager, which kubelet.exe does only with --windows-service and then
// with flags fixed when the service was registered; but kubeadm join
// writes the node's flags (the container runtime endpoint, the node IP)
// to kubeadm-flags.env afterwards. hwk-kubelet reads that file at every
// start, adds the flags every Windows kubelet needs, runs kubelet.exe,
// logs its output to C:\var\log\kubelet (rotated), and ends when the
// kubelet does, so that the service manager restarts it.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Paths on the node, as kubeadm writes them on Windows (under the system
// drive).
const (
	kubeletExe   = `C:\k\kubelet.exe`
	flagsEnv     = `C:\var\lib\kubelet\kubeadm-flags.env`
	kubeletLog   = `C:\var\log\kubelet\kubelet.err.log`
	maxLogBytes  = 50 << 20
	flagsEnvName = "KUBELET_KUBEADM_ARGS"
)

// baseArgs returns the flags every Windows kubelet needs beside kubeadm's:
// where kubeadm puts its files, and the Linux-only features turned off
// (no cgroups, no resolv.conf).
func baseArgs(hostname string) []string {
	return []string{
		`--cert-dir=C:\var\lib\kubelet\pki`,
		`--config=C:\var\lib\kubelet\config.yaml`,
		`--bootstrap-kubeconfig=C:\etc\kubernetes\bootstrap-kubelet.conf`,
		`--kubeconfig=C:\etc\kubernetes\kubelet.conf`,
		"--hostname-override=" + strings.ToLower(hostname),
		"--enable-debugging-handlers",
		"--cgroups-per-qos=false",
		"--enforce-node-allocatable=",
		"--resolv-conf=",
	}
}

// kubeletArgs returns kubelet.exe's argv: the base flags, then kubeadm's.
func kubeletArgs(hostname string, env []byte) ([]string, error) {
	kubeadm, err := parseFlagsEnv(env)
	if err != nil {
		return nil, err
	}
	return append(baseArgs(hostname), kubeadm...), nil
}

// parseFlagsEnv reads kubeadm-flags.env: one line
// KUBELET_KUBEADM_ARGS="--flag=value ...", values quoted with double
// quotes where they hold spaces.
func parseFlagsEnv(env []byte) ([]string, error) {
	sc := bufio.NewScanner(bytes.NewReader(env))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, value, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(name) != flagsEnvName {
			continue
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
		}
		return splitArgs(strings.ReplaceAll(value, `\"`, `"`))
	}
	return nil, fmt.Errorf("%s has no %s line: has kubeadm join run on this node?", flagsEnv, flagsEnvName)
}

// splitArgs splits on spaces outside double quotes, dropping the quotes.
func splitArgs(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inQuote, inArg := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote, inArg = !inQuote, true
		case r == ' ' && !inQuote:
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if inQuote {
		return nil, errors.New("unbalanced quotes in " + flagsEnvName)
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}

// rotate reports whether a log of size bytes is due to be rotated.
func rotate(size int64) bool { return size >= maxLogBytes }
