// Package kubeconfig adds a cluster's context to the user's kubeconfig and
// takes it out again, touching nothing else. It follows kubectl's rules for
// which file that is: an explicit path, else every file of the KUBECONFIG
// list, else ~/.kube/config.
package kubeconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hwk-dev/hwk/internal/state"
)

// ContextName returns the name a cluster's cluster, user and context entries
// share in a kubeconfig.
func ContextName(cluster string) string {
	return "hwk-" + cluster
}

// Entry is what a cluster contributes to a kubeconfig.
type Entry struct {
	Cluster  *clientcmdapi.Cluster
	AuthInfo *clientcmdapi.AuthInfo
}

// EntryFrom takes the current context's cluster and user out of a
// kubeconfig such as kubeadm's admin.conf.
func EntryFrom(cfg *clientcmdapi.Config) (Entry, error) {
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return Entry{}, fmt.Errorf("kubeconfig has no current context %q", cfg.CurrentContext)
	}
	cluster, ok := cfg.Clusters[ctx.Cluster]
	if !ok {
		return Entry{}, fmt.Errorf("kubeconfig has no cluster %q", ctx.Cluster)
	}
	user, ok := cfg.AuthInfos[ctx.AuthInfo]
	if !ok {
		return Entry{}, fmt.Errorf("kubeconfig has no user %q", ctx.AuthInfo)
	}
	return Entry{Cluster: cluster, AuthInfo: user}, nil
}

// Paths is the choice of kubeconfig files to use.
type Paths struct {
	// Explicit is a --kubeconfig path; empty means KUBECONFIG, then
	// ~/.kube/config, as kubectl does.
	Explicit string
}

// files returns the precedence list: the explicit file alone, or the
// KUBECONFIG list (deduplicated, empty entries dropped), or the home file.
func (p Paths) files() []string {
	if p.Explicit != "" {
		return []string{p.Explicit}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	var files []string
	for _, f := range rules.Precedence {
		if f != "" {
			files = append(files, f)
		}
	}
	return files
}

// Merge writes the cluster's entries as hwk-NAME into the kubeconfig,
// replacing older hwk-NAME entries and nothing else. It writes to the file
// that already holds hwk-NAME, else to the first existing file of the list,
// else it creates the first (kubectl's choice). The current context changes
// only when setCurrent is true, and then where kubectl would change it.
func Merge(p Paths, cluster string, e Entry, setCurrent bool) error {
	name := ContextName(cluster)
	return withFiles(p, func(files []*file) ([]*file, error) {
		target := pickTarget(files, name)
		target.cfg.Clusters[name] = e.Cluster.DeepCopy()
		target.cfg.AuthInfos[name] = e.AuthInfo.DeepCopy()
		target.cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		changed := []*file{target}
		if setCurrent {
			holder := target
			for _, f := range files {
				if f.cfg.CurrentContext != "" {
					holder = f
					break
				}
			}
			holder.cfg.CurrentContext = name
			if holder != target {
				changed = append(changed, holder)
			}
		}
		return changed, nil
	})
}

// Remove deletes the cluster's hwk-NAME entries from every file that has
// them, and unsets the current context where it was hwk-NAME. Files without
// them are not written.
func Remove(p Paths, cluster string) error {
	name := ContextName(cluster)
	return withFiles(p, func(files []*file) ([]*file, error) {
		var changed []*file
		for _, f := range files {
			if !f.exists || (!holds(f.cfg, name) && f.cfg.CurrentContext != name) {
				continue
			}
			delete(f.cfg.Clusters, name)
			delete(f.cfg.AuthInfos, name)
			delete(f.cfg.Contexts, name)
			if f.cfg.CurrentContext == name {
				f.cfg.CurrentContext = ""
			}
			changed = append(changed, f)
		}
		return changed, nil
	})
}

// Get returns the cluster's entries as a kubeconfig of their own, with
// hwk-NAME as its current context, or an error if no file has them.
func Get(p Paths, cluster string) (*clientcmdapi.Config, error) {
	name := ContextName(cluster)
	for _, path := range p.files() {
		cfg, err := load(path)
		if err != nil {
			return nil, err
		}
		if cfg == nil || !holds(cfg, name) {
			continue
		}
		ctx := cfg.Contexts[name]
		c, u := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
		if c == nil || u == nil {
			return nil, fmt.Errorf("%s: context %s names a cluster or user that is not in the file", path, name)
		}
		out := clientcmdapi.NewConfig()
		out.Clusters[name] = c
		out.AuthInfos[name] = u
		out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		out.CurrentContext = name
		return out, nil
	}
	return nil, fmt.Errorf("no kubeconfig context %s in %v", name, p.files())
}

type file struct {
	path   string
	cfg    *clientcmdapi.Config
	exists bool
}

func holds(cfg *clientcmdapi.Config, name string) bool {
	_, c := cfg.Clusters[name]
	_, u := cfg.AuthInfos[name]
	_, x := cfg.Contexts[name]
	return c || u || x
}

func pickTarget(files []*file, name string) *file {
	for _, f := range files {
		if f.exists && holds(f.cfg, name) {
			return f
		}
	}
	for _, f := range files {
		if f.exists {
			return f
		}
	}
	return files[0]
}

// withFiles locks every file of the list, loads them all (a file that does
// not parse stops everything before anything is written), lets edit change
// them, and writes back the ones it returns: atomically and 0600, since a
// kubeconfig holds credentials.
func withFiles(p Paths, edit func([]*file) ([]*file, error)) error {
	paths := p.files()
	if len(paths) == 0 {
		return errors.New("no kubeconfig path: set KUBECONFIG or HOME")
	}
	unlock, err := lockAll(paths)
	if err != nil {
		return err
	}
	defer unlock()

	files := make([]*file, len(paths))
	for i, path := range paths {
		cfg, err := load(path)
		if err != nil {
			return err
		}
		files[i] = &file{path: path, cfg: cfg, exists: cfg != nil}
		if cfg == nil {
			files[i].cfg = clientcmdapi.NewConfig()
		}
	}
	changed, err := edit(files)
	if err != nil {
		return err
	}
	for _, f := range changed {
		data, err := clientcmd.Write(*f.cfg)
		if err != nil {
			return fmt.Errorf("encode kubeconfig %s: %w", f.path, err)
		}
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return fmt.Errorf("write kubeconfig: %w", err)
		}
		if err := state.WriteFileAtomic(f.path, data, 0o600); err != nil {
			return fmt.Errorf("write kubeconfig: %w", err)
		}
	}
	return nil
}

