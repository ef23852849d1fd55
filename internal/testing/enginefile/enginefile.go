// Package enginefile reads a file of the Docker engine's own machine
// through the engine, for tests on a host that lacks it: a Windows host
// has no Linux busybox, and Docker Desktop's Linux VM (under Wine, the
// Linux machine running the test) does. The file is bound into a
// container that never starts, of an image holding one empty directory,
// and copied out of it (GET /containers/{id}/archive mounts a
// container's volumes and bind mounts for the copy, started or not).
package enginefile

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Read returns the regular file at path on the engine's machine. The
// image and container it makes go when t ends; each call makes its own,
// so that tests of several packages running at once keep apart.
func Read(t testing.TB, c client.APIClient, path string) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "x/", Mode: 0o755}); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	id := make([]byte, 6)
	rand.Read(id)
	ref := "hwk-test/empty:" + hex.EncodeToString(id)
	rc, err := c.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	t.Cleanup(func() { _, _ = c.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{}) })
	res, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: ref, Cmd: []string{"/x/file"}},
		HostConfig: &container.HostConfig{Binds: []string{path + ":/x/file:ro"}},
	})
	if err != nil {
		return nil, err
	}
	// Removed before the image (cleanups run last first).
	t.Cleanup(func() {
		_, _ = c.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true})
	})
	cp, err := c.CopyFromContainer(ctx, res.ID, client.CopyFromContainerOptions{SourcePath: "/x/file"})
	if err != nil {
		return nil, fmt.Errorf("%s on the engine's machine: %w", path, err)
	}
	defer cp.Content.Close()
	tr := tar.NewReader(cp.Content)
	h, err := tr.Next()
	if err != nil {
		return nil, fmt.Errorf("the copy of %s: %w", path, err)
	}
	if h.Typeflag != tar.TypeReg {
		return nil, fmt.Errorf("%s on the engine's machine is not a regular file", path)
	}
	return io.ReadAll(tr)
}
