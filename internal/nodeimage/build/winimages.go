package build

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hwk-dev/hwk/internal/format/imagearchive"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// windowsImages gets every image of images/windows.yaml for the image's
// Windows build: from the archives given, else from its registry. Either
// way one platform of each is kept, the one the node will run.
func (wb *windowsBuilder) windowsImages(ctx context.Context) error {
	var archives []*scannedArchive
	for _, p := range wb.w.ImageArchives {
		a, err := scanArchive(p)
		if err != nil {
			return err
		}
		archives = append(archives, a)
	}
	host := imagearchive.Platform{OS: "windows", Architecture: "amd64", OSVersion: fmt.Sprintf("10.0.%d", wb.build())}
	dir := filepath.Join(wb.opts.CacheDir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	wb.pulled = nil
	for _, im := range wb.images {
		// Tags may name the Kubernetes version as {{.KubernetesVersion}}.
		tag := strings.ReplaceAll(im.Tag, "{{.KubernetesVersion}}", wb.w.KubernetesVersion)
		ref := im.Name + ":" + tag
		file := filepath.Join(dir, fmt.Sprintf("windows-%d-%s.tar", wb.build(), fileName(ref)))
		from := "from its registry"
		var a *scannedArchive
		for _, c := range archives {
			if c.has(ref) {
				a, from = c, "from "+filepath.Base(c.path)
				break
			}
		}
		var digest string
		err := wb.step(fmt.Sprintf("Get %s for %s %s", ref, host.Describe(), from), func() error {
			var err error
			if a != nil {
				digest, err = a.extract(ref, host, im.HostProcess, file)
			} else {
				digest, err = wb.pullWindowsImage(ctx, ref, host, im.HostProcess, file)
			}
			return err
		})
		if err != nil {
			return err
		}
		st, err := os.Stat(file)
		if err != nil {
			return err
		}
		wb.pulled = append(wb.pulled, builtImage{Image: nodeimage.Image{Ref: ref, Digest: digest, Size: st.Size()}, Path: file})
	}
	return nil
}

// pickWindows chooses among an image's platforms the one a node of host's
// build runs (the newest such), or for a HostProcess image, which runs
// on the host whatever its build, the newest windows/amd64 one.
func pickWindows(ref string, host imagearchive.Platform, hostProcess bool, ps []imagearchive.Platform) (int, error) {
	if i := imagearchive.Best(host, ps); i >= 0 {
		return i, nil
	}
	if hostProcess {
		best := -1
		for i, p := range ps {
			if p.OS == "windows" && p.Architecture == "amd64" && (best < 0 || p.OSVersion > ps[best].OSVersion) {
				best = i
			}
		}
		if best >= 0 {
			return best, nil
		}
	}
	var have []string
	for _, p := range ps {
		have = append(have, p.Describe())
	}
	why := "it has no platforms"
	if len(ps) > 0 {
		_, why = imagearchive.Runs(host, ps[0])
	}
	return -1, fmt.Errorf("%s has nothing a %s node runs (it has %s: %s)", ref, host.Describe(), strings.Join(have, ", "), why)
}

// pullWindowsImage pulls the platform of ref a node of host's build runs,
// writes it as a docker-archive tarball and returns its manifest digest.
func (wb *windowsBuilder) pullWindowsImage(ctx context.Context, ref string, host imagearchive.Platform, hostProcess bool, file string) (string, error) {
	img, err := wb.remoteWindowsImage(ctx, ref, host, hostProcess)
	if err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", err
	}
	// Layers are fetched (and checked against their digests) as the
	// archive is written.
	return d.String(), writeArchive(file, tag, img)
}

