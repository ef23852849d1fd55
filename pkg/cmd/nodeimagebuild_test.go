package cmd

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// TestBuildDefaultFormatsWithoutDocker checks that with no Docker engine
// the default --formats leaves the docker format out and reports it, and
// that formats asked for by name are kept (stage2.Choose then refuses
// docker's).
func TestBuildDefaultFormatsWithoutDocker(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HWK_HOME", home)
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"node-image", "build", "linux"}, "tar, qcow2, vhdx, vdi"},
		{[]string{"node-image", "build", "linux", "--formats", "docker,tar"}, "docker, tar"},
	} {
		var got []nodeimage.Format
		var out, errOut bytes.Buffer
		root := newRootCommand(Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, deps{
			registry:    func() *drivers.Registry { return drivers.NewRegistry() },
			configureIn: func(context.Context, *nodeimage.Options, string) error { return nil },
			build: func(_ context.Context, o nodeimage.Options) (*nodeimage.Manifest, error) {
				got = o.Formats
				return &nodeimage.Manifest{Name: "linux-test"}, nil
			},
		})
		root.SetArgs(c.args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, errOut.String())
		}
		if nodeimage.JoinFormats(got) != c.want {
			t.Errorf("%v built %s, want %s", c.args, nodeimage.JoinFormats(got), c.want)
		}
		if said := strings.Contains(errOut.String(), "No Docker engine answers"); said != (c.want != "docker, tar") {
			t.Errorf("%v: stderr %q", c.args, errOut.String())
		}
	}
}
