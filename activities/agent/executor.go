// Package agent holds the activities of agent task queues: ExecuteBatch,
// run by executors (the one embedded in intend server, and intend
// executor on other hosts). It reads batches and records attempts through
// a ledger.Ledger and imports nothing that reaches PostgreSQL, so an
// executor holds no database credentials.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/runstages"
	"github.com/intendhq/intend/internal/telemetry"
	"github.com/intendhq/intend/workflows"
)

// chunkSize is how many resources an executor runs between two writes of
// outcomes (and heartbeats). A retried activity resumes after the last
// chunk it recorded.
const chunkSize = 100

// While the ledger (PostgreSQL, or the intend server of an executor on
// another host) is unreachable, an executor keeps its batch and tries
// again, waiting dbRetryFirst doubling to dbRetryMax, until the activity's
// context ends (StartToCloseTimeout). It heartbeats meanwhile, so an outage
// of minutes delays the batch instead of using up its Temporal retries and
// failing it. dbRetryMax stays below the 20 s heartbeat timeout.
const (
	dbRetryFirst = time.Second
	dbRetryMax   = 10 * time.Second
)

// Executor holds the activities of agent task queues.
type Executor struct {
	// Ledger is where batches are loaded and attempts recorded: the
	// store for the embedded executor, the intend server's executor API
	// for the others.
	Ledger   ledger.Ledger
	Adapters *adapters.Registry
	// Concurrency bounds the resources of one agent of a batch handled at
	// once (a batch of several agents runs each within its own bound).
	Concurrency int
	Log         *slog.Logger
	Metrics     *telemetry.Telemetry // may be nil
	// Tracer traces every adapter call (nil: no spans).
	Tracer trace.Tracer
	// Cache is the adapters' cache, shared by every attempt of this
	// process; nil gives each attempt the package default (time expiry
	// only). Run SweepCache alongside to expire version-bound values.
	Cache *adapters.Cache
	// SweepWake, if set, is the wake of the SweepCache beside Cache: a
	// batch of a version the cache holds no values of, while it holds
	// values of other versions of the batch's environment, wakes it (see
	// wakeSweep).
	SweepWake chan<- struct{}
	// Secrets resolves secret references; nil means variables with
	// adapters.DefaultSecretEnvPrefix only, and no file.
	Secrets *adapters.Secrets
	// Name is the executor's registered name, recorded with every action.
	Name string
	// Plugins runs the adapter plugins a batch's version requires
	// (internal/pluginhost.Host); nil: this executor runs none, and a
	// resource of a type a plugin serves fails, saying so.
	Plugins PluginHost
}

// PluginHost gives the handler of a resource type served by an adapter
// plugin of a version (internal/pluginhost.Host).
type PluginHost interface {
	Handler(ctx context.Context, env string, p ledger.Plugin, resourceType string) (adapters.Handler, error)
}

// wakeSweep wakes the cache's sweep when a batch of version starts and
// the cache holds values bound to other versions of env but none of this
// one: the deploys of those are likely over, and their values (a
// device's sessions: netconf:: allows two to a device) would otherwise
// stay until the next periodic sweep, holding up this version's attempts.
func (e *Executor) wakeSweep(env string, version int64) {
	if e.Cache == nil || e.SweepWake == nil {
		return
	}
	other := false
	for _, s := range e.Cache.Scopes() {
		if s.Environment != env {
			continue
		}
		if s.Version == version {
			return
		}
		other = true
	}
	if other {
		select {
		case e.SweepWake <- struct{}{}:
		default: // a sweep asked for already serves this batch too
		}
	}
}

// Register registers the activities under their explicit names.
func (e *Executor) Register(w workflows.ActivityRegistry) {
	workflows.ExecuteBatchActivity.Register(w, e.ExecuteBatch)
}

// batchProgress is the heartbeat detail: resources done and recorded
// (what an operator sees of a running batch in the Temporal UI).
type batchProgress struct {
	Done   int
	Result workflows.BatchResult
	// NotDeployed maps the recorded resources of the batch that failed or
	// were skipped to their result: their dependents are skipped.
	NotDeployed map[string]string
}

