package build

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hwk-dev/hwk/internal/hostexec"
)

// kernelFiles is a Kernel that puts files of its own into the root for
// stage 2 (WSL's configuration, which its init reads at the first start):
// paths relative to the root, and their contents. cleanExport drops them.
type kernelFiles interface {
	Files() map[string]string
}

// stage2Command is what a kernel runs in the root.
var stage2Command = []string{"/bin/sh", "/" + stage2Dir + "/stage2.sh"}

// DockerKernel runs stage 2 in a container of the Docker engine:
// unprivileged and with no network, what a user's Docker Desktop allows
// and proof that configuring needs nothing from the network.
type DockerKernel struct {
	Client func() (client.APIClient, error)
}

// Name implements Kernel.
func (DockerKernel) Name() string { return "Docker" }

// Configure implements Kernel: the root is imported as a one-layer image,
// a container of it runs the script, and the container is exported.
func (k DockerKernel) Configure(ctx context.Context, kind string, root io.Reader, log, out io.Writer) (err error) {
	if k.Client == nil {
		return errors.New("configuring a Debian root needs a Linux kernel: start Docker (Docker Desktop on Windows and macOS, or dockerd on Linux) and build again")
	}
	c, err := k.Client()
	var p client.PingResult
	if err == nil {
		p, err = c.Ping(ctx, client.PingOptions{})
	}
	if err != nil {
		return fmt.Errorf("%w; start Docker (Docker Desktop on Windows and macOS, or dockerd on Linux) and build again", err)
	}
	if p.OSType != "" && p.OSType != "linux" {
		return fmt.Errorf("the Docker engine runs %s containers: switch Docker Desktop to Linux containers and build again", p.OSType)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	ref := "hwk-build/" + kind + ":" + hex.EncodeToString(suffix)
	cleanup := context.WithoutCancel(ctx)

	start := time.Now()
	id, err := importImage(ctx, c, root, ref)
	if err != nil {
		return fmt.Errorf("import the stage-1 root: %w", err)
	}
	defer func() {
		if _, rerr := c.ImageRemove(cleanup, id, client.ImageRemoveOptions{Force: true, PruneChildren: true}); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove the build image %s: %w", ref, rerr))
		}
	}()
	fmt.Fprintf(log, "%s: stage-1 root imported as %s in %s\n", kind, ref, time.Since(start).Round(time.Millisecond))

	res, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:  id,
			Cmd:    stage2Command,
			Tty:    true, // one raw stream for the log
			Labels: map[string]string{"dev.hwk.build": kind},
		},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		return fmt.Errorf("create the configure container: %w", err)
	}
	defer func() {
		if _, rerr := c.ContainerRemove(cleanup, res.ID, client.ContainerRemoveOptions{Force: true}); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove the configure container: %w", rerr))
		}
	}()
	wait := c.ContainerWait(ctx, res.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := c.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start the configure container: %w", err)
	}
	var code int64
	select {
	case r := <-wait.Result:
		code = r.StatusCode
	case err := <-wait.Error:
		return fmt.Errorf("wait for the configure container: %w", err)
	}
	tail := hostexec.NewTail(16 << 10)
	if logs, lerr := c.ContainerLogs(cleanup, res.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true}); lerr == nil {
		_, _ = io.Copy(io.MultiWriter(log, tail), logs)
		logs.Close()
	}
	if code != 0 {
		return fmt.Errorf("stage2.sh exited with %d:\n%s", code, strings.Join(tail.Lines(30), "\n"))
	}
	exp, err := c.ContainerExport(ctx, res.ID, client.ContainerExportOptions{})
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer exp.Close()
	if _, err := io.Copy(out, exp); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// importImage imports a root tar as a one-layer image named ref and
// returns the image's ID.
func importImage(ctx context.Context, c client.APIClient, root io.Reader, ref string) (string, error) {
	rc, err := c.ImageImport(ctx, client.ImageImportSource{Source: root, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: []string{
			"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"ENV DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true LC_ALL=C",
		}})
	if err != nil {
		return "", err
	}
	defer rc.Close()
	if err := jsonStreamError(rc); err != nil {
		return "", err
	}
	img, err := c.ImageInspect(ctx, ref)
	if err != nil {
		return "", err
	}
	return img.ID, nil
}
