package drivers

// Traits are the facts about a driver's nodes that a cluster's steps
// depend on. The zero value describes a VM on a network the host and the
// other drivers' VMs reach directly.
type Traits struct {
	// SharesHostKernel: nodes are containers or distributions on a
	// kernel they share (the engine's, WSL's), so kubeadm leaves out the
	// checks such a node fails.
	SharesHostKernel bool
	// APIOnLoopback: the control plane's API server is published on the
	// host's loopback, so its certificate names 127.0.0.1.
	APIOnLoopback bool
	// NeedsHostRoute: the nodes sit on a network of their own that other
	// drivers' nodes reach only through the host, so a Windows worker
	// routes to this driver's control plane through its gateway.
	NeedsHostRoute bool
	// EngineClock: a node runs on its engine's clock, which the API
	// server's node shares, so a start can wait for the pods that
	// started after it.
	EngineClock bool
}

// Traiter is implemented by drivers whose Traits are not the zero value.
type Traiter interface {
	Traits() Traits
}

// TraitsOf returns d's Traits, or the zero value when d has none.
func TraitsOf(d Driver) Traits {
	if t, ok := d.(Traiter); ok {
		return t.Traits()
	}
	return Traits{}
}
