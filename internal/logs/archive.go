// Package logs collects, into one archive per cluster, what people reach
// for when a cluster breaks: from each node its kubelet's and container
// runtime's logs, its containers' logs and its network state, and from the
// API server its nodes, pods and events. A node that does not answer is
// recorded as such and the rest is still collected.
package logs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"
)

// Archive is a .tar.gz being written, every entry under one root
// directory (the archive's name without its extension), as `tar tzf`
// lists it.
type Archive struct {
	f    *os.File
	gz   *gzip.Writer
	tw   *tar.Writer
	root string
	now  time.Time
	// secrets are replaced by "<redacted>" in everything written.
	secrets [][]byte
}

// Redact makes the archive replace secret wherever it appears in what
// is written from now on (the cluster's bootstrap token, which kubeadm's
// output prints).
func (a *Archive) Redact(secret string) {
	if secret != "" {
		a.secrets = append(a.secrets, []byte(secret))
	}
}

func (a *Archive) redact(data []byte) []byte {
	for _, s := range a.secrets {
		data = bytes.ReplaceAll(data, s, []byte("<redacted>"))
	}
	return data
}

// Create starts an archive at path (0600: logs can hold addresses and
// names the user may not want to share by accident).
func Create(path, root string) (*Archive, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	gz := gzip.NewWriter(f)
	return &Archive{f: f, gz: gz, tw: tar.NewWriter(gz), root: root, now: time.Now()}, nil
}

// Add writes one file.
func (a *Archive) Add(name string, data []byte) error {
	data = a.redact(data)
	hdr := &tar.Header{Name: path.Join(a.root, name), Mode: 0o644, Size: int64(len(data)), ModTime: a.now, Typeflag: tar.TypeReg}
	if err := a.tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := a.tw.Write(data)
	return err
}

// AddTar copies the regular files of a tar stream in under dir; links and
// special files are left out (a pod log directory holds symlinks to the
// newest file, whose content is there under its own name).
func (a *Archive) AddTar(dir string, r io.Reader) (int, error) {
	tr := tar.NewReader(r)
	n := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		// Read the whole file before writing its entry: a stream cut in the
		// middle of one must not leave a short entry, which would make
		// the rest of the archive unreadable. (The kubelet rotates
		// container logs at 10Mi.)
		data, err := io.ReadAll(tr)
		if err != nil {
			return n, fmt.Errorf("%s: %w", hdr.Name, err)
		}
		data = a.redact(data)
		out := &tar.Header{Name: path.Join(a.root, dir, path.Clean("/" + hdr.Name)[1:]), Mode: 0o644, Size: int64(len(data)), ModTime: hdr.ModTime, Typeflag: tar.TypeReg}
		if err := a.tw.WriteHeader(out); err != nil {
			return n, err
		}
		if _, err := a.tw.Write(data); err != nil {
			return n, err
		}
		n++
	}
}

// Close finishes the archive.
func (a *Archive) Close() error {
	err := a.tw.Close()
	if gerr := a.gz.Close(); err == nil {
		err = gerr
	}
	if ferr := a.f.Close(); err == nil {
		err = ferr
	}
	return err
}
