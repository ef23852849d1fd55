//go:build linux

// pause holds a pod's namespaces open. As PID 1 of the sandbox it must also
// reap orphaned children and exit on SIGINT or SIGTERM (the runtime stops
// the sandbox with TERM). Written for hwk in Go, so that a node image built
// from source needs only Go on any host (the build sets version).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

var version = "dev"

func main() {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "-v") {
		fmt.Println("pause (hwk) " + version)
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not PID 1")
	}
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// One SIGCHLD may stand for several children.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
