package load

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hwk-dev/hwk/internal/format/imagearchive"
)

// decision is what happens to one image on one node.
type decision struct {
	outcome  string
	manifest int    // the platform loaded, for Loaded and Tagged
	tagFrom  string // an existing name to tag from
	tags     []string
	reason   string
}

// route decides, for every image and node, what happens: a node whose
// platform runs the image gets it, or only its missing names, or nothing
// if it holds it (Present). It fails when an image fits no node, naming
// the image's platforms and the nodes'.
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
				plan[i][j] = decision{outcome: Skipped, reason: whyNot(n.platform, im)}
				continue
			}
			fits++
			k := idx[b]
			d := decision{outcome: Present, manifest: k}
			for _, ref := range im.refs {
				if !n.inv.Has(ref, im.ids[k]...) {
					d.tags = append(d.tags, ref)
				}
			}
			if len(d.tags) > 0 {
				d.outcome = Loaded
				if from := n.inv.NameFor(im.ids[k]...); from != "" {
					d.outcome, d.tagFrom = Tagged, from
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

// whyNot returns why a node runs none of an image's platforms.
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
