package cmd

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/testing/driverstest"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// upWithBuild runs `hwk up` of a Linux-only cluster on a fake docker
// driver with an empty cache, so its preflight finds no Linux node image
// and none to pull (this build pins none). build stands in for
// build.Build and counts its calls.
func upWithBuild(t *testing.T, in string, terminal bool, build func(nodeimage.Options) error, args ...string) (code int, stderr string, calls []nodeimage.Options) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	t.Setenv("KUBECONFIG", filepath.Join(home, "kubeconfig"))
	reg := func() *drivers.Registry { return drivers.NewRegistry(emptyDriver{driverstest.Up(config.DriverDocker)}) }
	var out, errOut bytes.Buffer
	s := Streams{In: strings.NewReader(in), Out: &out, ErrOut: &errOut}
	root := newRootCommand(s, deps{
		registry:    reg,
		terminal:    func(Streams) bool { return terminal },
		configureIn: func(context.Context, *nodeimage.Options, string) error { return nil },
		releases: func(context.Context, string) error {
			if !terminal && !slices.Contains(args, "--build-image") {
				t.Error("up asked dl.k8s.io with no build to offer (no flag, no terminal)")
			}
			return errors.New("no network here")
		},
		build: func(_ context.Context, o nodeimage.Options) (*nodeimage.Manifest, error) {
			calls = append(calls, o)
			if err := build(o); err != nil {
				return nil, err
			}
			return &nodeimage.Manifest{Name: "linux-test"}, nil
		},
	})
	root.SetArgs(append([]string{"up", "--windows-workers", "0", "--driver", "docker", "--kubernetes-version", testVersion}, args...))
	root.SilenceErrors, root.SilenceUsage = true, true
	err := root.Execute()
	if err != nil {
		code = 1
		errOut.WriteString("ERROR: " + err.Error() + "\n")
	}
	return code, errOut.String(), calls
}

const testVersion = "v1.34.2"

// emptyDriver is a fake docker driver with no machines and no images, so
// that up's preflight goes on to the node images and finds none.
type emptyDriver struct{ driverstest.Fake }

func (emptyDriver) List(context.Context, string) ([]drivers.Machine, error) { return nil, nil }

func (emptyDriver) CheckImage(_ context.Context, image string) error {
	return &drivers.ImageMissingError{Driver: config.DriverDocker, Image: image}
}

func TestUpBuildImage(t *testing.T) {
	fail := func(nodeimage.Options) error { return errors.New("the engine is gone") }
	ok := func(nodeimage.Options) error { return nil }

	// --build-image builds the missing format from source (no release
	// downloads here), and a build that fails is the error.
	code, stderr, calls := upWithBuild(t, "", false, fail, "--build-image")
	if code != 1 || len(calls) != 1 || !strings.Contains(stderr, "build the missing Linux node image: the engine is gone") {
		t.Fatalf("a failing build: exit %d, %d builds\n%s", code, len(calls), stderr)
	}
	if o := calls[0]; o.Source != nodeimage.FromSource || len(o.Formats) != 1 || o.Formats[0] != nodeimage.FormatDocker || o.KubernetesVersion != testVersion {
		t.Errorf("built %+v, want the docker format of %s from source", o, testVersion)
	}
	if !strings.Contains(stderr, "from source through the Go module proxy ("+sourceBuildTime+")") {
		t.Errorf("the time it takes is not said:\n%s", stderr)
	}

	// A build that leaves the image missing is built once, not again.
	code, stderr, calls = upWithBuild(t, "", false, ok, "--build-image")
	if code != 1 || len(calls) != 1 || !strings.Contains(stderr, "but up still finds none") {
		t.Errorf("a build that made nothing: exit %d, %d builds\n%s", code, len(calls), stderr)
	}

	// On a terminal up asks; yes builds, anything else does not.
	_, stderr, calls = upWithBuild(t, "y\n", true, fail)
	if len(calls) != 1 || !strings.Contains(stderr, "Build the Linux node image for Kubernetes "+testVersion+" here and go on?") {
		t.Errorf("answered yes: %d builds\n%s", len(calls), stderr)
	}
	t.Logf("what up printed, answered yes:\n%s", stderr)
	code, stderr, calls = upWithBuild(t, "n\n", true, fail)
	if code != 1 || len(calls) != 0 || !strings.Contains(stderr, "hwk up --build-image") {
		t.Errorf("answered no: exit %d, %d builds\n%s", code, len(calls), stderr)
	}
	// Not a terminal (CI, a pipe): no question, the ways forward only.
	_, stderr, calls = upWithBuild(t, "y\n", false, fail)
	if len(calls) != 0 || strings.Contains(stderr, "here and go on?") {
		t.Errorf("no terminal: %d builds\n%s", len(calls), stderr)
	}
}
