package load

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hwk-dev/hwk/internal/containerd"
	"github.com/hwk-dev/hwk/internal/format/imagearchive"
)

// execute carries the plan out, each node in parallel.
func execute(ctx context.Context, images []*loadImage, nodes []*loadNode, plan [][]decision, opts Options) (*Result, error) {
	res := &Result{}
	for i, im := range images {
		il := ImageResult{Image: im.name, Names: im.refs}
		for j, n := range nodes {
			d := plan[i][j]
			nl := NodeResult{Node: n.name, Outcome: d.outcome, Reason: d.reason}
			if d.outcome != Skipped {
				nl.Platform = im.platforms[d.manifest].Describe()
			}
			il.Nodes = append(il.Nodes, nl)
		}
		res.Images = append(res.Images, il)
	}
	var mu sync.Mutex
	set := func(i, j int, f func(*NodeResult)) {
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
			if d.outcome != Tagged {
				continue
			}
			start := time.Now()
			var err error
			for _, t := range d.tags {
				if err = containerd.Tag(ctx, n.handle, d.tagFrom, t); err != nil {
					break
				}
			}
			set(i, j, func(nl *NodeResult) {
				nl.Took = time.Since(start)
				nl.Seconds = nl.Took.Seconds()
				if err != nil {
					nl.Outcome, nl.Reason = Failed, err.Error()
				}
			})
		}
	}

	jobs := streamJobs(images, nodes, plan)
	var wg sync.WaitGroup
	for _, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job.run(ctx, opts, func(j int, carried []imagearchive.Carried, took time.Duration, err error) {
				for k, i := range job.images {
					set(i, j, func(nl *NodeResult) {
						c := carried[k]
						nl.Bytes, nl.LayersSent, nl.LayersReused = c.Bytes, c.LayersSent, c.LayersReused
						nl.Took, nl.Seconds = took, took.Seconds()
						if err != nil {
							nl.Outcome, nl.Reason = Failed, err.Error()
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
			if nl.Outcome == Failed {
				failed = append(failed, fmt.Sprintf("%s on %s: %s", il.Image, nl.Node, nl.Reason))
			}
		}
	}
	if len(failed) > 0 {
		return res, fmt.Errorf("%s", strings.Join(dedupe(failed), "\n"))
	}
	return res, nil
}