// tally counts a recorded outcome of resource id; errMsg is its error
// ("" for an outcome an earlier attempt recorded).
func (p *batchProgress) tally(id string, o ledger.Outcome, errMsg string, retryAfter time.Duration, dryrun bool) {
	p.Done++
	switch o.Result {
	case ledger.ResultDeployed, ledger.ResultUnmanaged:
		// Unmanaged counts as deployed: left alone, as the model asks.
		p.Result.Deployed++
	case ledger.ResultSkippedForDependency, ledger.ResultSkipped:
		p.Result.Skipped++
	case ledger.ResultUnavailable:
		// The adapter could not reach the target.
		p.Result.Unavailable++
		p.Result.Failures = workflows.AppendFailure(p.Result.Failures, workflows.MaxBatchFailures,
			workflows.ResourceFailure{ID: id, Result: string(o.Result), Error: errMsg})
	default:
		p.Result.Failed++
		p.Result.Failures = workflows.AppendFailure(p.Result.Failures, workflows.MaxBatchFailures,
			workflows.ResourceFailure{ID: id, Result: string(o.Result), Error: errMsg})
	}
	if !o.Result.AsIntended() {
		p.NotDeployed[id] = string(o.Result)
	}
	if o.Changed {
		p.Result.Changed++
	}
	if (o.Result == ledger.ResultFailed || o.Result == ledger.ResultUnavailable || o.Result == ledger.ResultSkipped) && !dryrun &&
		(o.ErrorClass == string(adapters.ClassTransient) || o.ErrorClass == string(adapters.ClassThrottled) ||
			o.ErrorClass == string(adapters.ClassUnavailable) || o.ErrorClass == string(adapters.ClassSkipped)) {
		p.Result.Retry++
		p.Result.RetryAfterSeconds = max(p.Result.RetryAfterSeconds, int((retryAfter+time.Second-1)/time.Second))
	}
}

// ExecuteBatch loads a batch from the ledger and runs its resources through
// their adapters in dependency order with bounded concurrency: a resource
// starts once the resources of the batch it requires are done, and is
// skipped (skipped_for_dependency) when one of them, or a required resource
// outside the batch, is not deployed. It records one action per resource
// and the new deploy state chunk by chunk, heartbeating progress.
//
// A retried batch (another attempt of the activity, after an executor
// died, a Temporal outage, a timeout) asks the ledger what the batch
// recorded already, and runs the others only: what it recorded is the
// truth, whatever Temporal last heard of it in a heartbeat.
func (e *Executor) ExecuteBatch(ctx context.Context, in workflows.BatchInput) (workflows.BatchResult, error) {
	started := time.Now()
	info := activity.GetInfo(ctx)
	pr := &progress{p: batchProgress{NotDeployed: map[string]string{}}}
	if e.Metrics != nil {
		// A batch of several agents is in flight for each of them.
		for _, a := range in.AgentsOf() {
			inFlight := e.Metrics.BatchesInFlight.WithLabelValues(in.EnvironmentName, a)
			inFlight.Inc()
			defer inFlight.Dec()
		}
	}
	var resume string
	if info.Attempt > 1 || activity.HasHeartbeatDetails(ctx) {
		resume = info.WorkflowExecution.ID
	}
	var b ledger.Batch
	err := e.untilReachable(ctx, pr, func() (err error) {
		b, err = e.Ledger.LoadBatch(ctx, in.EnvironmentID, in.Run, in.Seq, resume)
		return err
	})
	if err != nil {
		return workflows.BatchResult{}, classify(err)
	}
	e.wakeSweep(b.EnvironmentID, b.Version)
	todo := b.Resources
	if len(b.Recorded) > 0 {
		todo = make([]ledger.Resource, 0, len(b.Resources)-len(b.Recorded))
		for _, r := range b.Resources {
			if o, ok := b.Recorded[r.ID]; ok {
				pr.p.tally(r.ID, o, o.Error, 0, b.Action == ledger.ActionDryrun)
			} else {
				todo = append(todo, r)
			}
		}
		if e.Log != nil {
			e.Log.InfoContext(ctx, "resuming a batch", "run", in.Run, "batch", in.Seq, "attempt", info.Attempt,
				"recorded", len(b.Recorded), "to_run", len(todo))
		}
	}
	ran, err := e.runBatch(ctx, b, in, todo, pr, info)
	if err != nil {
		return pr.result(), err
	}
	took := time.Since(started)
	if e.Metrics != nil {
		for _, a := range in.AgentsOf() {
			e.Metrics.BatchDuration.WithLabelValues(in.EnvironmentName, a).Observe(took.Seconds())
		}
		e.Metrics.BatchSize.WithLabelValues(in.EnvironmentName).Observe(float64(len(b.Resources)))
	}
	// Where the batch spent its time, for the run's record: the wait for
	// this executor's poller (Temporal's times of this attempt), its run
	// (loaded, to its last resource done), and the wait for its last
	// outcomes to be recorded (the recording of the others overlaps the
	// run).
	res := pr.result()
	execute := took
	if !ran.IsZero() {
		execute = ran.Sub(started)
	}
	res.Stages = runstages.Batch{
		PollWait: max(info.StartedTime.Sub(info.ScheduledTime), 0).Seconds(),
		Execute:  execute.Seconds(),
		Record:   max(took-execute, 0).Seconds(),
	}
	return res, nil
}

