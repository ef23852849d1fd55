package load

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hwk-dev/hwk/internal/format/imagearchive"
)

// loadImage is one image to load, from an archive or the engine.
type loadImage struct {
	name string // as messages show it
	refs []string
	// platforms are what the image is built for; complete[i] reports
	// whether the source holds all of platform i.
	platforms []imagearchive.Platform
	complete  []bool
	// ids are, per platform, the digests that identify the image on a
	// node: the config digest (crictl's ID) and manifest or index
	// digests (ctr's target).
	ids [][]string
	// source: an archive file and the image's index in it, or the engine.
	archive *archiveFile
	index   int
	engine  *EngineImage
	eng     Engine
}

type archiveFile struct {
	path string
	scan *imagearchive.Archive
	// took is how long making the file took (an engine save hwk spooled
	// or a push it took in), which its loads' times include.
	took time.Duration
	// partial is set when the file lacks what the nodes held when asked
	// (what a push sent), so there is no whole image to fall back on.
	partial bool
}

// readSources scans every archive and asks the engine about every image.
func readSources(ctx context.Context, opts Options) ([]*loadImage, error) {
	var images []*loadImage
	for _, path := range opts.Archives {
		af, err := scanArchive(path)
		if err != nil {
			return nil, err
		}
		for i, im := range af.scan.Images {
			if len(im.Refs) == 0 {
				return nil, fmt.Errorf("archive %s: image %s has no name, so the kubelet could not find it\n  fix: save it by name (`docker save -o %s my/app:dev`)", path, im.Digest, path)
			}
			li := &loadImage{name: im.Refs[0], refs: im.Refs, archive: af, index: i}
			for _, m := range im.Manifests {
				li.platforms = append(li.platforms, m.Platform)
				li.complete = append(li.complete, m.Missing == "")
				li.ids = append(li.ids, []string{m.Config, m.Digest, im.Digest})
			}
			images = append(images, li)
		}
	}
	if len(opts.Images) > 0 {
		eng := opts.Engine
		if eng == nil {
			var err error
			if eng, err = NewEngine(); err != nil {
				return nil, err
			}
		}
		for _, arg := range opts.Images {
			ei, err := eng.Inspect(ctx, arg)
			if err != nil {
				return nil, err
			}
			li := &loadImage{name: ei.Refs[0], refs: ei.Refs, engine: ei, eng: eng}
			for _, m := range ei.Platforms {
				li.platforms = append(li.platforms, m.Platform)
				li.complete = append(li.complete, m.Available)
				li.ids = append(li.ids, []string{ei.ID, m.Digest})
			}
			images = append(images, li)
		}
	}
	return images, nil
}

func scanArchive(path string) (*archiveFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", path, err)
	}
	defer f.Close()
	a, err := imagearchive.Scan(f)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w\n  nothing was loaded", path, err)
	}
	return &archiveFile{path: path, scan: a}, nil
}
