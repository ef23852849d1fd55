package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"golang.org/x/sys/windows/svc"

	"github.com/hwk-dev/hwk/internal/hostexec"
)

// runService answers the service control manager when started by it, and
// otherwise runs the kubelet in the foreground (for a person debugging).
func runService() error {
	service, err := svc.IsWindowsService()
	if err != nil {
		return err
	}
	if !service {
		cmd, log, err := startKubelet()
		if err != nil {
			return err
		}
		defer log.Close()
		return cmd.Wait()
	}
	return svc.Run("kubelet", handler{})
}

// startKubelet starts kubelet.exe with its output appended to the log,
// which is first rotated (one old copy) when it has grown large.
func startKubelet() (*exec.Cmd, *os.File, error) {
	argv, err := argsFrom(flagsEnv, "")
	if err != nil {
		return nil, nil, err
	}
	if st, err := os.Stat(kubeletLog); err == nil && rotate(st.Size()) {
		_ = os.Rename(kubeletLog, kubeletLog+".1")
	}
	log, err := os.OpenFile(kubeletLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(log, "hwk-kubelet: starting %s %v\n", kubeletExe, argv)
	cmd := hostexec.Command(context.Background(), kubeletExe, argv...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, nil, err
	}
	return cmd, log, nil
}

type handler struct{}

// Execute runs the kubelet until the service is stopped. When the kubelet
// ends by itself the service ends with an error, and the recovery actions
// hwk's image sets (restart after 5 s) start it again.
func (handler) Execute(_ []string, req <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	status <- svc.Status{State: svc.StartPending}
	cmd, log, err := startKubelet()
	if err != nil {
		if f, ferr := os.OpenFile(kubeletLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); ferr == nil {
			fmt.Fprintf(f, "hwk-kubelet: %v\n", err)
			f.Close()
		}
		return true, 1
	}
	defer log.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	for {
		select {
		case c := <-req:
			switch c.Cmd {
			case svc.Interrogate:
				status <- c.CurrentStatus
			case svc.Stop, svc.Shutdown:
				status <- svc.Status{State: svc.StopPending}
				_ = cmd.Process.Kill()
				<-done
				return false, 0
			}
		case err := <-done:
			fmt.Fprintf(log, "hwk-kubelet: the kubelet ended: %v\n", err)
			return true, 2
		}
	}
}