// progress is a batch's batchProgress, shared by the goroutines that run
// its resources and the one that records them.
type progress struct {
	mu sync.Mutex
	p  batchProgress
	// beat is when a heartbeat was last handed to the SDK.
	beat time.Time
	// send is activity.RecordHeartbeat (a test counts the calls).
	send func(ctx context.Context, details ...any)
}

// heartbeatLocked is heartbeat with pr.mu held.
func (pr *progress) heartbeatLocked(ctx context.Context) {
	pr.beat = time.Now()
	if pr.send != nil {
		pr.send(ctx, pr.p)
		return
	}
	activity.RecordHeartbeat(ctx, pr.p)
}

// heartbeat sends the recorded progress to Temporal (the SDK throttles).
func (pr *progress) heartbeat(ctx context.Context) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.heartbeatLocked(ctx)
}

// keepAliveEvery is how often a batch's resources heartbeat to keep its
// activity alive through slow adapters: far below any heartbeat timeout
// (20 s and more), and far above the time of one resource.
const keepAliveEvery = time.Second

// keepAlive heartbeats unless a heartbeat went out within keepAliveEvery.
// Its details are the progress recorded, and every recording heartbeats
// itself, so a skipped call would have sent what the SDK holds already:
// each call costs the SDK an encoding of the details, throttled or not,
// which per resource was 3 % of an executor's CPU (issue 28).
func (pr *progress) keepAlive(ctx context.Context) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if time.Since(pr.beat) < keepAliveEvery {
		return
	}
	pr.heartbeatLocked(ctx)
}

// result is the batch's result so far.
func (pr *progress) result() workflows.BatchResult {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.p.Result
}

// flushAfter bounds how long a finished resource's outcome waits for
// others to fill its chunk before it is recorded.
const flushAfter = time.Second

// record records the outcomes of a chunk, waiting for the ledger when it
// is unreachable. A write cut off by a lost connection may have happened:
// the writes after the first say so, and the ledger does not record the
// chunk twice.
func (e *Executor) record(ctx context.Context, in workflows.BatchInput, pr *progress, recs []ledger.ActionRecord) error {
	again := false
	return e.untilReachable(ctx, pr, func() error {
		err := e.Ledger.RecordActions(ctx, in.EnvironmentID, in.Run, in.Seq, recs, again)
		again = true
		return err
	})
}

// untilReachable calls fn until it returns nil or an error other than
// the ledger being unavailable, or ctx ends; it heartbeats the recorded
// progress while it waits.
func (e *Executor) untilReachable(ctx context.Context, pr *progress, fn func() error) error {
	wait := dbRetryFirst
	for {
		err := fn()
		if !errors.Is(err, ledger.ErrUnavailable) {
			return err
		}
		if e.Log != nil {
			e.Log.WarnContext(ctx, "the ledger is unavailable; the batch waits", "error", err.Error(), "retry_in", wait.String())
		}
		pr.heartbeat(ctx)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, dbRetryMax)
	}
}

