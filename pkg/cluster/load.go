package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distribution/reference"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/pkg/apis/config"
	"github.com/hwk-dev/hwk/pkg/bootstrap"
	"github.com/hwk-dev/hwk/pkg/containerd"
	"github.com/hwk-dev/hwk/pkg/imagearchive"
	"github.com/hwk-dev/hwk/pkg/node"
)

// LoadOptions say what LoadImages loads and where.
type LoadOptions struct {
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
	LoadLoaded  = "loaded"
	LoadPresent = "present"
	LoadTagged  = "tagged"
	LoadSkipped = "skipped"
	LoadFailed  = "failed"
)

// LoadResult is what LoadImages did, image by image.
type LoadResult struct {
	Images []ImageLoad `json:"images"`
}

// ImageLoad is one image's outcome on each node.
type ImageLoad struct {
	// Image is the image's first name; Names are all of them.
	Image string     `json:"image"`
	Names []string   `json:"names"`
	Nodes []NodeLoad `json:"nodes"`
}

// NodeLoad is one image on one node. Platform is what the image was
// loaded as there.
type NodeLoad struct {
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

// loadNode is a node an image may go to.
type loadNode struct {
	name     string
	platform imagearchive.Platform
	handle   *node.Node
	inv      *containerd.Inventory
}

// loadImage is one image to load, from an archive or the engine.
type loadImage struct {
	name string // as messages show it
	refs []string
	// platforms are what the image is built for; complete[i] says the
	// source holds all of platform i.
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

// decision is what happens to one image on one node.
type decision struct {
	outcome  string
	manifest int    // the platform loaded, for LoadLoaded and LoadTagged
	tagFrom  string // an existing name to tag from
	tags     []string
	reason   string
}

// LoadImages puts images from the local Docker engine or from archive
// files into the containerd of the cluster's nodes that can run them.
// Every image is read and matched to nodes before any node is changed:
// an image no node can run, a missing image or a corrupt archive fails
// the whole call with nothing loaded.
func (p *Provider) LoadImages(ctx context.Context, name string, opts LoadOptions) (*LoadResult, error) {
	if len(opts.Images) == 0 && len(opts.Archives) == 0 {
		return nil, errors.New("no images to load\n  fix: name images of the local Docker engine (`hwk load-image my/app:dev`) or archives (`--archive app.tar`)")
	}
	opts.Images, opts.Archives = dedupe(opts.Images), dedupe(opts.Archives)
	for _, im := range opts.Images {
		if err := checkImageArg(im); err != nil {
			return nil, err
		}
	}
	unlock, err := p.lock(name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := p.record(name)
	if err != nil {
		return nil, err
	}
	targets, err := selectNodes(rec, opts.Nodes)
	if err != nil {
		return nil, err
	}

	// Read the sources while the nodes are asked what they hold.
	var nodes []*loadNode
	nodesDone := make(chan error, 1)
	go func() {
		var err error
		nodes, err = p.loadNodes(ctx, name, targets)
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
	return p.execute(ctx, images, nodes, plan, opts)
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

// selectNodes picks the record's nodes named in want (all when empty).
func selectNodes(rec *config.Cluster, want []string) ([]config.Node, error) {
	if len(want) == 0 {
		return rec.Nodes, nil
	}
	var names []string
	for _, n := range rec.Nodes {
		names = append(names, n.Name)
	}
	var out []config.Node
	for _, w := range want {
		i := slices.Index(names, w)
		if i < 0 {
			return nil, fmt.Errorf("cluster %s has no node %q; its nodes are %s", rec.Name, w, strings.Join(names, ", "))
		}
		if !slices.ContainsFunc(out, func(n config.Node) bool { return n.Name == w }) {
			out = append(out, rec.Nodes[i])
		}
	}
	return out, nil
}

// loadNodes opens a handle on each node and reads what it holds, all at
// once.
func (p *Provider) loadNodes(ctx context.Context, cluster string, targets []config.Node) ([]*loadNode, error) {
	out := make([]*loadNode, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, n := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = p.loadNode(ctx, cluster, n)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func (p *Provider) loadNode(ctx context.Context, cluster string, n config.Node) (*loadNode, error) {
	d, err := p.Registry.Get(n.Driver)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	ref := drivers.Ref{Cluster: cluster, Name: n.Name}
	if m, err := d.Inspect(ctx, ref); err == nil && m.State != drivers.StateRunning {
		return nil, fmt.Errorf("node %s is %s, not running; images can only be loaded into a running node", n.Name, m.State)
	}
	h, err := d.Node(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	inv, err := containerd.List(ctx, h)
	if err != nil {
		return nil, err
	}
	plat := imagearchive.Platform{OS: string(n.OS), Architecture: inv.Arch}.Normalize()
	if n.OS == config.Windows {
		plat.OSVersion = bootstrap.WindowsBuilds[n.WindowsVersion]
	}
	return &loadNode{name: n.Name, platform: plat, handle: h, inv: inv}, nil
}

// readSources scans every archive and asks the engine about every image.
func readSources(ctx context.Context, opts LoadOptions) ([]*loadImage, error) {
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

// route decides, for every image and node, what happens. It fails when an
// image fits no node, naming the image's platforms and the nodes'.
func route(images []*loadImage, nodes []*loadNode) ([][]decision, error) {
	plan := make([][]decision, len(images))
	var errs []string
	for i, im := range images {
		plan[i] = make([]decision, len(nodes))
		var complete []imagearchive.Platform
		var idx []int
		for k, ok := range im.complete {
			if ok {
				complete = append(complete, im.platforms[k])
				idx = append(idx, k)
			}
		}
		fits := 0
		for j, n := range nodes {
			b := imagearchive.Best(n.platform, complete)
			if b < 0 {
				plan[i][j] = decision{outcome: LoadSkipped, reason: whyNot(n.platform, im)}
				continue
			}
			fits++
			k := idx[b]
			d := decision{outcome: LoadPresent, manifest: k}
			for _, ref := range im.refs {
				if !n.inv.Has(ref, im.ids[k]...) {
					d.tags = append(d.tags, ref)
				}
			}
			if len(d.tags) > 0 {
				d.outcome = LoadLoaded
				if from := n.inv.NameFor(im.ids[k]...); from != "" {
					d.outcome, d.tagFrom = LoadTagged, from
				}
			}
			plan[i][j] = d
		}
		if fits == 0 {
			errs = append(errs, noFitMessage(im, nodes))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s\n  nothing was loaded", strings.Join(errs, "\n"))
	}
	return plan, nil
}

// whyNot is why a node runs none of an image's platforms.
func whyNot(host imagearchive.Platform, im *loadImage) string {
	var reasons []string
	for k, p := range im.platforms {
		if ok, why := imagearchive.Runs(host, p); !ok {
			reasons = append(reasons, why)
		} else if !im.complete[k] {
			reasons = append(reasons, fmt.Sprintf("its %s content is not in the source (only some platforms were pulled or saved)", p.Describe()))
		}
	}
	if len(reasons) == 1 {
		return reasons[0]
	}
	return "no platform fits: " + strings.Join(dedupe(reasons), "; ")
}

func noFitMessage(im *loadImage, nodes []*loadNode) string {
	var ip, np []string
	for _, p := range im.platforms {
		ip = append(ip, p.Describe())
	}
	for _, n := range nodes {
		np = append(np, fmt.Sprintf("%s (%s)", n.name, n.platform.Describe()))
	}
	msg := fmt.Sprintf("image %s (%s) fits none of the nodes: %s", im.name, strings.Join(dedupe(ip), ", "), strings.Join(np, ", "))
	if len(nodes) > 0 {
		msg += "\n  " + nodes[0].name + ": " + whyNot(nodes[0].platform, im)
	}
	return msg
}

func dedupe(list []string) []string {
	var out []string
	for _, s := range list {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// execute carries the plan out, each node in parallel.
func (p *Provider) execute(ctx context.Context, images []*loadImage, nodes []*loadNode, plan [][]decision, opts LoadOptions) (*LoadResult, error) {
	res := &LoadResult{}
	for i, im := range images {
		il := ImageLoad{Image: im.name, Names: im.refs}
		for j, n := range nodes {
			d := plan[i][j]
			nl := NodeLoad{Node: n.name, Outcome: d.outcome, Reason: d.reason}
			if d.outcome != LoadSkipped {
				nl.Platform = im.platforms[d.manifest].Describe()
			}
			il.Nodes = append(il.Nodes, nl)
		}
		res.Images = append(res.Images, il)
	}
	var mu sync.Mutex
	set := func(i, j int, f func(*NodeLoad)) {
		mu.Lock()
		defer mu.Unlock()
		f(&res.Images[i].Nodes[j])
	}

	// Before anything changes on a node: an engine push or save that
	// fails leaves every node as it was.
	unpush, err := pushEngineImages(ctx, images, nodes, plan)
	defer unpush()
	if err != nil {
		return nil, err
	}
	cleanup, err := spoolEngineImages(ctx, images, nodes, plan)
	defer cleanup()
	if err != nil {
		return nil, err
	}

	// Tags are quick and independent of the streams.
	for i := range images {
		for j, n := range nodes {
			d := plan[i][j]
			if d.outcome != LoadTagged {
				continue
			}
			start := time.Now()
			var err error
			for _, t := range d.tags {
				if err = containerd.Tag(ctx, n.handle, d.tagFrom, t); err != nil {
					break
				}
			}
			set(i, j, func(nl *NodeLoad) {
				nl.Took = time.Since(start)
				nl.Seconds = nl.Took.Seconds()
				if err != nil {
					nl.Outcome, nl.Reason = LoadFailed, err.Error()
				}
			})
		}
	}

	jobs := p.streamJobs(images, nodes, plan)
	var wg sync.WaitGroup
	for _, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job.run(ctx, opts, func(j int, carried []imagearchive.Carried, took time.Duration, err error) {
				for k, i := range job.images {
					set(i, j, func(nl *NodeLoad) {
						c := carried[k]
						nl.Bytes, nl.LayersSent, nl.LayersReused = c.Bytes, c.LayersSent, c.LayersReused
						nl.Took, nl.Seconds = took, took.Seconds()
						if err != nil {
							nl.Outcome, nl.Reason = LoadFailed, err.Error()
						}
					})
				}
			})
		}()
	}
	wg.Wait()

	var failed []string
	for _, il := range res.Images {
		for _, nl := range il.Nodes {
			if nl.Outcome == LoadFailed {
				failed = append(failed, fmt.Sprintf("%s on %s: %s", il.Image, nl.Node, nl.Reason))
			}
		}
	}
	if len(failed) > 0 {
		return res, fmt.Errorf("%s", strings.Join(dedupe(failed), "\n"))
	}
	return res, nil
}

// spoolEngineImages saves to a file the engine images that a node
// already holds some layers of, when the engine is older than Docker 25,
// and makes them archive images, so that each node gets only the layers
// it lacks: such an engine's save always carries every layer under names
// that do not say which layer is which, so the file is read once through
// to know them. Newer engines name their blobs by digest, and their
// saves are filtered as they stream (see engineJob); images no node has
// any layer of stream straight from the engine too. It returns what
// removes the file.
func spoolEngineImages(ctx context.Context, images []*loadImage, nodes []*loadNode, plan [][]decision) (func(), error) {
	var spool []int
	for i, im := range images {
		if im.engine == nil || im.engine.OCI || len(im.engine.DiffIDs) == 0 {
			continue
		}
		// A classic save's layer blobs are their diff IDs.
		var layers []imagearchive.Layer
		for _, d := range im.engine.DiffIDs {
			layers = append(layers, imagearchive.Layer{Digest: d, DiffID: d})
		}
		for j, n := range nodes {
			if plan[i][j].outcome == LoadLoaded && slices.Contains(imagearchive.Reused(n.inv, layers), true) {
				spool = append(spool, i)
				break
			}
		}
	}
	if len(spool) == 0 {
		return func() {}, nil
	}
	start := time.Now()
	f, err := os.CreateTemp("", "hwk-load-*.tar")
	if err != nil {
		return func() {}, err
	}
	cleanup := func() { os.Remove(f.Name()) }
	var names []string
	for _, i := range spool {
		names = append(names, images[i].engine.SaveNames...)
	}
	// The scan reads the save as it comes and the file takes a copy, so
	// that knowing the layers costs no second read of the whole image.
	var scanned *imagearchive.Archive
	var scanErr error
	rc, err := images[spool[0]].eng.Save(ctx, names, nil)
	if err == nil {
		tee := io.TeeReader(rc, f)
		if scanned, scanErr = imagearchive.Scan(tee); scanErr == nil {
			_, err = io.Copy(io.Discard, tee) // the tar's end padding, for the file
		}
		rc.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return cleanup, fmt.Errorf("save %s from the Docker engine: %w\n  nothing was loaded", strings.Join(names, ", "), err)
	}
	if scanErr != nil {
		return cleanup, fmt.Errorf("the Docker engine's save of %s: %w\n  nothing was loaded", strings.Join(names, ", "), scanErr)
	}
	af := &archiveFile{path: f.Name(), scan: scanned, took: time.Since(start)}
	for _, i := range spool {
		im := images[i]
		k := slices.IndexFunc(af.scan.Images, func(a imagearchive.Image) bool { return slices.Contains(a.Refs, im.refs[0]) })
		if k < 0 || len(af.scan.Images[k].Manifests) != 1 || af.scan.Images[k].Manifests[0].Config != im.engine.ID {
			return cleanup, fmt.Errorf("image %s changed in the Docker engine while it was being loaded; load it again\n  nothing was loaded", im.name)
		}
		im.archive, im.index, im.engine = af, k, nil
	}
	return cleanup, nil
}

// streamJob sends one archive stream to one or more nodes: the images
// (indexes into the images slice) that they all need, from one source.
type streamJob struct {
	images []int
	nodes  []int
	total  int64
	// carried is, per image, what the stream carries of it.
	carried []imagearchive.Carried
	// before is time spent on the stream before the job (see
	// archiveFile.took).
	before time.Duration
	// open starts the stream.
	open      func(ctx context.Context) (io.ReadCloser, error)
	loadNodes []*loadNode
	// full is the same job sending every layer, for a node whose import
	// missed a layer it was counted on to have (its containerd collected
	// it since it was asked); nil when the job sends every layer anyway.
	full *streamJob
	// filter, when set, leaves out of each node's stream the blobs the
	// node holds, by digest as they come (engine saves in an OCI
	// layout); refs are then the names to report each image's figures
	// by, and chains the chain IDs each diff ID stands at.
	filter bool
	refs   []string
	chains map[string][]string
}

// streamJobs groups the imports: one job per archive file per node (a
// file can be read once per node at no cost), and one per set of nodes
// that need the same engine images on the same platform, so the engine
// saves each set once and the stream fans out.
func (p *Provider) streamJobs(images []*loadImage, nodes []*loadNode, plan [][]decision) []*streamJob {
	var jobs []*streamJob
	// Archives: per file, per node.
	files := map[*archiveFile][]int{}
	var order []*archiveFile
	for i, im := range images {
		if im.archive != nil {
			if _, ok := files[im.archive]; !ok {
				order = append(order, im.archive)
			}
			files[im.archive] = append(files[im.archive], i)
		}
	}
	for _, af := range order {
		for j := range nodes {
			var sels []imagearchive.Selection
			var idx []int
			for _, i := range files[af] {
				d := plan[i][j]
				if d.outcome != LoadLoaded {
					continue
				}
				sels = append(sels, imagearchive.Selection{Image: images[i].index, Manifest: d.manifest})
				idx = append(idx, i)
			}
			if len(sels) == 0 {
				continue
			}
			job := archiveJob(af, sels, idx, j, nodes, nodes[j].inv)
			if job.reuses() && !af.partial {
				job.full = archiveJob(af, sels, idx, j, nodes, nil)
			}
			jobs = append(jobs, job)
		}
	}
	// Engine images: group nodes by what they need.
	groups := map[string]*streamJob{}
	var keys []string
	for j, n := range nodes {
		var idx []int
		var key []string
		for i, im := range images {
			if im.engine == nil || plan[i][j].outcome != LoadLoaded {
				continue
			}
			idx = append(idx, i)
			key = append(key, fmt.Sprintf("%d@%s", i, im.platforms[plan[i][j].manifest]))
		}
		if len(idx) == 0 {
			continue
		}
		k := n.platform.String() + "|" + strings.Join(key, ",")
		g := groups[k]
		if g == nil {
			g = engineJob(images, idx, plan, j, nodes)
			groups[k] = g
			keys = append(keys, k)
		}
		g.nodes = append(g.nodes, j)
	}
	sort.Strings(keys)
	for _, k := range keys {
		jobs = append(jobs, groups[k])
	}
	return jobs
}

// archiveJob streams sels of an archive file to node j, leaving out the
// layers have (the node's inventory, or nil) holds.
func archiveJob(af *archiveFile, sels []imagearchive.Selection, idx []int, j int, nodes []*loadNode, have imagearchive.Have) *streamJob {
	job := &streamJob{images: idx, nodes: []int{j}, loadNodes: nodes, carried: make([]imagearchive.Carried, len(idx)), before: af.took}
	planned, planErr := af.scan.Plan(sels, have)
	if planErr == nil {
		job.total = planned.Bytes
		copy(job.carried, planned.Images)
	}
	job.open = func(ctx context.Context) (io.ReadCloser, error) {
		if planErr != nil {
			return nil, planErr
		}
		f, err := os.Open(af.path)
		if err != nil {
			return nil, err
		}
		pr, pw := io.Pipe()
		go func() {
			err := af.scan.Write(pw, f, planned)
			f.Close()
			pw.CloseWithError(err)
		}()
		return pr, nil
	}
	return job
}

// reuses reports whether the job leaves out layers a node has.
func (job *streamJob) reuses() bool {
	for _, c := range job.carried {
		if c.LayersReused > 0 {
			return true
		}
	}
	return false
}

func engineJob(images []*loadImage, idx []int, plan [][]decision, j int, nodes []*loadNode) *streamJob {
	job := &streamJob{images: idx, loadNodes: nodes, chains: map[string][]string{}}
	var names []string
	var platforms []imagearchive.Platform
	var eng Engine
	multi, oci := false, true
	for _, i := range idx {
		ei := images[i].engine
		eng = images[i].eng
		names = append(names, ei.SaveNames...)
		p := images[i].platforms[plan[i][j].manifest]
		if !slices.Contains(platforms, p) {
			platforms = append(platforms, p)
		}
		multi = multi || ei.Multi
		oci = oci && ei.OCI
		job.total += ei.Size
		// The engine's save carries the whole image.
		job.carried = append(job.carried, imagearchive.Carried{LayersSent: len(ei.DiffIDs), Bytes: ei.Size})
		job.refs = append(job.refs, images[i].refs[0])
		for k, c := range imagearchive.ChainIDs(ei.DiffIDs) {
			job.chains[ei.DiffIDs[k]] = append(job.chains[ei.DiffIDs[k]], c)
		}
	}
	if !multi {
		// The classic store holds one platform per image; an engine
		// too old for the platform option must not be sent one.
		platforms = nil
	}
	job.open = func(ctx context.Context) (io.ReadCloser, error) {
		return eng.Save(ctx, names, platforms)
	}
	if oci {
		full := *job
		job.filter, job.full = true, &full
	}
	return job
}

// skipFor says which blobs of the job's stream node n need not get: those
// it holds, and layers whose every chain it has unpacked (an OCI save of
// Docker's classic store names a layer blob by its diff ID).
func (job *streamJob) skipFor(n *loadNode) func(digest string) bool {
	return func(d string) bool {
		if n.inv.Blob(d) {
			return true
		}
		chains := job.chains[d]
		for _, c := range chains {
			if !n.inv.Snapshot(c) {
				return false
			}
		}
		return len(chains) > 0
	}
}

// run streams the job's archive into each of its nodes at once and
// reports each node's end. A node whose import missed a layer it was
// counted on to have gets the full job once more.
func (job *streamJob) run(ctx context.Context, opts LoadOptions, done func(j int, carried []imagearchive.Carried, took time.Duration, err error)) {
	start := time.Now().Add(-job.before)
	job.stream(ctx, opts, func(j int, carried []imagearchive.Carried, err error) {
		if err != nil && job.full != nil && isMissingContent(err) {
			full := *job.full
			full.nodes = []int{j}
			full.run(ctx, opts, func(j int, carried []imagearchive.Carried, _ time.Duration, err error) {
				done(j, carried, time.Since(start), err)
			})
			return
		}
		if err != nil && job.full == nil && isMissingContent(err) {
			err = fmt.Errorf("%w\n  the node no longer holds a layer it held when hwk asked (its containerd removed it meanwhile); load the image again", err)
		}
		done(j, carried, time.Since(start), err)
	})
}

// isMissingContent is ctr failing an import for want of a blob (its
// "content digest ... not found").
func isMissingContent(err error) bool {
	var ee *node.ExitError
	return errors.As(err, &ee) && strings.Contains(ee.Error(), "not found")
}

// stream sends the job's archive and reports each node's end with what
// it carried of each image.
func (job *streamJob) stream(ctx context.Context, opts LoadOptions, done func(j int, carried []imagearchive.Carried, err error)) {
	src, err := job.open(ctx)
	if err != nil {
		for _, j := range job.nodes {
			done(j, job.carried, err)
		}
		return
	}
	defer src.Close()
	type sink struct {
		j       int
		pw      *io.PipeWriter
		sent    atomic.Int64
		carried []imagearchive.Carried
	}
	sinks := make([]*sink, len(job.nodes))
	errs := make([]error, len(job.nodes))
	var wg sync.WaitGroup
	for s, j := range job.nodes {
		pr, pw := io.Pipe()
		sk := &sink{j: j, pw: pw, carried: job.carried}
		sinks[s] = sk
		n := job.loadNodes[j]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !job.filter {
				errs[s] = containerd.Import(ctx, n.handle, pr)
				// A node that fails stops reading; the others go on.
				pr.CloseWithError(errNodeGone)
				return
			}
			fr, fw := io.Pipe()
			filtered := make(chan error, 1)
			go func() {
				f, err := imagearchive.Filter(fw, pr, job.skipFor(n))
				if err == nil {
					sk.carried = make([]imagearchive.Carried, len(job.refs))
					for k, ref := range job.refs {
						sk.carried[k] = f.Carried(ref)
					}
				}
				fw.CloseWithError(err)
				pr.CloseWithError(errNodeGone)
				filtered <- err
			}()
			err := containerd.Import(ctx, n.handle, fr)
			fr.CloseWithError(errNodeGone)
			// The filter's own failure (a corrupt blob) is the cause of
			// the import's.
			if ferr := <-filtered; ferr != nil && !errors.Is(ferr, errNodeGone) {
				err = ferr
			}
			errs[s] = err
		}()
	}
	// Fan out: each chunk of the source goes to every node still taking
	// it. The slowest node sets the pace, and nothing is held on disk.
	buf := make([]byte, 1<<20)
	var readErr error
	live := len(sinks)
	for live > 0 {
		n, err := src.Read(buf)
		if n > 0 {
			live = 0
			for _, sk := range sinks {
				if sk.pw == nil {
					continue
				}
				if _, werr := sk.pw.Write(buf[:n]); werr != nil {
					sk.pw = nil
					continue
				}
				live++
				sent := sk.sent.Add(int64(n))
				if opts.Progress != nil {
					opts.Progress(job.loadNodes[sk.j].name, sent, job.total)
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = fmt.Errorf("the image stream broke off: %w", err)
			break
		}
	}
	for _, sk := range sinks {
		if sk.pw == nil {
			continue
		}
		if readErr != nil {
			// Make sure no node takes what came for a whole archive.
			imagearchive.Poison(sk.pw)
			sk.pw.CloseWithError(readErr)
		} else {
			sk.pw.Close()
		}
	}
	wg.Wait()
	for s, sk := range sinks {
		err := errs[s]
		if readErr != nil {
			// The node's failure only echoes the broken source.
			err = readErr
		}
		done(sk.j, sk.carried, err)
	}
}

var errNodeGone = errors.New("the node stopped reading")
