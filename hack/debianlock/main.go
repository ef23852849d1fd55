// Command debianlock makes the Debian locks committed beside the recipe:
// node-images/linux/debian.lock.yaml (the node's root, components.yaml's
// debian section) and images/userland.lock.yaml (images/linux.yaml's
// userland section). It reads each section's mirror and suite, verifies
// the InRelease against the pinned Debian keys, resolves the package list
// as debootstrap --variant=minbase --include would, and writes the lock,
// printing what changed. Run it from the repository root after changing a
// package list, or when the mirror no longer has a locked version:
//
//	go run ./hack/debianlock     (or: make debian-lock)
//
// The locks are not embedded in any recipe yet, so writing them does not
// change the node image's cache key.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/internal/debian"
	"github.com/hwk-dev/hwk/internal/nodeimage/build"
	"github.com/hwk-dev/hwk/node-images/linux"
)

// Where the locks live, relative to the repository root. Neither matches
// a //go:embed pattern (node-images/linux embeds components.yaml *.sh files
// modules; images embeds linux.yaml userland.sh pause): embedding them
// would change the image's cache key before anything builds from them.
const (
	NodeLock     = "node-images/linux/debian.lock.yaml"
	UserlandLock = "images/userland.lock.yaml"
	// Component and Arch are those of the node image (and of the oracle
	// test's debootstrap).
	Component = "main"
	Arch      = "amd64"
	// Command is how to make the locks again, for headers and errors.
	Command = "go run ./hack/debianlock"
)

// Target is one lock and the recipe section it is made from.
type Target struct {
	Name   string // "node" or "userland"
	Path   string
	Recipe build.Debian
	What   string
}

// Targets are the locks this command makes, from the embedded recipe.
func Targets() ([]Target, error) {
	node, userland, err := build.DebianRecipes()
	if err != nil {
		return nil, err
	}
	return []Target{
		{Name: "node", Path: NodeLock, Recipe: node, What: "hwk's Linux node image (node-images/linux/components.yaml, debian:)"},
		{Name: "userland", Path: UserlandLock, Recipe: userland, What: "the userland base of hwk's source-built images (images/linux.yaml, userland:)"},
	}, nil
}

// Header is the comment at the top of a lock file.
func (t Target) Header() string {
	return fmt.Sprintf(`Debian packages of %s,
resolved from the signed %s/%s index as debootstrap --variant=minbase --include would
(every Priority: required and Essential package, apt, and the requested ones, closed over
Pre-Depends and Depends), in unpack order.

Made by %s; do not edit. Run it again after changing the recipe's
package list, or when the mirror no longer serves a locked version.`, t.What, Component, Arch, Command)
}

func main() {
	root := flag.String("root", ".", "the repository root the lock paths are relative to")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *root); err != nil {
		fmt.Fprintln(os.Stderr, "debianlock:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root string) error {
	targets, err := Targets()
	if err != nil {
		return err
	}
	type source struct {
		rel *debian.Release
		idx *debian.Index
	}
	sources := map[string]source{}
	for _, t := range targets {
		key := t.Recipe.Mirror + " " + t.Recipe.Suite
		s, ok := sources[key]
		if !ok {
			start := time.Now()
			rel, idx, err := ReadIndex(ctx, http.DefaultClient, t.Recipe.Mirror, t.Recipe.Suite)
			if err != nil {
				return err
			}
			fmt.Printf("%s %s: InRelease %s (%s), %d packages in %s/%s, read in %s\n", t.Recipe.Mirror, t.Recipe.Suite, rel.Date.UTC().Format(time.RFC3339), rel.Version, len(idx.Packages), Component, Arch, time.Since(start).Round(time.Millisecond))
			s = source{rel, idx}
			sources[key] = s
		}
		l, err := debian.NewLock(s.rel, s.idx, t.Recipe.Mirror, t.Recipe.Suite, t.Recipe.Packages)
		if err != nil {
			return fmt.Errorf("%s: %w", t.Name, err)
		}
		var buf bytes.Buffer
		if err := debian.WriteLock(&buf, l, t.Header()); err != nil {
			return err
		}
		p := filepath.Join(root, filepath.FromSlash(t.Path))
		var size int64
		for _, pkg := range l.Packages {
			size += pkg.Size
		}
		fmt.Printf("%s: %d packages, %.1f MiB of .deb\n", t.Path, len(l.Packages), float64(size)/(1<<20))
		if old, err := os.ReadFile(p); err == nil {
			if ol, err := debian.ReadLock(bytes.NewReader(old)); err == nil {
				for _, d := range ol.Diff(l) {
					fmt.Println("  " + d)
				}
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	return nil
}

// ReadIndex reads and verifies a suite's InRelease and its main/amd64
// index with the committed Debian keys.
func ReadIndex(ctx context.Context, client *http.Client, mirror, suite string) (*debian.Release, *debian.Index, error) {
	kr, err := debian.ReadKeyringFS(linux.DebianKeyring, "keyring")
	if err != nil {
		return nil, nil, fmt.Errorf("the committed Debian keyring: %w", err)
	}
	v, err := debian.NewVerifier(kr, linux.DebianKeys)
	if err != nil {
		return nil, nil, fmt.Errorf("the committed Debian keyring: %w", err)
	}
	a := &debian.Archive{Mirror: strings.TrimRight(mirror, "/"), Suite: suite, Verifier: v, HTTP: client}
	rel, err := a.Release(ctx)
	if err != nil {
		return nil, nil, err
	}
	idx, err := a.Packages(ctx, rel, Component, Arch)
	if err != nil {
		return nil, nil, err
	}
	return rel, idx, nil
}