// runBatch runs the resources todo of batch b and records their outcomes,
// and returns when all are recorded, with the time the last of them
// finished (zero for none). The resources run at most Concurrency at once,
// each once those of the batch it requires are done (waiting takes no
// slot), with no pause between chunks: one goroutine records their
// outcomes in the order they finish, in chunks of at most chunkSize (or
// what finished within flushAfter), while the others run. A resource
// finishes after those it requires, so an outcome is never recorded before
// those of its dependencies. What is not recorded when the attempt ends
// (killed, cancelled) is run again by the next one.
func (e *Executor) runBatch(ctx context.Context, b ledger.Batch, in workflows.BatchInput, todo []ledger.Resource,
	pr *progress, info activity.Info) (time.Time, error) {
	if len(todo) == 0 {
		return time.Time{}, nil
	}
	dryrun := b.Action == ledger.ActionDryrun
	pos := make(map[string]int, len(todo))
	for i, r := range todo {
		pos[r.ID] = i
	}
	// The batch's resources that earlier attempts recorded not deployed
	// (the others are in todo, read through recs).
	pr.mu.Lock()
	earlier := maps.Clone(pr.p.NotDeployed)
	pr.mu.Unlock()
	recs := make([]ledger.ActionRecord, len(todo))
	done := make([]chan struct{}, len(todo))
	for i := range done {
		done[i] = make(chan struct{})
	}
	finished := make(chan int, len(todo))
	recorded := make(chan error, 1)
	go func() { recorded <- e.recordAsDone(ctx, in, b, recs, finished, pr) }()

	slots := e.slots(b)
	var intended *intents
	if !dryrun {
		intended = newIntents(func(ctx context.Context, ins []ledger.Intent) error {
			return e.untilReachable(ctx, pr, func() error {
				return e.Ledger.RecordIntents(ctx, b.EnvironmentID, in.Run, in.Seq, ins)
			})
		})
	}
	var wg sync.WaitGroup
	var lastMu sync.Mutex
	var last time.Time
	for i := range todo {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() {
				close(done[i])
				lastMu.Lock()
				last = time.Now()
				lastMu.Unlock()
				finished <- i
			}()
			r := todo[i]
			for _, q := range r.Requires {
				if j, ok := pos[q]; ok && j < i {
					<-done[j]
				}
			}
			// A dry-run diffs every resource: nothing is deployed, so
			// nothing can be missing.
			if dep, result := blockedBy(r, i, pos, recs, b.Blocked, earlier); dep != "" && !dryrun {
				recs[i] = skipped(b, r, info, dep, result)
				recs[i].Executor = e.Name
				return
			}
			if r.ReceiveEvents && !r.Event {
				// A dependency in this batch that just changed is an event
				// too (its state is recorded with its chunk).
				for _, q := range r.Requires {
					if j, ok := pos[q]; ok && j < i && recs[j].Changed {
						r.Event = true
					}
				}
			}
			sem := slots(r.ID)
			sem <- struct{}{}
			var before adapters.BeforeChange
			if intended != nil {
				intended.started()
				before = func(ctx context.Context, op adapters.Operation) error {
					return intended.intend(ctx, ledger.Intent{ResourceID: r.ID, Operation: string(op),
						WorkflowID: info.WorkflowExecution.ID, Attempt: int(info.Attempt)})
				}
			}
			recs[i] = e.runOne(ctx, b, r, info, before)
			recs[i].Executor = e.Name
			if intended != nil {
				intended.finished(ctx)
			}
			<-sem
			// Keeps the activity alive through slow adapters; the details
			// stay those of the last recorded chunk.
			pr.keepAlive(ctx)
		}(i)
	}
	wg.Wait()
	close(finished)
	err := <-recorded
	if cerr := ctx.Err(); cerr != nil {
		return last, cerr
	}
	if err != nil {
		return last, fmt.Errorf("record outcomes: %w", err)
	}
	return last, nil
}

// slots returns the semaphore of a resource of batch b, by its id: the
// resources of one agent run at most Concurrency at once, in a batch of
// several agents as in a batch of one (a batch of n agents runs up to n
// × Concurrency).
func (e *Executor) slots(b ledger.Batch) func(id string) chan struct{} {
	size := max(e.Concurrency, 1)
	if len(b.Agents) == 0 {
		sem := make(chan struct{}, size)
		return func(string) chan struct{} { return sem }
	}
	sems := make(map[string]chan struct{}, len(b.Agents))
	for _, a := range b.Agents {
		sems[a] = make(chan struct{}, size)
	}
	// An id whose agent the batch does not name (it cannot be: the
	// store cuts batches by agent) shares one semaphore more.
	other := make(chan struct{}, size)
	return func(id string) chan struct{} {
		if sem, ok := sems[agentOf(id)]; ok {
			return sem
		}
		return other
	}
}

