package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/workflows"
)

// TestExportBatcherGroups: exports that arrive while a batch runs go
// together in the next one, each waiter gets its batch's version; a batch
// the merge refuses is flushed again one item at a time (a version each),
// so only the bad item fails; a waiter that gives up does not cancel the others.
func TestExportBatcherGroups(t *testing.T) {
	t.Parallel()
	var b exportBatcher
	var mu sync.Mutex
	var batches [][]string
	release := make(chan struct{})
	first := make(chan struct{})
	flush := func(ctx context.Context, _ []intent.Resource, removed []string) (int64, *store.Request, error) {
		mu.Lock()
		batches = append(batches, slices.Clone(removed))
		n := len(batches)
		mu.Unlock()
		if n == 1 {
			close(first)
			<-release // the first batch runs until the others queued
		}
		if len(removed) > 1 && slices.Contains(removed, "bad") {
			return 0, nil, &intent.ValidationError{Problems: []intent.FieldProblem{{Path: "/resources/0", Detail: "refused"}}}
		}
		if slices.Equal(removed, []string{"bad"}) {
			return 0, nil, &intent.ValidationError{Problems: []intent.FieldProblem{{Path: "/resources/0", Detail: "refused"}}}
		}
		return int64(n), &store.Request{Reason: fmt.Sprint(n)}, nil
	}
	type result struct {
		name    string
		version int64
		err     error
	}
	results := make(chan result, 10)
	export := func(ctx context.Context, name string) {
		v, _, err := b.export(ctx, "env", nil, []string{name}, flush)
		results <- result{name, v, err}
	}
	go export(context.Background(), "a")
	<-first
	gaveUp, cancel := context.WithCancel(context.Background())
	for _, name := range []string{"b", "c", "bad"} {
		go export(context.Background(), name)
	}
	go export(gaveUp, "d")
	// Wait until the four are queued, then let the first batch end.
	wait.For(t, "four exports to be queued", 10*time.Second, func() error {
		b.mu.Lock()
		n := len(b.pending["env"])
		b.mu.Unlock()
		return wait.Unless(n == 4, "%d queued", n)
	})
	cancel()
	close(release)

	got := map[string]result{}
	for range 5 {
		r := <-results
		got[r.name] = r
	}
	if r := got["a"]; r.err != nil || r.version != 1 {
		t.Errorf("a: %+v, want version 1 alone", r)
	}
	if r := got["d"]; !errors.Is(r.err, context.Canceled) {
		t.Errorf("d gave up, got %+v, want its context's error", r)
	}
	var ve *intent.ValidationError
	if r := got["bad"]; !errors.As(r.err, &ve) {
		t.Errorf("bad: %+v, want the merge's refusal", r)
	}
	if got["b"].err != nil || got["c"].err != nil || got["b"].version == got["c"].version || min(got["b"].version, got["c"].version) < 3 {
		t.Errorf("b %+v and c %+v: want a version each after the refused batch", got["b"], got["c"])
	}
	mu.Lock()
	defer mu.Unlock()
	// a; then b, c, bad and d together (refused); then each alone.
	if len(batches) != 6 || len(batches[1]) != 4 {
		t.Errorf("batches %v, want [a] [b c bad d] and four single ones", batches)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) != 0 || len(b.running) != 0 {
		t.Errorf("the batcher kept %v pending and %v running", b.pending, b.running)
	}
}

// TestExportInstanceConcurrent: instances exported at the same time share
// versions (one export, one release and one wake per batch), and the
// released version holds every instance's set.
func TestExportInstanceConcurrent(t *testing.T) {
	t.Parallel()
	s := newLSMSetup(t)
	ctx := context.Background()
	const n = 12
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", 100+i)
		s.instance(t, ids[i], "creating", lsm.Sets{Active: map[string]any{"name": fmt.Sprintf("vm%d", i)}})
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, id := range ids {
		wg.Go(func() {
			res, err := s.l.ExportInstance(ctx, workflows.ExportInstanceInput{EnvironmentID: s.env.ID, Entity: "vm",
				InstanceID: id, InstanceVersion: 1, Mode: workflows.ExportResources,
				Attributes: map[string]any{"name": fmt.Sprintf("vm%d", i)}})
			switch {
			case err != nil:
				errs <- err
			case res.Failed || !res.Changed || res.Version == 0 || res.Resources != 2:
				errs <- fmt.Errorf("%s: %+v", id, res)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	env, err := s.st.GetEnvironment(ctx, s.env.ID)
	if err != nil || env.ReleasedVersion == nil {
		t.Fatalf("environment %+v, %v", env, err)
	}
	last := *env.ReleasedVersion
	if last > n || s.woke != int(last) {
		t.Errorf("%d instances made %d versions with %d wakes, want at most one each per batch", n, last, s.woke)
	}
	for _, id := range ids {
		if rs := s.setResources(t, last, "vm/"+id); len(rs) != 2 {
			t.Errorf("released version %d holds %d resources of %s, want 2", last, len(rs), id)
		}
	}
	t.Logf("%d concurrent exports: %d versions", n, last)
}
