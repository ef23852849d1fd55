package config

import (
	"fmt"
	"strings"
)

// fromFlag marks a node field whose value a flag set: it has no line,
// and must not fall back to the line of its node.
const fromFlag = -1

// setPositions hands the lines a walk found to the cluster and its nodes.
func (c *Cluster) setPositions(pos map[string]int) {
	c.pos = map[string]int{}
	for path, line := range pos {
		i, field, ok := splitNodePath(path)
		if !ok {
			c.pos[path] = line
			continue
		}
		if i >= len(c.Nodes) {
			continue
		}
		if c.Nodes[i].pos == nil {
			c.Nodes[i].pos = map[string]int{}
		}
		c.Nodes[i].pos[field] = line
	}
}

// line returns the file line of a field path: the field's own line, or else the
// line of the nearest enclosing field that came from the file; 0 when
// nothing on the path came from a file.
func (c *Cluster) line(path string) int {
	if i, field, ok := splitNodePath(path); ok {
		if i < len(c.Nodes) {
			if l, ok := c.Nodes[i].pos[field]; ok {
				return max(l, 0)
			}
			return c.Nodes[i].pos[""]
		}
		return 0
	}
	for p := path; p != ""; {
		if l, ok := c.pos[p]; ok {
			return l
		}
		dot := strings.LastIndexByte(p, '.')
		if dot < 0 {
			break
		}
		p = p[:dot]
	}
	return 0
}

// splitNodePath splits "nodes[3].memory" into 3 and "memory" ("" for the
// node itself).
func splitNodePath(path string) (index int, field string, ok bool) {
	rest, found := strings.CutPrefix(path, "nodes[")
	if !found {
		return 0, "", false
	}
	idx, after, found := strings.Cut(rest, "]")
	if !found {
		return 0, "", false
	}
	if _, err := fmt.Sscanf(idx, "%d", &index); err != nil {
		return 0, "", false
	}
	return index, strings.TrimPrefix(after, "."), true
}
