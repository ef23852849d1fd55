package config

// Overrides are the command-line flags that change a config. They win over
// the file; SetDefaults then fills whatever neither set. A nil count means
// the flag was not given.
type Overrides struct {
	Name              string
	KubernetesVersion string
	// Driver replaces the driver of every node.
	Driver string
	// WindowsWorkers and LinuxWorkers set how many workers of that OS the
	// cluster has: the file's first N are kept, the rest dropped, and
	// default workers appended when the file has fewer.
	WindowsWorkers *int
	LinuxWorkers   *int
	// Image replaces the image of every Linux node: a cached image's name
	// or a reference to pull.
	Image string
	// Memory replaces the memory of every node (a quantity, e.g. 4Gi).
	Memory string
}

// ApplyOverrides applies flags to a loaded config. A config without nodes
// first gets the default topology when a flag is about nodes, so
// "--windows-workers 2" means the default cluster with two Windows workers.
func ApplyOverrides(c *Cluster, o Overrides) error {
	var errs Errors
	for _, f := range []struct {
		flag  string
		count *int
	}{{"--windows-workers", o.WindowsWorkers}, {"--linux-workers", o.LinuxWorkers}} {
		if f.count != nil && *f.count < 0 {
			errs.add(f.flag, "%d is negative; use 0 or more", *f.count)
		}
	}
	if len(errs) > 0 {
		return errs
	}

	// A value a flag replaced is no longer on its line of the file, so its
	// problems must not point there.
	if o.Name != "" {
		c.Name = o.Name
		delete(c.pos, "name")
	}
	if o.KubernetesVersion != "" {
		c.KubernetesVersion = o.KubernetesVersion
		delete(c.pos, "kubernetesVersion")
	}
	if (o.WindowsWorkers != nil || o.LinuxWorkers != nil || o.Driver != "" || o.Image != "" || o.Memory != "") && len(c.Nodes) == 0 {
		c.Nodes = DefaultNodes()
	}
	if o.WindowsWorkers != nil {
		c.Nodes = setWorkerCount(c.Nodes, Windows, *o.WindowsWorkers)
	}
	if o.LinuxWorkers != nil {
		c.Nodes = setWorkerCount(c.Nodes, Linux, *o.LinuxWorkers)
	}
	if o.Driver != "" {
		for i := range c.Nodes {
			n := &c.Nodes[i]
			n.Driver = o.Driver
			n.setByFlag("driver")
		}
	}
	if o.Memory != "" {
		for i := range c.Nodes {
			n := &c.Nodes[i]
			n.Memory = o.Memory
			n.setByFlag("memory")
		}
	}
	if o.Image != "" {
		for i := range c.Nodes {
			n := &c.Nodes[i]
			if n.OS == Windows {
				continue
			}
			n.Image = o.Image
			n.setByFlag("image")
		}
	}
	return nil
}

// setByFlag marks a field of the node as a flag's: its value is on no
// line of the file.
func (n *Node) setByFlag(field string) {
	if n.pos == nil {
		n.pos = map[string]int{}
	}
	n.pos[field] = fromFlag
}

// setWorkerCount keeps the first want workers of one OS, in their order,
// and appends blank ones until there are want. A node without an os is a
// linux node, as SetDefaults will make it.
func setWorkerCount(nodes []Node, os OS, want int) []Node {
	out := make([]Node, 0, len(nodes)+want)
	have := 0
	for _, n := range nodes {
		nodeOS := n.OS
		if nodeOS == "" {
			nodeOS = Linux
		}
		if n.Role != ControlPlane && nodeOS == os {
			if have == want {
				continue
			}
			have++
		}
		out = append(out, n)
	}
	for ; have < want; have++ {
		out = append(out, Node{Role: Worker, OS: os})
	}
	return out
}
