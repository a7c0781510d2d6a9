package agent

import (
	"context"
	"sync"
	"time"

	"github.com/intendhq/intend/internal/ledger"
)

// waveWait bounds how long an intent waits for the rest of its wave: a
// slow Observe of one resource must not hold up the changes of the others
// for longer.
const waveWait = 10 * time.Millisecond

// intents records the intents of one chunk's attempts before their
// adapters act (adapters.BeforeChange), a wave at a time: an attempt
// killed after its change and before the chunk's outcomes are recorded
// leaves its intent, which the next attempt records as the change it
// finds made. One write per resource would cost a round trip to the
// ledger per change; one per chunk would deadlock on the dependencies
// inside the chunk (a resource waits for the change of one it requires).
//
// A wave is the intents of the resources that hold a concurrency slot:
// it is written once every other slot holder waits for it (nothing more
// can join it: the others act or observe), or after waveWait, and never
// while the previous wave is being written. Only slot holders count, so
// the resources that wait for a dependency or a slot never hold a wave
// back, and a wave always ends.
type intents struct {
	write func(context.Context, []ledger.Intent) error

	mu sync.Mutex
	// busy counts the slot holders that observe or act: not those
	// whose intent waits to be written.
	busy    int
	pending []ledger.Intent
	wave    *wave // the wave pending joins
	writing bool
	timer   *time.Timer
}

// wave is one write of intents; done closes when it is over, with err.
type wave struct {
	done chan struct{}
	err  error
}

func newIntents(write func(context.Context, []ledger.Intent) error) *intents {
	return &intents{write: write}
}

// started: a resource took a concurrency slot.
func (w *intents) started() {
	w.mu.Lock()
	w.busy++
	w.mu.Unlock()
}

// finished: a resource that took a slot is done.
func (w *intents) finished(ctx context.Context) {
	w.mu.Lock()
	w.busy--
	w.flushLocked(ctx, false)
	w.mu.Unlock()
}

// intend records in and returns once its wave is written (or ctx ends).
func (w *intents) intend(ctx context.Context, in ledger.Intent) error {
	w.mu.Lock()
	w.busy--
	if w.wave == nil {
		w.wave = &wave{done: make(chan struct{})}
	}
	wv := w.wave
	w.pending = append(w.pending, in)
	if len(w.pending) == 1 && w.timer == nil {
		var t *time.Timer
		t = time.AfterFunc(waveWait, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.timer != t {
				return // stopped by a flush, too late
			}
			w.timer = nil
			w.flushLocked(ctx, true)
		})
		w.timer = t
	}
	w.flushLocked(ctx, false)
	w.mu.Unlock()
	select {
	case <-wv.done:
		return wv.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flushLocked starts writing the pending intents when their wave is
// complete (or late) and no write is under way.
func (w *intents) flushLocked(ctx context.Context, late bool) {
	if w.writing || len(w.pending) == 0 || (w.busy > 0 && !late) {
		return
	}
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	batch, wv := w.pending, w.wave
	w.pending, w.wave, w.writing = nil, nil, true
	go func() {
		wv.err = w.write(ctx, batch)
		close(wv.done)
		w.mu.Lock()
		w.writing = false
		w.busy += len(batch) // they act now (or give up)
		// What gathered meanwhile: a wave complete, or late already.
		w.flushLocked(ctx, w.timer == nil)
		w.mu.Unlock()
	}()
}
