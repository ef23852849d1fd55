package ui

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Transfers shows how several byte transfers are going at once (the blobs
// of a pull, the nodes of an image load): on a terminal as the running
// step's detail, redrawn as they move; elsewhere as a line per transfer
// every few seconds, which is what a CI log can take.
type Transfers struct {
	status *Status
	log    io.Writer
	// Approximate reports whether totals are estimates ("of ~1.2 GiB").
	Approximate bool
	every       time.Duration
	now         func() time.Time

	mu      sync.Mutex
	items   map[string]*transfer
	printed time.Time
	done    chan struct{}
	once    sync.Once
}

type transfer struct {
	done, total int64
	// base and since are where this run started it (a resumed download
	// starts at what it had), and finished when it reached its total: the
	// rate is over that span only.
	base            int64
	since, finished time.Time
}

// NewTransfers starts showing transfers under st's running step; log is
// where the lines go when st is not a terminal (nil: where st writes). A
// quiet st shows nothing.
func NewTransfers(st *Status, log io.Writer) *Transfers {
	if log == nil {
		log = st.out
	}
	t := &Transfers{status: st, log: st.Writer(log), every: 5 * time.Second, now: time.Now,
		items: map[string]*transfer{}, done: make(chan struct{})}
	if !st.quiet {
		go t.loop()
	}
	return t
}

// Update records that transfer name has moved done of total bytes (total <= 0
// when unknown).
func (t *Transfers) Update(name string, done, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	it := t.items[name]
	if it == nil {
		it = &transfer{base: done, since: t.now()}
		t.items[name] = it
	}
	it.done, it.total = done, total
	if total > 0 && done >= total && it.finished.IsZero() {
		it.finished = t.now()
	}
}

// Stop stops drawing; it is safe to call more than once.
func (t *Transfers) Stop() { t.once.Do(func() { close(t.done) }) }

func (t *Transfers) loop() {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
			t.mu.Lock()
			now := t.now()
			lines := t.lines(now)
			due := now.Sub(t.printed) >= t.every
			if due {
				t.printed = now
			}
			t.mu.Unlock()
			if len(lines) == 0 {
				continue
			}
			if t.status.Terminal() {
				t.status.Detail(strings.Join(lines, "  "))
			} else if due {
				for _, l := range lines {
					fmt.Fprintf(t.log, "    %s\n", l)
				}
			}
		}
	}
}

// lines returns each transfer's progress: name, bytes (of how many, when
// known), the rate since this run started it and, with a total, the time
// left at that rate.
func (t *Transfers) lines(now time.Time) []string {
	names := make([]string, 0, len(t.items))
	for n := range t.items {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		it := t.items[n]
		l := n + " " + Size(it.done)
		if it.total > 0 {
			of := " of "
			if t.Approximate {
				of = " of ~"
			}
			l += of + Size(it.total)
		}
		end := now
		if !it.finished.IsZero() {
			end = it.finished
		}
		secs := end.Sub(it.since).Seconds()
		if secs <= 0 {
			out = append(out, l)
			continue
		}
		rate := float64(it.done-it.base) / secs
		l += fmt.Sprintf(" (%s/s", Size(int64(rate)))
		switch {
		case !it.finished.IsZero():
			l += ", done"
		case it.total > 0 && rate > 0 && !t.Approximate:
			l += ", " + FormatDuration(time.Duration(float64(it.total-it.done)/rate*float64(time.Second))) + " left"
		}
		out = append(out, l+")")
	}
	return out
}

// Size returns a byte count as people read it: 512 KiB, 12 MiB, 1.4 GiB.
func Size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d KiB", n>>10)
	}
}
