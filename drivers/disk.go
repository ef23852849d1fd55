package drivers

import (
	"fmt"
	"strconv"
)

// DiskSize returns the size of the disk a VM driver makes for a node that
// asks for disk bytes (nodes[].disk) over a node image of image bytes: disk,
// or image when disk is smaller, with a warning for the user then (else "").
func DiskSize(node string, disk, image int64) (size int64, warning string) {
	// Why: a disk made over an image (a qcow2 overlay, a differencing
	// VHDX) holds the whole image and cannot be smaller; every VM driver
	// keeps the image's size and warns, rather than refusing a cluster
	// over a smaller disk.
	if disk >= image {
		return disk, ""
	}
	return image, fmt.Sprintf("node %s: its disk stays at the node image's %s GiB; nodes[].disk asks for %s GiB, and a disk made over the image cannot be smaller than it",
		node, gib(image), gib(disk))
}

// gib returns bytes in GiB, with as many decimals as it takes.
func gib(bytes int64) string {
	return strconv.FormatFloat(float64(bytes)/(1<<30), 'f', -1, 64)
}
