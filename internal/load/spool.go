package load

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/internal/format/imagearchive"
)

// spoolEngineImages saves to a file the engine images, from an engine
// older than Docker 25, that a node already holds some layers of, and makes
// them archive images, so that each node gets only the layers it lacks.
// Other images stream from the engine (see engineJob). It returns what
// removes the file.
func spoolEngineImages(ctx context.Context, images []*loadImage, nodes []*loadNode, plan [][]decision) (func(), error) {
	// Why: such an engine's save always carries every layer under names
	// that do not tell which layer is which, so the file is read once
	// through to know them. Newer engines name their blobs by digest, and
	// their saves are filtered as they stream.
	var spool []int
	for i, im := range images {
		if im.engine == nil || im.engine.OCI || len(im.engine.DiffIDs) == 0 {
			continue
		}
		// A classic save's layer blobs are their diff IDs.
		var layers []imagearchive.Layer
		for _, d := range im.engine.DiffIDs {
			layers = append(layers, imagearchive.Layer{Digest: d, DiffID: d})
		}
		for j, n := range nodes {
			if plan[i][j].outcome == Loaded && slices.Contains(imagearchive.Reused(n.inv, layers), true) {
				spool = append(spool, i)
				break
			}
		}
	}
	if len(spool) == 0 {
		return func() {}, nil
	}
	start := time.Now()
	f, err := os.CreateTemp("", "hwk-load-*.tar")
	if err != nil {
		return func() {}, err
	}
	cleanup := func() { os.Remove(f.Name()) }
	var names []string
	for _, i := range spool {
		names = append(names, images[i].engine.SaveNames...)
	}
	// The scan reads the save as it comes and the file takes a copy, so
	// that knowing the layers costs no second read of the whole image.
	var scanned *imagearchive.Archive
	var scanErr error
	rc, err := images[spool[0]].eng.Save(ctx, names, nil)
	if err == nil {
		tee := io.TeeReader(rc, f)
		if scanned, scanErr = imagearchive.Scan(tee); scanErr == nil {
			_, err = io.Copy(io.Discard, tee) // the tar's end padding, for the file
		}
		rc.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return cleanup, fmt.Errorf("save %s from the Docker engine: %w\n  nothing was loaded", strings.Join(names, ", "), err)
	}
	if scanErr != nil {
		return cleanup, fmt.Errorf("the Docker engine's save of %s: %w\n  nothing was loaded", strings.Join(names, ", "), scanErr)
	}
	af := &archiveFile{path: f.Name(), scan: scanned, took: time.Since(start)}
	for _, i := range spool {
		im := images[i]
		k := slices.IndexFunc(af.scan.Images, func(a imagearchive.Image) bool { return slices.Contains(a.Refs, im.refs[0]) })
		if k < 0 || len(af.scan.Images[k].Manifests) != 1 || af.scan.Images[k].Manifests[0].Config != im.engine.ID {
			return cleanup, fmt.Errorf("image %s changed in the Docker engine while it was being loaded; load it again\n  nothing was loaded", im.name)
		}
		im.archive, im.index, im.engine = af, k, nil
	}
	return cleanup, nil
}