// remoteWindowsImage finds the platform of ref to pull.
func (wb *windowsBuilder) remoteWindowsImage(ctx context.Context, ref string, host imagearchive.Platform, hostProcess bool) (v1.Image, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, err
	}
	opts := []remote.Option{remote.WithContext(ctx)}
	if wb.opts.HTTP != nil {
		opts = append(opts, remote.WithTransport(wb.opts.HTTP.Transport))
	}
	desc, err := remote.Get(tag, opts...)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w (a host without registry access can pass the images with --image-archive)", ref, err)
	}
	var img v1.Image
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		var ps []imagearchive.Platform
		for _, d := range im.Manifests {
			p := imagearchive.Platform{}
			if d.Platform != nil {
				p = imagearchive.Platform{OS: d.Platform.OS, Architecture: d.Platform.Architecture, Variant: d.Platform.Variant, OSVersion: d.Platform.OSVersion}
			}
			ps = append(ps, p)
		}
		i, err := pickWindows(ref, host, hostProcess, ps)
		if err != nil {
			return nil, err
		}
		if img, err = idx.Image(im.Manifests[i].Digest); err != nil {
			return nil, fmt.Errorf("pull %s: %w", ref, err)
		}
	} else {
		if img, err = desc.Image(); err != nil {
			return nil, fmt.Errorf("pull %s: %w", ref, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("pull %s: %w", ref, err)
		}
		p := imagearchive.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant, OSVersion: cf.OSVersion}
		if _, err := pickWindows(ref, host, hostProcess, []imagearchive.Platform{p}); err != nil {
			return nil, err
		}
	}
	return img, nil
}

// scannedArchive is an image archive the user gave, read and checked.
type scannedArchive struct {
	path string
	a    *imagearchive.Archive
}

func scanArchive(p string) (*scannedArchive, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("--image-archive: %w", err)
	}
	defer f.Close()
	a, err := imagearchive.Scan(f)
	if err != nil {
		return nil, fmt.Errorf("--image-archive %s: %w", p, err)
	}
	return &scannedArchive{path: p, a: a}, nil
}

func (s *scannedArchive) find(ref string) int {
	want, err := imagearchive.NormalizeRef(ref)
	if err != nil {
		return -1
	}
	for i, im := range s.a.Images {
		for _, r := range im.Refs {
			if r == want {
				return i
			}
		}
	}
	return -1
}

func (s *scannedArchive) has(ref string) bool { return s.find(ref) >= 0 }

// extract writes ref's platform for host out of the archive, as an OCI
// layout tar holding that platform alone.
func (s *scannedArchive) extract(ref string, host imagearchive.Platform, hostProcess bool, file string) (string, error) {
	i := s.find(ref)
	im := s.a.Images[i]
	j, err := pickWindows(ref+" in "+s.path, host, hostProcess, im.Platforms())
	if err != nil {
		return "", err
	}
	want, _ := imagearchive.NormalizeRef(ref)
	plan, err := s.a.Plan([]imagearchive.Selection{{Image: i, Manifest: j, Refs: []string{want}}}, nil)
	if err != nil {
		return "", fmt.Errorf("--image-archive %s: %w", s.path, err)
	}
	src, err := os.Open(s.path)
	if err != nil {
		return "", err
	}
	defer src.Close()
	out, err := os.Create(file + ".tmp")
	if err != nil {
		return "", err
	}
	err = s.a.Write(out, src, plan)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(file + ".tmp")
		return "", fmt.Errorf("--image-archive %s: %w", s.path, err)
	}
	return im.Manifests[j].Digest, os.Rename(file+".tmp", file)
}

// unzipOpenSSH unpacks Win32-OpenSSH's release zip, whose files sit in
// one top directory (OpenSSH-Win64/), into dir.
func unzipOpenSSH(zipPath, dir string) error {
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return err
	}
	defer zr.Close()
	found := false
	for _, f := range zr.File {
		clean := path.Clean(strings.ReplaceAll(f.Name, `\`, "/"))
		top, rest, ok := strings.Cut(clean, "/")
		if !ok || !strings.EqualFold(top, "OpenSSH-Win64") || f.FileInfo().IsDir() {
			continue
		}
		if strings.HasPrefix(rest, "../") || path.IsAbs(rest) || rest == ".." {
			return fmt.Errorf("%s: member %q leaves its directory", zipPath, f.Name)
		}
		found = found || strings.EqualFold(rest, "install-sshd.ps1")
		dst := filepath.Join(dir, filepath.FromSlash(rest))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := extractZipFile(f, dst); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("not Win32-OpenSSH's OpenSSH-Win64.zip (no OpenSSH-Win64/install-sshd.ps1 in it)")
	}
	return nil
}

func extractZipFile(f *zip.File, dst string) error {
	r, err := f.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	w, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
