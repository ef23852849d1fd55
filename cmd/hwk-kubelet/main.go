package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hwk-kubelet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	printArgs := fs.Bool("print", false, "print the kubelet command line instead of running it")
	env := fs.String("flags-env", flagsEnv, "kubeadm's flags file")
	host := fs.String("hostname", "", "the node's name (default: this machine's)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *printArgs {
		argv, err := argsFrom(*env, *host)
		if err != nil {
			fmt.Fprintf(stderr, "hwk-kubelet: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, kubeletExe+" "+strings.Join(argv, " "))
		return 0
	}
	if err := runService(); err != nil {
		fmt.Fprintf(stderr, "hwk-kubelet: %v\n", err)
		return 1
	}
	return 0
}

// argsFrom reads kubeadm's flags file and builds kubelet's argv.
func argsFrom(env, host string) ([]string, error) {
	data, err := os.ReadFile(env)
	if err != nil {
		return nil, fmt.Errorf("%w (has kubeadm join run on this node?)", err)
	}
	if host == "" {
		if host, err = os.Hostname(); err != nil {
			return nil, err
		}
	}
	return kubeletArgs(host, data)
}
