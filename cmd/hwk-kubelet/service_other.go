//go:build !windows

package main

import "errors"

func runService() error {
	return errors.New("hwk-kubelet runs the kubelet as a Windows service; here, --print shows the command line it would run")
}
