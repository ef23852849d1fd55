package cmd

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// clusterFlags are the flags that shape a cluster config, shared by every
// command that reads one (config validate now, up later), so they all
// resolve a config the same way.
type clusterFlags struct {
	file              string
	kubernetesVersion string
	driver            string
	windowsWorkers    int
	linuxWorkers      int
	image             string
	memory            string
}

func (f *clusterFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.file, "config", "", "cluster config file (apiVersion: "+config.APIVersion+", kind: "+config.Kind+")")
	fs.StringVar(&f.kubernetesVersion, "kubernetes-version", "", "Kubernetes version, e.g. "+config.DefaultKubernetesVersion)
	fs.StringVar(&f.driver, "driver", "", "driver for every node: "+strings.Join(config.DriverNames(), ", "))
	fs.IntVar(&f.windowsWorkers, "windows-workers", 0, "number of Windows workers (default from the config, else 1)")
	fs.IntVar(&f.linuxWorkers, "linux-workers", 0, "number of Linux workers besides the control plane (default from the config, else 0)")
	fs.StringVar(&f.image, "image", "", "node image for every Linux node: a cached image's name, or a reference to pull (e.g. registry.example.com/hwk/node:"+config.DefaultKubernetesVersion+")")
	fs.StringVar(&f.memory, "memory", "", "memory for every node, e.g. 4Gi (as nodes[].memory; default 4Gi for the control plane, 6Gi for Windows, 2Gi for Linux workers). On Hyper-V it is the most a node's VM grows to: each starts with less (2Gi Linux, 3Gi Windows, or this when smaller)")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	_ = cmd.RegisterFlagCompletionFunc("driver", cobra.FixedCompletions(config.DriverNames(), cobra.ShellCompDirectiveNoFileComp))
}

// resolve loads the effective config: the file, then the flags that were
// given (a flag left out never overrides the file), then defaults.
func (f *clusterFlags) resolve(cmd *cobra.Command, g *globals) (*config.Cluster, error) {
	o := config.Overrides{
		KubernetesVersion: f.kubernetesVersion,
		Driver:            f.driver,
		Image:             f.image,
		Memory:            f.memory,
	}
	if cmd.Flags().Changed("name") {
		o.Name = g.name
	}
	if cmd.Flags().Changed("windows-workers") {
		o.WindowsWorkers = &f.windowsWorkers
	}
	if cmd.Flags().Changed("linux-workers") {
		o.LinuxWorkers = &f.linuxWorkers
	}
	// The host's default drivers matter only to nodes that name none:
	// with --driver every node names one, and no driver's check runs
	// (on Windows each starts PowerShell, wsl.exe or VBoxManage).
	host := config.Host{OS: runtime.GOOS}
	if o.Driver == "" {
		host = g.host(cmd.Context())
	}
	c, err := config.Resolve(f.file, o, host)
	if err != nil {
		var errs config.Errors
		if errors.As(err, &errs) {
			return nil, &fileErrors{file: f.source(), errs: errs}
		}
		return nil, err
	}
	for _, w := range config.Warnings(c) {
		g.logger.Warn(w)
	}
	return c, nil
}

// given names the flags that shape a config and were given.
func (f *clusterFlags) given(cmd *cobra.Command) []string {
	var out []string
	for _, n := range []string{"config", "kubernetes-version", "driver", "windows-workers", "linux-workers", "image", "memory"} {
		if cmd.Flags().Changed(n) {
			out = append(out, "--"+n)
		}
	}
	return out
}

func (f *clusterFlags) source() string {
	if f.file == "" {
		return "the config from flags and defaults"
	}
	return f.file
}

// fileErrors are a config's problems with the file they are in.
type fileErrors struct {
	file string
	errs config.Errors
}

func (e *fileErrors) Error() string {
	lines := make([]string, len(e.errs))
	for i, fe := range e.errs {
		lines[i] = e.format(fe)
	}
	return fmt.Sprintf("%s: %s", e.file, strings.Join(lines, "; "))
}

// format writes one problem as file:line: field: message when it has a
// line, field: message otherwise.
func (e *fileErrors) format(fe config.FieldError) string {
	if fe.Line > 0 {
		return fmt.Sprintf("%s:%d: %s: %s", e.file, fe.Line, fe.Path, fe.Message)
	}
	return fmt.Sprintf("%s: %s", fe.Path, fe.Message)
}