// agentOf returns the agent of resource id <Type>[<Agent>,…] without
// parsing the rest ("" when it has none).
func agentOf(id string) string {
	i := strings.IndexByte(id, '[')
	if i < 0 {
		return ""
	}
	rest := id[i+1:]
	j := strings.IndexByte(rest, ',')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// recordAsDone records the outcomes of a batch's resources as their
// indices arrive on finished, in chunks, until finished closes. After an
// error it records nothing more (what is left is run again by the next
// attempt) and returns the error.
func (e *Executor) recordAsDone(ctx context.Context, in workflows.BatchInput, b ledger.Batch, recs []ledger.ActionRecord,
	finished <-chan int, pr *progress) error {
	dryrun := b.Action == ledger.ActionDryrun
	var pending []int
	var due <-chan time.Time
	var failed error
	flush := func() {
		n := min(chunkSize, len(pending))
		chunk := make([]ledger.ActionRecord, n)
		for k, i := range pending[:n] {
			chunk[k] = recs[i]
		}
		pending = pending[n:]
		due = nil
		if len(pending) > 0 {
			due = time.After(flushAfter)
		}
		if failed != nil {
			return
		}
		if err := e.record(ctx, in, pr, chunk); err != nil {
			failed = err
			return
		}
		pr.mu.Lock()
		defer pr.mu.Unlock()
		for _, r := range chunk {
			pr.p.tally(r.ResourceID, ledger.Outcome{Result: r.Result, ErrorClass: r.ErrorClass, Changed: r.Changed},
				r.Error, r.RetryAfter, dryrun)
			if e.Metrics != nil {
				e.Metrics.DeployedResources.WithLabelValues(in.EnvironmentName, string(r.Action), string(r.Result)).Inc()
			}
		}
		pr.heartbeatLocked(ctx)
	}
	for open := true; open || len(pending) > 0; {
		if open && len(pending) < chunkSize {
			select {
			case i, ok := <-finished:
				if !ok {
					open = false
					continue
				}
				pending = append(pending, i)
				if len(pending) == 1 {
					due = time.After(flushAfter)
				}
				continue
			case <-due:
			}
		}
		flush()
	}
	return failed
}

// blockedBy returns the first required resource of r that is not deployed,
// with its result, or "" when r may run.
func blockedBy(r ledger.Resource, i int, pos map[string]int, recs []ledger.ActionRecord,
	outside, earlier map[string]string) (string, string) {
	for _, q := range r.Requires {
		if j, ok := pos[q]; ok && j < i {
			if !recs[j].Result.AsIntended() {
				return q, string(recs[j].Result)
			}
			continue
		}
		if res, ok := earlier[q]; ok {
			return q, res
		}
		if res, ok := outside[q]; ok {
			return q, res
		}
	}
	return "", ""
}

// skipped is the record of a resource not run because a dependency is not
// deployed.
func skipped(b ledger.Batch, r ledger.Resource, info activity.Info, dep, result string) ledger.ActionRecord {
	rec := newRecord(b, r, info)
	rec.FinishedAt, rec.Result = rec.StartedAt, ledger.ResultSkippedForDependency
	rec.Error = fmt.Sprintf("requires %s, which is not deployed (%s)", dep, result)
	hc := adapters.NewContext()
	hc.Info("skipped: a required resource is not deployed", "requires", dep, "its_result", result)
	rec.Logs, _ = json.Marshal(hc.Logs())
	return rec
}

// newRecord starts the action record of an attempt on r, now.
func newRecord(b ledger.Batch, r ledger.Resource, info activity.Info) ledger.ActionRecord {
	return ledger.ActionRecord{
		ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: b.ActionOf(r), Reason: b.Reason,
		StartedAt: time.Now().UTC(), WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		Attempt: int(info.Attempt),
	}
}

// runOne performs one attempt on one resource and returns its action
// record; before (nil: none) is called before the adapter changes the
// target.
func (e *Executor) runOne(ctx context.Context, b ledger.Batch, r ledger.Resource, info activity.Info,
	before adapters.BeforeChange) ledger.ActionRecord {
	rec := newRecord(b, r, info)
	if r.Unmanaged {
		return unmanaged(rec)
	}
	hc := adapters.NewContext(adapters.WithCache(e.Cache), adapters.WithSecrets(e.Secrets), adapters.WithCallTimer(e.callTimer()),
		adapters.WithTracer(e.Tracer), adapters.WithScope(adapters.Scope{Environment: b.EnvironmentID, Version: b.Version}),
		adapters.WithEvent(r.Event && b.Action != ledger.ActionDryrun), adapters.WithBeforeChange(before))
	defer hc.Close()
	h, outcome, err := e.safeApply(ctx, hc, b, r)
	rec.FinishedAt = time.Now().UTC()
	if in, ok := b.Intended[r.ID]; ok && err == nil && outcome.Action == adapters.OpNone && b.Action != ledger.ActionDryrun {
		// An earlier attempt recorded its intent to make this change and
		// died before it recorded its outcome: the change found in place
		// is most likely its own.
		outcome.Action, outcome.Changed = adapters.Operation(in.Operation), true
		hc.Info("found in place: the attempt that died before recording its outcome made this change",
			"operation", in.Operation, "attempt", in.Attempt)
	}
	rec.Changed = outcome.Changed
	rec.Operation = string(outcome.Action)
	rec.Result = ledger.ResultDeployed
	if r.ReportOnly && b.Action != ledger.ActionDryrun && err == nil && outcome.Changed {
		// Report-only: the difference is recorded, nothing was changed,
		// and the resource is not compliant.
		rec.Result, rec.Changed = ledger.ResultSkipped, false
		hc.Info("report-only: the target differs from the intent; not changed", "operation", outcome.Action)
	}
	if err != nil {
		rec.Result = ledger.ResultFailed
		rec.Error = err.Error()
		rec.ErrorClass = string(adapters.ClassOf(err))
		switch adapters.Class(rec.ErrorClass) {
		case adapters.ClassUnavailable:
			rec.Result = ledger.ResultUnavailable
		case adapters.ClassSkipped:
			// "Skipped, retry later": not failed; the run retries it.
			rec.Result = ledger.ResultSkipped
		}
		rec.RetryAfter = adapters.RetryAfterOf(err)
		if rec.Result == ledger.ResultSkipped {
			hc.Info("skipped by the adapter; retried later", "error", err.Error(), "class", rec.ErrorClass)
		} else {
			hc.Error("attempt failed", "error", err.Error(), "class", rec.ErrorClass)
		}
		var pe *adapters.PanicError
		if errors.As(err, &pe) && e.Log != nil {
			// The error text is masked; the stack holds no values.
			e.Log.ErrorContext(ctx, "adapter panicked", "resource_id", r.ID, "error", err.Error(), "stack", pe.Stack)
		}
	}
	if len(outcome.Diff) > 0 {
		// Bounded: a large value by its size, hash and a diff.
		rec.Changes, _ = json.Marshal(recordChanges(outcome.Diff, e.sensitivityOf(r.ID, h)))
	}
	rec.Facts = factsOf(hc)
	if logs := hc.Logs(); len(logs) > 0 {
		rec.Logs, _ = json.Marshal(logs)
		e.logAdapterLines(ctx, r.ID, logs)
	}
	return rec
}

// unmanaged finishes rec, the record of an attempt on a resource the model
// left unmanaged: the adapter is never called (no observe, no change, no
// facts, no delete even when purged) and the result is unmanaged, which
// lets what requires it deploy, in deploys and dry-runs alike.
func unmanaged(rec ledger.ActionRecord) ledger.ActionRecord {
	rec.FinishedAt, rec.Result = rec.StartedAt, ledger.ResultUnmanaged
	hc := adapters.NewContext()
	hc.Info("unmanaged: not observed, not changed")
	rec.Logs, _ = json.Marshal(hc.Logs())
	return rec
}

// callTimer times adapter calls into the metrics, if there are any.
func (e *Executor) callTimer() adapters.CallTimer {
	if e.Metrics == nil {
		return nil
	}
	return e.Metrics.ObserveAdapterCall
}

// logAdapterLines copies an attempt's adapter log lines (already masked)
// into the executor's own log, at their level, with the resource id.
func (e *Executor) logAdapterLines(ctx context.Context, rid string, lines []adapters.LogLine) {
	if e.Log == nil {
		return
	}
	for _, l := range lines {
		var level slog.Level
		if level.UnmarshalText([]byte(l.Level)) != nil || !e.Log.Enabled(ctx, level) {
			continue
		}
		args := make([]any, 0, 2+2*len(l.Attrs))
		args = append(args, "resource_id", rid)
		keys := make([]string, 0, len(l.Attrs))
		for k := range l.Attrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			args = append(args, k, l.Attrs[k])
		}
		e.Log.Log(ctx, level, l.Message, args...)
	}
}

