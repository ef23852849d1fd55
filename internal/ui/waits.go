package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Wait is one probe of the host that may take long (a driver's check, a
// PowerShell query): what it is, and what it is waiting for now. Probes
// are watched (Watch) so that a command that waits shows on what.
type Wait struct {
	name string
	mu   sync.Mutex
	what string
	done bool
}

// NewWait returns a wait for the probe called name ("the hyperv driver's
// check").
func NewWait(name string) *Wait { return &Wait{name: name} }

// Set records what the probe waits for now ("powershell.exe to answer").
func (w *Wait) Set(what string) {
	w.mu.Lock()
	w.what = what
	w.mu.Unlock()
}

// What returns what the probe waits for now, "" when it never said.
func (w *Wait) What() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.what
}

// Finish marks the probe done.
func (w *Wait) Finish() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// String returns the probe and what it waits for.
func (w *Wait) String() string {
	if what := w.What(); what != "" {
		return w.name + " (" + what + ")"
	}
	return w.name
}

func (w *Wait) pending() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.done
}

type (
	waitKey  struct{}
	notesKey struct{}
)

// WithWait returns ctx carrying w, for the probe's own code to Set
// through Waiting.
func WithWait(ctx context.Context, w *Wait) context.Context {
	return context.WithValue(ctx, waitKey{}, w)
}

// Waiting records on the context's Wait, if any, what its probe waits for
// now; probes call it before each step that may block.
func Waiting(ctx context.Context, what string) {
	if w, ok := ctx.Value(waitKey{}).(*Wait); ok {
		w.Set(what)
	}
}

// WithNotes returns ctx with the function that hears of slow probes
// (Watch); nil turns the notes off.
func WithNotes(ctx context.Context, note func(string)) context.Context {
	return context.WithValue(ctx, notesKey{}, note)
}

// Watch tells the context's note function (WithNotes) about the probes
// in ws still running: a second after it is called, then every five
// seconds, each line saying how long, on what, and limit, the most any
// of them waits. stop ends it.
func Watch(ctx context.Context, limit time.Duration, ws ...*Wait) (stop func()) {
	note, _ := ctx.Value(notesKey{}).(func(string))
	if note == nil {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		t := time.NewTimer(time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			var names []string
			for _, w := range ws {
				if w.pending() {
					names = append(names, w.String())
				}
			}
			if len(names) == 0 {
				return
			}
			note(fmt.Sprintf("waiting %s for %s (at most %s)", time.Since(start).Round(time.Second), strings.Join(names, ", "), limit))
			t.Reset(5 * time.Second)
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}

// Within runs probe under w (WithWait) for at most limit and marks w
// finished. late is true when a deadline passed before probe answered,
// limit or one of ctx's own (not when ctx was cancelled); a probe that
// ignores its context is then left to finish alone.
func Within[T any](ctx context.Context, w *Wait, limit time.Duration, probe func(context.Context) (T, error)) (v T, late bool, err error) {
	defer w.Finish()
	tctx, cancel := context.WithTimeout(WithWait(ctx, w), limit)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := probe(tctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
			return v, true, r.err
		}
		return r.v, false, r.err
	case <-tctx.Done():
		return v, errors.Is(tctx.Err(), context.DeadlineExceeded), tctx.Err()
	}
}
