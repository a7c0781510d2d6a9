package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
)

// exportBatchTimeout bounds one batch's export, release and wake.
const exportBatchTimeout = time.Minute

// exportBatcher turns the instance exports that arrive together into one
// desired-state version: a group commit. Every export of an environment
// takes its row lock (store.ExportPartial, ReleaseVersion), so one version
// and one release per instance would serialize 1,000 instances created at
// once behind each other (P7: 40 ms of export and 15 ms of release each,
// plus a scheduler wake). The first export to arrive runs a batch; those
// arriving meanwhile wait and go together in the next one: one partial
// export of all their sets, one release, one wake.
//
// A batch the merge refuses is exported again one set at a time, so that
// a set's problem is its own instance's and the others go through.
// Each waiter gets the version that holds its set (the batch's), and the
// release's deploy request when the batch released one.
type exportBatcher struct {
	mu      sync.Mutex
	pending map[string][]*exportItem // by environment id
	running map[string]bool
}

// exportItem is one instance's partial export waiting in a batch.
type exportItem struct {
	resources []intent.Resource
	removed   []string
	done      chan exportOutcome // buffered: the batch never blocks on it
}

// exportOutcome is what a batch did for an item.
type exportOutcome struct {
	version int64
	request *store.Request // the release's deploy request, if any
	err     error
}

// flushFunc exports a batch's sets as one version and releases it.
type flushFunc func(ctx context.Context, resources []intent.Resource, removed []string) (version int64, request *store.Request, err error)

// export adds an item to the environment's next batch and waits for it.
// The batch runs on its own context (bounded by exportBatchTimeout): a
// waiter that gives up (ctx done) does not cancel the others' export; its
// own set may be exported anyway, which its retry finds (ExportInstance is
// idempotent by content).
func (b *exportBatcher) export(ctx context.Context, envID string, resources []intent.Resource, removed []string, flush flushFunc) (int64, *store.Request, error) {
	it := &exportItem{resources: resources, removed: removed, done: make(chan exportOutcome, 1)}
	b.mu.Lock()
	if b.pending == nil {
		b.pending, b.running = map[string][]*exportItem{}, map[string]bool{}
	}
	b.pending[envID] = append(b.pending[envID], it)
	lead := !b.running[envID]
	b.running[envID] = true
	b.mu.Unlock()
	if lead {
		go b.run(context.WithoutCancel(ctx), envID, flush)
	}
	select {
	case out := <-it.done:
		return out.version, out.request, out.err
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
}

// run exports the environment's pending items in batches until none are
// left.
func (b *exportBatcher) run(ctx context.Context, envID string, flush flushFunc) {
	for {
		b.mu.Lock()
		items := b.pending[envID]
		delete(b.pending, envID)
		if len(items) == 0 {
			delete(b.running, envID)
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.flush(ctx, items, flush)
	}
}

// flush exports items as one version, or, when the merge refuses them
// together, one at a time.
func (b *exportBatcher) flush(ctx context.Context, items []*exportItem, flush flushFunc) {
	ctx, cancel := context.WithTimeout(ctx, exportBatchTimeout)
	defer cancel()
	var resources []intent.Resource
	var removed []string
	for _, it := range items {
		resources = append(resources, it.resources...)
		removed = append(removed, it.removed...)
	}
	version, request, err := flush(ctx, resources, removed)
	var ve *intent.ValidationError
	if len(items) > 1 && errors.As(err, &ve) {
		for _, it := range items {
			b.flush(ctx, []*exportItem{it}, flush)
		}
		return
	}
	for _, it := range items {
		it.done <- exportOutcome{version: version, request: request, err: err}
	}
}
