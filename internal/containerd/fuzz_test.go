package containerd

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// FuzzParseInventory reads what a node's inventory script printed, and
// checks that what parseInventory made of it round-trips: printed the way
// ctr and crictl print, the inventory parses back as itself.
func FuzzParseInventory(f *testing.F) {
	f.Add(linuxInventory)
	f.Add(strings.ReplaceAll(strings.Replace(linuxInventory, "x86_64", "AMD64", 1), "\n", "\r\n"))
	f.Add("x86_64\n---\nREF TYPE DIGEST SIZE PLATFORMS LABELS\n---\n{\"images\":[]}\n---\n---\nKEY PARENT KIND\n")
	f.Add("x86_64\n")
	f.Add("aarch64\n---\n---\n{}\n---\n---\n---\nextra\n")
	f.Fuzz(func(t *testing.T, out string) {
		inv, err := parseInventory(out)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "unexpected output: ") && !strings.HasPrefix(err.Error(), "read crictl's image list: ") {
				t.Fatalf("unclear error %v", err)
			}
			return
		}
		if inv.Arch != strings.TrimSpace(inv.Arch) {
			t.Fatalf("architecture %q is not trimmed", inv.Arch)
		}
		lines := strings.Count(out, "\n") + 1
		for d := range inv.Blobs {
			if !strings.HasPrefix(d, "sha256:") || d != strings.TrimSpace(d) {
				t.Fatalf("blob %q", d)
			}
		}
		for d := range inv.Snapshots {
			if !strings.HasPrefix(d, "sha256:") || strings.ContainsAny(d, " \t\r\n") {
				t.Fatalf("snapshot %q", d)
			}
		}
		for ref, d := range inv.Targets {
			if ref == "" || d == "" || strings.ContainsAny(ref+d, " \t\r\n") {
				t.Fatalf("target %q -> %q", ref, d)
			}
		}
		if n := len(inv.Blobs) + len(inv.Snapshots) + len(inv.Targets); n > lines {
			t.Fatalf("%d lines made %d entries", lines, n)
		}
		// Printed again, as the script prints (under an architecture that
		// is one word: that line is not what this checks).
		again, err := parseInventory(printInventory(inv))
		if err != nil {
			t.Fatalf("the printed inventory does not parse: %v\n%s", err, printInventory(inv))
		}
		again.Arch = inv.Arch
		if !reflect.DeepEqual(normalize(again), normalize(inv)) {
			t.Fatalf("parsed\n%+v\nprinted and parsed again\n%+v", inv, again)
		}
	})
}

// printInventory writes inv as the inventory script would have printed it.
func printInventory(inv *Inventory) string {
	var b strings.Builder
	b.WriteString("x86_64\n---\nREF TYPE DIGEST SIZE PLATFORMS LABELS\n")
	for _, ref := range sortedKeys(inv.Targets) {
		b.WriteString(ref + " application/vnd.oci.image.index.v1+json " + inv.Targets[ref] + " 1.0 MiB linux/amd64 -\n")
	}
	b.WriteString("---\n")
	type image struct {
		ID       string   `json:"id"`
		RepoTags []string `json:"repoTags"`
	}
	list := struct {
		Images []image `json:"images"`
	}{Images: []image{}}
	for _, id := range sortedKeys(inv.IDs) {
		list.Images = append(list.Images, image{ID: id, RepoTags: inv.IDs[id]})
	}
	j, _ := json.Marshal(list)
	b.Write(j)
	b.WriteString("\n---\n")
	for _, d := range sortedKeys(inv.Blobs) {
		b.WriteString(d + "\n")
	}
	b.WriteString("---\nKEY PARENT KIND\n")
	for _, d := range sortedKeys(inv.Snapshots) {
		b.WriteString(d + "  Committed\n")
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// normalize makes an image that had no names and one that was not listed
// the same: neither names anything.
func normalize(inv *Inventory) *Inventory {
	out := *inv
	out.IDs = map[string][]string{}
	for id, refs := range inv.IDs {
		if len(refs) > 0 {
			out.IDs[id] = refs
		}
	}
	return &out
}
