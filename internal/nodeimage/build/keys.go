package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/hwk-dev/hwk/images"
	"github.com/hwk-dev/hwk/internal/hostexec"
	"github.com/hwk-dev/hwk/node-images/linux"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// hashJSON returns the SHA-256 of v's JSON form: keys of things made from
// several inputs.
func hashJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain data is hashed
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// hashFS hashes every file of a recipe tree, path and content.
func hashFS(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(data))
		h.Write(data)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// nodeStage2Format is part of the node's key only: bump it whenever
// nodeStage2 changes what it lays in the node's root (2: the files taken
// from images, and their record), so that node images made by older code
// are not reused.
const nodeStage2Format = 2

// computeKeys derives every cache key from the inputs alone, without
// building anything, so that a build with unchanged inputs is a lookup.
func (b *builder) computeKeys() error {
	b.keys = map[string]string{}
	nodeRecipe, err := hashFS(linux.Recipe)
	if err != nil {
		return fmt.Errorf("hash recipe: %w", err)
	}
	imageRecipe, err := hashFS(images.Recipe)
	if err != nil {
		return fmt.Errorf("hash recipe: %w", err)
	}
	comps, err := b.componentKeys()
	if err != nil {
		return err
	}
	b.keys["images"] = hashJSON([]any{imageRecipe, comps, packFormat, rootFormat})
	b.keys["node"] = hashJSON([]any{nodeRecipe, b.keys["images"], b.opts.Source, b.opts.KubernetesVersion, rootFormat, nodeStage2Format})
	return nil
}

// componentKeys keys each component on its version, source and how it
// is built (or downloaded), and returns them all as "component/name=key"
// lines.
func (b *builder) componentKeys() ([]string, error) {
	if b.keys == nil {
		b.keys = map[string]string{}
	}
	for _, c := range b.recipe.Components {
		v := b.version(&c)
		src := b.sourceOf(&c)
		in := map[string]any{"name": c.Name, "version": v, "source": src}
		if b.goos != "" {
			in["goos"] = b.goos
		}
		if src == nodeimage.FromSource {
			in["build"] = c.Source
			in["go"] = b.goVer
			if c.Source.Module != "" {
				mod, sum, err := b.moduleFiles(&c)
				if err != nil {
					return nil, err
				}
				in["mod"], in["sum"] = mod, sum
			}
			if c.Source.Main != "" {
				src, err := fs.ReadFile(images.Recipe, c.Source.Main)
				if err != nil {
					return nil, fmt.Errorf("recipe: %w", err)
				}
				in["main"] = string(src)
			}
		} else {
			in["release"] = c.Release
		}
		b.keys["component/"+c.Name] = hashJSON(in)
	}
	var comps []string
	for k, v := range b.keys {
		if strings.HasPrefix(k, "component/") {
			comps = append(comps, k+"="+v)
		}
	}
	slices.Sort(comps)
	return comps, nil
}

// name returns the image's directory name in the cache.
func (b *builder) name() string {
	return fmt.Sprintf("linux-%s-%s-%s", b.opts.KubernetesVersion, b.opts.Source, b.keys["node"][:12])
}

// version returns the component's version for this build: Kubernetes' comes
// from the options, every other one is pinned in the recipe.
func (b *builder) version(c *component) string {
	if c.Name == "kubernetes" {
		return b.opts.KubernetesVersion
	}
	return c.Version
}

func goVersion(ctx context.Context) (string, error) {
	out, err := hostexec.Output(hostexec.Command(ctx, "go", "env", "GOVERSION"))
	if err != nil {
		return "", fmt.Errorf("--source source builds with Go, which was not found or failed (%v); install Go 1.26 or use --source release", err)
	}
	return strings.TrimSpace(string(out)), nil
}