// factsOf encodes the facts the adapter set as JSON; a fact that cannot be
// encoded is dropped with a warning in the action log.
func factsOf(hc *adapters.Context) map[string]json.RawMessage {
	facts := hc.Facts()
	if len(facts) == 0 {
		return nil
	}
	names := make([]string, 0, len(facts))
	for name := range facts {
		names = append(names, name)
	}
	sort.Strings(names) // warnings in a fixed order
	out := make(map[string]json.RawMessage, len(facts))
	for _, name := range names {
		b, err := json.Marshal(facts[name])
		if err != nil {
			hc.Warn("fact dropped: its value is not JSON", "fact", name, "error", err.Error())
			continue
		}
		out[name] = b
	}
	return out
}

// safeApply runs apply and turns a panic outside the adapter's own calls
// (adapters.Run recovers those) into a permanent failure of that resource,
// so nothing one resource does can take the executor down.
func (e *Executor) safeApply(ctx context.Context, hc *adapters.Context, b ledger.Batch, r ledger.Resource) (h adapters.Handler, out adapters.Outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			if e.Log != nil {
				e.Log.ErrorContext(ctx, "adapter panicked", "resource_id", r.ID, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
			err = adapters.Permanent(fmt.Errorf("adapter panicked: %v", p))
		}
	}()
	return e.apply(ctx, hc, b, r)
}

