package cmd

import (
	"bytes"
	"testing"
	"time"

	"github.com/hwk-dev/hwk/internal/load"
)

// TestPrintLoadResult checks that each image's line has its own figures,
// and names what the node already had when it had some of the image.
func TestPrintLoadResult(t *testing.T) {
	var b bytes.Buffer
	printLoadResult(&b, &load.Result{Images: []load.ImageResult{
		{Image: "docker.io/my/app:v2", Names: []string{"docker.io/my/app:v2"}, Nodes: []load.NodeResult{
			{Node: "cp", Outcome: load.Loaded, Bytes: 3 << 20, LayersSent: 1, LayersReused: 4, Took: time.Second},
			{Node: "w1", Outcome: load.Loaded, Bytes: 500 << 20, LayersSent: 5, Took: 4 * time.Second},
		}},
		{Image: "docker.io/my/tool:1", Names: []string{"docker.io/my/tool:1"}, Nodes: []load.NodeResult{
			{Node: "cp", Outcome: load.Loaded, Bytes: 2 << 20, LayersSent: 2, LayersReused: 1, Took: time.Second},
			{Node: "w1", Outcome: load.Present},
		}},
	}})
	want := "docker.io/my/app:v2: loaded to cp in 1.0s (3 MiB, 3 MiB/s; 1 layer sent, 4 reused); loaded to w1 in 4.0s (500 MiB, 125 MiB/s)\n" +
		"docker.io/my/tool:1: loaded to cp in 1.0s (2 MiB, 2 MiB/s; 2 layers sent, 1 reused); already present on w1\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
