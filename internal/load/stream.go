package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hwk-dev/hwk/internal/containerd"
	"github.com/hwk-dev/hwk/internal/format/imagearchive"
	"github.com/hwk-dev/hwk/pkg/node"
)

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
func streamJobs(images []*loadImage, nodes []*loadNode, plan [][]decision) []*streamJob {
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
				if d.outcome != Loaded {
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
			if im.engine == nil || plan[i][j].outcome != Loaded {
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

// skipFor returns, as a predicate, the blobs of the job's stream node n
// need not get: those it holds, and layers whose every chain it has
// unpacked (an OCI save of Docker's classic store names a layer blob by
// its diff ID).
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
func (job *streamJob) run(ctx context.Context, opts Options, done func(j int, carried []imagearchive.Carried, took time.Duration, err error)) {
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

// isMissingContent reports whether err is ctr failing an import for want of
// a blob (its "content digest ... not found").
func isMissingContent(err error) bool {
	var ee *node.ExitError
	return errors.As(err, &ee) && strings.Contains(ee.Error(), "not found")
}

// stream sends the job's archive and reports each node's end with what
// it carried of each image.
func (job *streamJob) stream(ctx context.Context, opts Options, done func(j int, carried []imagearchive.Carried, err error)) {
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
