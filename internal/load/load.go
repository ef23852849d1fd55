// Package load puts container images, from the local Docker engine or from
// image archive files, into the containerd of the cluster's nodes that can
// run them: it is `hwk load-image`.
//
// Load reads every source (sources.go; engine.go, spool.go and push.go for
// the engine's) while it asks every node what it holds (nodes.go), plans
// what each node gets (plan.go), and carries that out (execute.go),
// streaming to each node only the layers it lacks (stream.go). It knows no
// driver and no cluster record: it loads into a Cluster, which
// pkg/cluster's Provider.NodeHandles gives.
package load

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/distribution/reference"

	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/node"
)

// Options say what Load loads and where.
type Options struct {
	// Images are names or IDs of images in the local Docker engine.
	Images []string
	// Archives are image archive files (docker save, OCI layout tar).
	Archives []string
	// Nodes limits the load to these nodes; empty means every node.
	Nodes []string
	// Engine reaches the Docker engine Images come from; nil means the
	// one the environment names (DOCKER_HOST, else the default socket).
	Engine Engine
	// Progress, when set, is called with the bytes sent so far to each
	// node, from several goroutines.
	Progress func(node string, sent int64, total int64)
}

// Load outcomes for one image on one node.
const (
	Loaded  = "loaded"
	Present = "present"
	Tagged  = "tagged"
	Skipped = "skipped"
	Failed  = "failed"
)

// Result is what Load did, image by image.
type Result struct {
	Images []ImageResult `json:"images"`
}

// ImageResult is one image's outcome on each node.
type ImageResult struct {
	// Image is the image's first name; Names are all of them.
	Image string       `json:"image"`
	Names []string     `json:"names"`
	Nodes []NodeResult `json:"nodes"`
}

// NodeResult is one image on one node. Platform is what the image was
// loaded as there.
type NodeResult struct {
	Node     string `json:"node"`
	Outcome  string `json:"outcome"`
	Platform string `json:"platform,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Bytes is what this image added to the node's stream; LayersSent
	// its layers that went, LayersReused those the node already had and
	// did not get again.
	Bytes        int64         `json:"bytes,omitempty"`
	LayersSent   int           `json:"layersSent,omitempty"`
	LayersReused int           `json:"layersReused,omitempty"`
	Took         time.Duration `json:"-"`
	// Seconds is Took for JSON and YAML readers.
	Seconds float64 `json:"seconds,omitempty"`
}

// Cluster is the cluster Load loads into: its nodes, under its lock.
// pkg/cluster's Provider.NodeHandles gives one.
type Cluster interface {
	// Lock takes the cluster's lock and returns its nodes named in want
	// (every node when want is empty), and what drops the lock.
	Lock(want []string) (nodes []config.Node, unlock func(), err error)
	// Open checks that node n runs and opens a handle on it.
	Open(ctx context.Context, n config.Node) (*node.Node, error)
}

// Load puts images from the local Docker engine or from archive files
// into the containerd of the cluster's nodes that can run them. Every
// image is read and matched to nodes before any node is changed: an
// image no node can run, a missing image or a corrupt archive fails the
// whole call with nothing loaded.
func Load(ctx context.Context, c Cluster, opts Options) (*Result, error) {
	if len(opts.Images) == 0 && len(opts.Archives) == 0 {
		return nil, errors.New("no images to load\n  fix: name images of the local Docker engine (`hwk load-image my/app:dev`) or archives (`--archive app.tar`)")
	}
	opts.Images, opts.Archives = dedupe(opts.Images), dedupe(opts.Archives)
	for _, im := range opts.Images {
		if err := checkImageArg(im); err != nil {
			return nil, err
		}
	}
	targets, unlock, err := c.Lock(opts.Nodes)
	if err != nil {
		return nil, err
	}
	defer unlock()

	// Read the sources while the nodes are asked what they hold.
	var nodes []*loadNode
	nodesDone := make(chan error, 1)
	go func() {
		var err error
		nodes, err = loadNodes(ctx, c, targets)
		nodesDone <- err
	}()
	images, srcErr := readSources(ctx, opts)
	if err := <-nodesDone; err != nil {
		return nil, err
	}
	if srcErr != nil {
		return nil, srcErr
	}

	plan, err := route(images, nodes)
	if err != nil {
		return nil, err
	}
	return execute(ctx, images, nodes, plan, opts)
}

// imageID is an image ID as Docker takes it: the digest of its config,
// whole or a prefix, with or without the algorithm.
var imageID = regexp.MustCompile(`^(sha256:)?[0-9a-f]{1,64}$`)

// checkImageArg refuses, before any node is asked anything, an image
// argument the engine could never match: neither a reference nor an ID.
func checkImageArg(s string) error {
	if imageID.MatchString(s) {
		return nil
	}
	if _, err := reference.ParseNormalizedNamed(s); err != nil {
		return fmt.Errorf("image %q is not an image reference (%v) or an image ID\n  fix: name it as `docker images` shows it, e.g. my/app:dev", shortArg(s), err)
	}
	return nil
}

// shortArg keeps a pasted argument readable in a message.
func shortArg(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