// apply runs one attempt on r with its handler, which it returns (nil
// when there is none).
func (e *Executor) apply(ctx context.Context, hc *adapters.Context, b ledger.Batch, r ledger.Resource) (adapters.Handler, adapters.Outcome, error) {
	id, err := resource.Parse(r.ID)
	if err != nil {
		return nil, adapters.Outcome{}, adapters.Permanent(err)
	}
	h, err := e.handler(ctx, b, id)
	if err != nil {
		return nil, adapters.Outcome{}, err
	}
	attrs, err := decodeAttributes(r.Attributes)
	if err != nil {
		return h, adapters.Outcome{}, adapters.Permanent(fmt.Errorf("attributes: %w", err))
	}
	out, err := adapters.Run(ctx, h, hc, adapters.Resource{ID: id, Attributes: attrs, Purged: r.Purged},
		b.Action == ledger.ActionDryrun || r.ReportOnly)
	return h, out, err
}

// handler returns the handler of id's type: the plugin of the batch's
// version that serves it, or else the executor's built-in adapter. A type
// a plugin serves never falls back to a built-in one.
func (e *Executor) handler(ctx context.Context, b ledger.Batch, id resource.ID) (adapters.Handler, error) {
	for _, p := range b.Plugins {
		if !slices.Contains(p.Types, id.Type) {
			continue
		}
		if e.Plugins == nil {
			return nil, adapters.Permanent(fmt.Errorf("%s is served by adapter plugin %s, which version %d requires, and executor %s runs no plugins",
				id.Type, p.Name, b.Version, e.Name))
		}
		h, err := e.Plugins.Handler(ctx, b.EnvironmentID, p, id.Type)
		if err != nil {
			// Keeps the class: a digest mismatch is permanent, a plugin
			// that could not start this time transient.
			return nil, fmt.Errorf("adapter plugin %s: %w", p.Name, err)
		}
		return h, nil
	}
	h, ok := e.Adapters.Lookup(id.Type)
	if !ok {
		return nil, adapters.Permanent(fmt.Errorf("no adapter for type %s on this executor (it has %v)",
			id.Type, e.Adapters.Types()))
	}
	return h, nil
}

// ErrTypeNotFound is the Temporal error type of an activity error about a
// batch that is gone (a deleted environment or run): retrying cannot help.
const ErrTypeNotFound = "NotFound"

// classify marks ledger errors that retrying cannot fix as non-retryable.
func classify(err error) error {
	if errors.Is(err, ledger.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeNotFound, err)
	}
	return err
}
