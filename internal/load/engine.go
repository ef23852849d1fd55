package load

import (
	"context"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/versions"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hwk-dev/hwk/internal/format/imagearchive"
)

// Engine is a Docker engine that images are loaded from.
type Engine interface {
	// Inspect describes an image by name or ID.
	Inspect(ctx context.Context, image string) (*EngineImage, error)
	// Save streams an archive of the named images (docker save). With
	// platforms, only those platforms of multi-platform images.
	Save(ctx context.Context, names []string, platforms []imagearchive.Platform) (io.ReadCloser, error)
	// Push pushes platform of image to the registry reference target
	// under a tag of its own, which it removes again however the push
	// ends.
	Push(ctx context.Context, image, target string, platform imagearchive.Platform) error
}

// EngineImage is an image of the engine.
type EngineImage struct {
	// ID is the engine's image ID: the config digest in the classic
	// store, the index or manifest digest in the containerd store.
	ID string
	// Refs are the names it is to have on the nodes, fully qualified.
	Refs []string
	// SaveNames are the names to ask Save for.
	SaveNames []string
	// Platforms are what the engine holds of it: one in the classic
	// store, one per manifest (available or not) in the containerd store.
	Platforms []EnginePlatform
	// Multi is true when the engine keeps several platforms under one
	// name (its containerd store), so a save must say which.
	Multi bool
	// OCI is true when the engine saves an OCI layout (Docker 25 and
	// later, either store), whose blobs are named by digest.
	OCI bool
	// Size is the engine's idea of the image's size, for progress.
	Size int64
	// DiffIDs are the image's layers (base first), by the digest of
	// their uncompressed content: the engine's own platform's in the
	// containerd store.
	DiffIDs []string
}

// EnginePlatform is one platform of an engine image.
type EnginePlatform struct {
	Platform imagearchive.Platform
	// Digest is the platform's manifest digest (containerd store only).
	Digest string
	// Available is false for a platform the engine knows of but has not
	// pulled; it cannot be saved.
	Available bool
}

// dockerEngine is the Engine of a Docker API endpoint.
type dockerEngine struct {
	c *client.Client
}

// NewEngine connects to the engine the environment names, or to the one
// opts name.
func NewEngine(opts ...client.Opt) (Engine, error) {
	if len(opts) == 0 {
		opts = []client.Opt{client.FromEnv}
	}
	c, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w\n  fix: check DOCKER_HOST and DOCKER_API_VERSION", err)
	}
	return &dockerEngine{c: c}, nil
}

func (e *dockerEngine) wrap(err error) error {
	if client.IsErrConnectionFailed(err) {
		return fmt.Errorf("cannot reach the Docker engine at %s to read images: %w\n  fix: start Docker, or load an archive instead (`docker save -o app.tar IMAGE` elsewhere, then `hwk load-image --archive app.tar`)", e.c.DaemonHost(), err)
	}
	return err
}

// ociSaveAPI is the first API version whose save writes an OCI layout
// (Docker 25).
const ociSaveAPI = "1.44"

// manifestsAPI is the first API version whose image inspect lists an
// image's platforms and whose save takes a platform (Docker 28).
const manifestsAPI = "1.48"

func (e *dockerEngine) Inspect(ctx context.Context, name string) (*EngineImage, error) {
	if _, err := e.c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return nil, e.wrap(err)
	}
	var opts []client.ImageInspectOption
	if !versions.LessThan(e.c.ClientVersion(), manifestsAPI) {
		opts = append(opts, client.ImageInspectWithManifests(true))
	}
	res, err := e.c.ImageInspect(ctx, name, opts...)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("image %s is not in the local Docker engine\n  fix: `docker pull %s` or `docker build -t %s .` first, or load an archive with --archive\n  nothing was loaded", name, name, name)
		}
		return nil, e.wrap(fmt.Errorf("inspect image %s: %w", name, err))
	}
	ei, err := engineImage(name, res.InspectResponse)
	if err != nil {
		return nil, err
	}
	ei.OCI = !versions.LessThan(e.c.ClientVersion(), ociSaveAPI)
	return ei, nil
}

