package cmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// sourceBuildTime is what a first build from source took, measured on a
// two-core machine with the Go module proxy near (11m8s); a release build
// downloads the binaries instead.
const sourceBuildTime = "about 11 minutes the first time on two cores, more on a slow network"

// offerBuild builds the Linux node image an up stopped for, when
// --build-image asked for that or the user says yes when asked, and
// reports whether it built one. built holds what it built before for this
// up: an image that is still missing after its build is an error, not
// another build. An up that stops for a missing image has made nothing
// yet, so it can run again at once.
func (g *globals) offerBuild(ctx context.Context, s Streams, upErr error, asked bool, built map[string]bool) (bool, error) {
	var missing *nodeimage.NoImageError
	if !errors.As(upErr, &missing) || missing.Node.OS != config.Linux {
		return false, nil
	}
	what := missing.Version + "/" + string(missing.Format)
	if built[what] {
		return false, fmt.Errorf("built the Linux node image for Kubernetes %s (%s format), but up still finds none: %w", missing.Version, missing.Format, upErr)
	}
	// Nothing to offer: no flag, and no one to ask (CI, a pipe, -q).
	if !asked && (g.quiet || !g.terminal(s)) {
		return false, nil
	}
	_, goErr := exec.LookPath("go")
	relErr := g.releases(ctx, missing.Version)
	if relErr != nil && goErr != nil {
		if asked {
			return false, fmt.Errorf("--build-image: the Linux node image cannot be built here: Kubernetes' release downloads do not answer (%v) and Go, which builds it from source, is not installed; install Go 1.26 or load an image (`hwk node-image load -i FILE`)", relErr)
		}
		return false, nil
	}
	source, from, takes := nodeimage.Release, "Kubernetes' release downloads", "a few minutes"
	if relErr != nil {
		source, from, takes = nodeimage.FromSource, "source through the Go module proxy", sourceBuildTime
	}
	if !asked {
		fmt.Fprintf(s.ErrOut, "\nBuild the Linux node image for Kubernetes %s here and go on? It is built from %s and configured in Docker, WSL 2 or a libvirt VM, whichever runs here (%s), then cached. [y/N] ", missing.Version, from, takes)
		answer, _ := bufio.NewReader(s.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return false, nil
		}
	}
	fmt.Fprintf(s.ErrOut, "Building the Linux node image for Kubernetes %s (%s format) from %s (%s)\n", missing.Version, missing.Format, from, takes)
	opts := nodeimage.Options{KubernetesVersion: missing.Version, Source: source, Formats: []nodeimage.Format{missing.Format}}
	_, err := g.buildLinux(ctx, s, opts, configureAuto, false)
	if err != nil && source == nodeimage.Release && goErr == nil {
		fmt.Fprintf(s.ErrOut, "The build from release downloads failed (above); building from source instead (%s)\n", sourceBuildTime)
		opts.Source = nodeimage.FromSource
		_, err = g.buildLinux(ctx, s, opts, configureAuto, false)
	}
	if err != nil {
		return false, fmt.Errorf("build the missing Linux node image: %w", err)
	}
	built[what] = true
	return true, nil
}

// interactive reports whether a question can be put to the user: both
// its input and where hwk writes progress are a terminal.
func interactive(s Streams) bool {
	in, ok1 := s.In.(*os.File)
	out, ok2 := s.ErrOut.(*os.File)
	return ok1 && ok2 && term.IsTerminal(int(in.Fd())) && term.IsTerminal(int(out.Fd()))
}

// releasesReachable asks dl.k8s.io for the version's kubeadm checksum, as
// a release build would first, within 10 seconds.
func releasesReachable(ctx context.Context, version string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, "https://dl.k8s.io/release/"+version+"/bin/linux/amd64/kubeadm.sha256", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("dl.k8s.io answered %s", resp.Status)
	}
	return nil
}
