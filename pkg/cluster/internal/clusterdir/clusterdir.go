// Package clusterdir is the layout of a cluster's directory: the record of
// its config, its bootstrap token, its kubeconfig and its logs.
package clusterdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/hwk-dev/hwk/internal/state"
	"github.com/hwk-dev/hwk/pkg/apis/config"
)

// Files in a cluster's directory. All are private to the user: the token
// and the kubeconfig are credentials.
const (
	RecordFile     = "cluster.yaml"
	TokenFile      = "bootstrap-token"
	KubeconfigFile = "kubeconfig"
	LogsDir        = "logs"
)

// WriteRecord saves the effective config of a cluster being made, before
// anything else is made, so that `down` knows every node and driver even
// when `up` stopped half-way.
func WriteRecord(dir string, c *config.Cluster) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("record cluster %s: %w", c.Name, err)
	}
	return state.WriteFileAtomic(filepath.Join(dir, RecordFile), data, 0o600)
}

// ReadRecord loads a cluster's saved config; a cluster without one gives
// fs.ErrNotExist.
func ReadRecord(dir string) (*config.Cluster, error) {
	path := filepath.Join(dir, RecordFile)
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	c, err := config.Load(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if err := config.CheckRecordNames(c, filepath.Base(dir)); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return c, nil
}

// IsNotExist reports whether err means the record is not there.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