// engineImage reads an inspect response: the names to load the image
// under and its platforms.
func engineImage(arg string, r image.InspectResponse) (*EngineImage, error) {
	ei := &EngineImage{ID: r.ID, Size: r.Size}
	if r.RootFS.Type == "layers" {
		ei.DiffIDs = r.RootFS.Layers
	}
	byID := r.ID == arg || strings.HasPrefix(strings.TrimPrefix(r.ID, "sha256:"), strings.TrimPrefix(arg, "sha256:"))
	if named, err := reference.ParseNormalizedNamed(arg); err == nil && !byID {
		if _, digested := named.(reference.Digested); !digested {
			ei.Refs = []string{reference.TagNameOnly(named).String()}
			ei.SaveNames = []string{arg}
		}
	}
	if len(ei.Refs) == 0 {
		// An ID or a digest: the image goes under the tags it has.
		for _, t := range r.RepoTags {
			ref, err := imagearchive.NormalizeRef(t)
			if err != nil {
				continue
			}
			ei.Refs = append(ei.Refs, ref)
			ei.SaveNames = append(ei.SaveNames, t)
		}
		if len(ei.Refs) == 0 {
			return nil, fmt.Errorf("image %s has no name, so the kubelet could not find it on a node\n  fix: tag it (`docker tag %s my/app:dev`) and load it by that name", arg, arg)
		}
	}
	for _, m := range r.Manifests {
		if m.Kind != image.ManifestKindImage || m.ImageData == nil {
			continue
		}
		ei.Platforms = append(ei.Platforms, EnginePlatform{Platform: fromOCI(m.ImageData.Platform), Digest: m.ID, Available: m.Available})
	}
	ei.Multi = len(ei.Platforms) > 0
	if !ei.Multi {
		ei.Platforms = []EnginePlatform{{
			Platform:  imagearchive.Platform{OS: r.Os, Architecture: r.Architecture, Variant: r.Variant, OSVersion: r.OsVersion}.Normalize(),
			Available: true,
		}}
	}
	return ei, nil
}

func fromOCI(p ocispec.Platform) imagearchive.Platform {
	return imagearchive.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant, OSVersion: p.OSVersion}.Normalize()
}

func (e *dockerEngine) Save(ctx context.Context, names []string, platforms []imagearchive.Platform) (io.ReadCloser, error) {
	var opts []client.ImageSaveOption
	if len(platforms) > 0 {
		ps := make([]ocispec.Platform, len(platforms))
		for i, p := range platforms {
			ps[i] = ocispec.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant, OSVersion: p.OSVersion}
		}
		opts = append(opts, client.ImageSaveWithPlatforms(ps...))
	}
	rc, err := e.c.ImageSave(ctx, names, opts...)
	if err != nil {
		return nil, e.wrap(fmt.Errorf("docker save %s: %w", strings.Join(names, " "), err))
	}
	return rc, nil
}

func (e *dockerEngine) Push(ctx context.Context, image, target string, platform imagearchive.Platform) (err error) {
	if _, err := e.c.ImageTag(ctx, client.ImageTagOptions{Source: image, Target: target}); err != nil {
		return e.wrap(fmt.Errorf("tag %s as %s: %w", image, target, err))
	}
	defer func() {
		_, rmErr := e.c.ImageRemove(context.WithoutCancel(ctx), target, client.ImageRemoveOptions{})
		if err == nil && rmErr != nil {
			err = fmt.Errorf("remove the tag %s again: %w", target, rmErr)
		}
	}()
	p := ocispec.Platform{OS: platform.OS, Architecture: platform.Architecture, Variant: platform.Variant, OSVersion: platform.OSVersion}
	// The engine wants credentials even for a registry that asks for
	// none: an empty set ("{}").
	res, err := e.c.ImagePush(ctx, target, client.ImagePushOptions{RegistryAuth: "e30=", Platform: &p})
	if err != nil {
		return e.wrap(fmt.Errorf("push %s: %w", target, err))
	}
	if err := res.Wait(ctx); err != nil {
		return fmt.Errorf("push %s: %w", target, err)
	}
	return nil
}