// load reads one kubeconfig file; a missing file gives nil and no error.
func load(path string) (*clientcmdapi.Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig: %w", err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s is not valid, so hwk leaves it alone: %w", path, err)
	}
	return cfg, nil
}

// lockWait is how long a kubeconfig lock held by someone else is waited for.
var lockWait = 5 * time.Second

// lockAll takes kubectl's own lock on each file (path + ".lock", created
// exclusively), in sorted order as client-go does so that two writers
// cannot deadlock, waiting a few seconds for a busy one.
func lockAll(paths []string) (func(), error) {
	sorted := slices.Clone(paths)
	sort.Strings(sorted)
	var held []string
	release := func() {
		for _, l := range held {
			os.Remove(l)
		}
	}
	var locked []string
	for _, path := range sorted {
		// A file named twice (KUBECONFIG=a;A on Windows, whose names
		// differ in case only, or a:a) is locked once: a second lock would
		// wait for the first.
		if slices.ContainsFunc(locked, func(p string) bool { return samePath(p, path) }) {
			continue
		}
		locked = append(locked, path)
		lock := path + ".lock"
		if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
			release()
			return nil, fmt.Errorf("lock kubeconfig: %w", err)
		}
		deadline := time.Now().Add(lockWait)
		for {
			f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err == nil {
				f.Close()
				held = append(held, lock)
				break
			}
			if !errors.Is(err, fs.ErrExist) || time.Now().After(deadline) {
				release()
				if errors.Is(err, fs.ErrExist) {
					return nil, fmt.Errorf("kubeconfig %s is locked by %s; if no kubectl or hwk is running, delete that file and retry", path, lock)
				}
				return nil, fmt.Errorf("lock kubeconfig: %w", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return release, nil
}

// samePath reports whether a and b name one file: Windows' file names
// are case-insensitive (NTFS as Windows opens it), Unix's are not.
func samePath(a, b string) bool {
	a, b = filepath.Clean(a), filepath.Clean(b)
	if runtime.GOOS == "windows" {
		return strings.EqualFold(a, b)
	}
	return a == b
}
