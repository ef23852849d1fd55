package nodeimage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/hwk-dev/hwk/internal/state"
)

// Manifest records what one cached node image is made of and where its
// artifacts are. It is written last, so a directory without one is an
// unfinished build.
type Manifest struct {
	Name              string `json:"name"`
	OS                string `json:"os"`
	KubernetesVersion string `json:"kubernetesVersion"`
	Source            Source `json:"source"`
	// Key is the SHA-256 of every input: recipe files, versions, source,
	// and (for source builds) the Go version.
	Key   string    `json:"key"`
	Built time.Time `json:"built"`
	// Components maps each component (and debian, go) to its version.
	Components map[string]string `json:"components"`
	// Binaries maps "component/binary" to the file that went into the image.
	Binaries map[string]Artifact `json:"binaries"`
	// Images are the container images preloaded into the node's containerd.
	Images    []Image             `json:"images"`
	Artifacts map[Format]Artifact `json:"artifacts"`
	Stages    []Stage             `json:"stages"`
	// Windows describes a Windows node image; nil for Linux.
	Windows *Windows `json:"windows,omitempty"`
	// Dir is where the manifest was read from (not stored).
	Dir string `json:"-"`
	// Origin is where a pulled or loaded image came from; nil for one
	// built here. It is kept in origin.json beside the manifest, so that
	// manifest.json stays the image's own, byte for byte, wherever it is.
	Origin *Origin `json:"-"`
}

// Origin is where a node image in the cache came from.
type Origin struct {
	// Ref is the reference it was pulled by (with its digest), or the
	// archive it was loaded from.
	Ref string `json:"ref,omitempty"`
	// Archive is the file it was loaded from.
	Archive string `json:"archive,omitempty"`
	// Digest is the OCI index it was unpacked from.
	Digest string    `json:"digest"`
	At     time.Time `json:"at"`
}

// Artifact is one file (or, for the docker format, one engine image).
type Artifact struct {
	// Path is relative to the manifest's directory.
	Path   string `json:"path,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size"`
	// DockerImage is the engine's reference and ID for the docker format.
	DockerImage string `json:"dockerImage,omitempty"`
	DockerID    string `json:"dockerID,omitempty"`
}

// Windows is what a Windows node image was made from. Its manifest holds
// the image's Administrator password, so it is written 0600 and Public
// leaves the password out.
type Windows struct {
	// Version is the Windows Server release ("2022").
	Version string `json:"version"`
	Edition string `json:"edition"`
	Build   int    `json:"build"`
	// ISOSHA256 is the checksum of the ISO the image was installed from.
	ISOSHA256 string `json:"isoSHA256"`
	// Locale is the edition's language, which Setup on each clone is
	// told (winimage.CloneOptions); "" on images built before it was
	// recorded, whose clones read the answer file on the image.
	Locale string `json:"locale,omitempty"`
	// AdminPassword is the build's: each clone gets its own from its
	// seed.
	AdminPassword string `json:"adminPassword,omitempty"`
	// UBR is the revision of Build the image runs, as the install VM
	// reported it after the updates (20348.169 is the evaluation ISO's
	// Server 2022, unpatched); 0 in images from before hwk recorded it.
	UBR int `json:"ubr,omitempty"`
	// Updates are the update packages (--updates) that went in, by file
	// name, in order; one that did not apply to the build is not here.
	Updates []string `json:"updates,omitempty"`
}

// BuildString returns the image's Windows build with its revision when known:
// 20348.2762, or 20348.
func (w *Windows) BuildString() string {
	if w.UBR > 0 {
		return fmt.Sprintf("%d.%d", w.Build, w.UBR)
	}
	return fmt.Sprint(w.Build)
}

// Public returns the manifest without secrets, for printing.
func (m *Manifest) Public() *Manifest {
	if m.Windows == nil || m.Windows.AdminPassword == "" {
		return m
	}
	c := *m
	w := *m.Windows
	w.AdminPassword = ""
	c.Windows = &w
	return &c
}

// Label returns the image's OS as people say it: linux, windows 2022.
func (m *Manifest) Label() string {
	if m.Windows != nil {
		return m.OS + " " + m.Windows.Version
	}
	return m.OS
}

// Image is a container image preloaded into the node.
type Image struct {
	Ref string `json:"ref"`
	// Digest is the image's manifest digest as containerd stores it.
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// Stage is one build stage and how long it took.
type Stage struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

const (
	manifestFile = "manifest.json"
	originFile   = "origin.json"
)

// ReadManifest reads the manifest of the image in dir; an error satisfying
// errors.Is(err, fs.ErrNotExist) means there is no finished image there.
func ReadManifest(dir string) (*Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, manifestFile), err)
	}
	m.Dir = dir
	if data, err := os.ReadFile(filepath.Join(dir, originFile)); err == nil {
		var o Origin
		if json.Unmarshal(data, &o) == nil {
			m.Origin = &o
		}
	}
	return m, nil
}

// ParseManifest decodes a manifest's bytes (a pulled image's config blob).
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if m.Artifacts == nil {
		m.Artifacts = map[Format]Artifact{}
	}
	return &m, nil
}

// Marshal returns the manifest as manifest.json holds it. The same manifest
// always gives the same bytes, so a pushed image's manifest and the one a
// pull writes from it are identical.
func (m *Manifest) Marshal() ([]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// Write writes manifest.json (and origin.json for a pulled image) into
// m.Dir. The manifest goes last: a directory without one is unfinished.
func (m *Manifest) Write() error {
	if m.Origin != nil {
		data, err := json.MarshalIndent(m.Origin, "", "  ")
		if err != nil {
			return err
		}
		if err := state.WriteFileAtomic(filepath.Join(m.Dir, originFile), append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if m.Windows != nil {
		mode = 0o600 // the Administrator password
	}
	return state.WriteFileAtomic(filepath.Join(m.Dir, manifestFile), data, mode)
}

// Size returns the total size of the image's file artifacts, in bytes.
func (m *Manifest) Size() int64 {
	var n int64
	for _, a := range m.Artifacts {
		if a.Path != "" {
			n += a.Size
		}
	}
	return n
}

// List returns the node images in the cache, newest first. Directories
// without a manifest (builds that never finished) are skipped.
func List(cacheDir string) ([]*Manifest, error) {
	root := filepath.Join(cacheDir, "node-images")
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list node images: %w", err)
	}
	var out []*Manifest
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		m, err := ReadManifest(filepath.Join(root, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Built.After(out[j].Built) })
	return out, nil
}
