package ui

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
)

// Phases shows which phase each of several waits of one step is in (the
// first boot of each Windows node): on a terminal as the running step's
// detail, and elsewhere as a line each time one changes, so that a CI log
// shows where a slow wait was. A nil *Phases shows nothing.
type Phases struct {
	status *Status
	log    io.Writer

	mu    sync.Mutex
	items map[string]string
}

// NewPhases shows phases under st's running step; nil st shows nothing.
func NewPhases(st *Status) *Phases {
	if st == nil || st.quiet {
		return nil
	}
	return &Phases{status: st, log: st.Writer(st.out), items: map[string]string{}}
}

// Set records that name is now in phase; a phase it is in already shows nothing
// new.
func (p *Phases) Set(name, phase string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.items[name] == phase {
		return
	}
	p.items[name] = phase
	p.show(name + ": " + phase)
}

// Done records that name's wait is over, with a last line for logs (line ""
// prints none); on a terminal name leaves the detail.
func (p *Phases) Done(name, line string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.items, name)
	if line != "" {
		p.show(name + ": " + line)
	} else if p.status.Terminal() {
		p.show("")
	}
}

// show redraws the detail on a terminal, or prints line elsewhere.
func (p *Phases) show(line string) {
	if p.status.Terminal() {
		names := make([]string, 0, len(p.items))
		for n := range p.items {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = n + ": " + p.items[n]
		}
		p.status.Detail(strings.Join(parts, "; "))
		return
	}
	if line != "" {
		fmt.Fprintf(p.log, "    %s\n", line)
	}
}
