package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/store"
)

// The pages of the executor, agent, token and callback lists: ?limit=
// from 1 to maxListPage, defaultListPage without it; next goes back as
// ?after=.
const (
	defaultListPage = 100
	maxListPage     = 1000
)

// listPage reads ?limit= of a list of these pages.
func listPage(r *http.Request) (int, error) {
	return queryInt(r, "limit", defaultListPage, 1, maxListPage)
}

// afterName reads ?after= of a list by name: the name of the last item
// of the previous page.
func afterName(r *http.Request) (string, error) {
	after := r.URL.Query().Get("after")
	if len(after) > 255 || !validText(after) {
		return "", InvalidField("?after", "is not a cursor: take next from the previous page")
	}
	return after, nil
}

// namePage reads what a list paged by name asks: its environment, the
// name to start after and the page's size.
func (s *Server) namePage(r *http.Request) (store.Environment, string, int, error) {
	e, err := s.env(r)
	if err != nil {
		return e, "", 0, err
	}
	limit, err := listPage(r)
	if err != nil {
		return e, "", 0, err
	}
	after, err := afterName(r)
	return e, after, limit, err
}

// listAgents answers GET .../agents: a page of agents by name, each with
// the executors serving it.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	e, after, limit, err := s.namePage(r)
	if err != nil {
		return err
	}
	as, err := s.opts.Store.ListAgentsPage(r.Context(), e.ID, after, limit)
	if err != nil {
		return err
	}
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.Name
	}
	execs, err := s.opts.Store.ExecutorsServing(r.Context(), e.ID, names)
	if err != nil {
		return err
	}
	by := store.AgentExecutors(execs)
	writePage(w, as, limit, func(a store.Agent) string { return a.Name },
		func(a store.Agent) client.Agent { return wireAgent(a, by[a.Name]) })
	return nil
}

// listExecutors answers GET .../executors: a page of the executors that
// reported to the environment lately, stopped ones included, by name.
func (s *Server) listExecutors(w http.ResponseWriter, r *http.Request) error {
	e, after, limit, err := s.namePage(r)
	if err != nil {
		return err
	}
	execs, err := s.opts.Store.ListExecutorsPage(r.Context(), e.ID, after, limit)
	if err != nil {
		return err
	}
	writePage(w, execs, limit, func(x store.Executor) string { return x.Name }, wireExecutor)
	return nil
}

// The executor API: what an executor on another host calls, with an
// executor token, instead of holding PostgreSQL credentials (see
// internal/executor.Remote). An executor token reaches its own agents
// only: it loads the batches of those agents, records attempts on the
// resources of those batches, and registers as serving those agents.

// MaxRecordBytes bounds one POST of recorded attempts (a chunk's records
// with their bounded diffs, logs and facts); the executor splits a chunk
// that is larger.
const MaxRecordBytes int64 = 32 << 20

// executorSession answers GET .../executor/session.
func (s *Server) executorSession(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	open, err := s.opts.Store.OpenRunVersions(r.Context(), []string{e.ID})
	if err != nil {
		return err
	}
	var out ledger.Session
	out.Environment.ID, out.Environment.Name = e.ID, e.Name
	out.Agents = principal(r).Agents
	out.OpenVersions = []int64{}
	for v := range open[e.ID] {
		out.OpenVersions = append(out.OpenVersions, v)
	}
	slices.Sort(out.OpenVersions)
	WriteJSON(w, http.StatusOK, out)
	return nil
}

// ExecutorRegistration is the body of PUT .../executor/registrations/{name}.
type ExecutorRegistration struct {
	Hostname string   `json:"hostname"`
	PID      int      `json:"pid"`
	Version  string   `json:"version"`
	Agents   []string `json:"agents"`
	// First marks the executor's first report since it started.
	First bool `json:"first"`
	// Pool is the executor's pool (empty: the default of its agents).
	Pool string `json:"pool,omitempty"`
}

// reportExecutor answers PUT .../executor/registrations/{name}: the
// executor serves these agents, now.
func (s *Server) reportExecutor(w http.ResponseWriter, r *http.Request) error {
	e, name, err := s.executorOf(r)
	if err != nil {
		return err
	}
	var req ExecutorRegistration
	if err := Decode(r, &req, s.opts.MaxBodyBytes); err != nil {
		return err
	}
	var errs []FieldError
	if len(req.Hostname) > 255 {
		errs = append(errs, FieldError{Field: "/hostname", Detail: "at most 255 characters"})
	}
	if len(req.Version) > 255 {
		errs = append(errs, FieldError{Field: "/version", Detail: "at most 255 characters"})
	}
	if req.PID < 0 {
		errs = append(errs, FieldError{Field: "/pid", Detail: "must not be negative"})
	}
	if err := names.CheckPool(req.Pool); err != nil {
		errs = append(errs, FieldError{Field: "/pool", Detail: err.Error()})
	}
	if len(req.Agents) > store.MaxExecutorAgents {
		errs = append(errs, FieldError{Field: "/agents",
			Detail: fmt.Sprintf("%d agents: a registration has at most %d", len(req.Agents), store.MaxExecutorAgents)})
	}
	for i, a := range req.Agents {
		if a == "" || len(a) > 255 {
			errs = append(errs, FieldError{Field: fmt.Sprintf("/agents/%d", i), Detail: "an agent name has 1 to 255 characters"})
		}
	}
	if len(errs) > 0 {
		return Validation("the registration is not valid", errs...)
	}
	if err := servesAll(principal(r), req.Agents); err != nil {
		return err
	}
	if err := s.opts.Store.RegisterExecutor(r.Context(), e.Name, store.ExecutorReport{Name: name,
		Hostname: req.Hostname, PID: req.PID, Version: req.Version, Agents: req.Agents, First: req.First,
		Embedded: OverLocalSocket(r.Context()), Pool: req.Pool}, registrant(r, e)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// registrant is who registers (or stops) an executor in e: the request's
// token by its id (or its principal's actor), and whether it is an admin
// there, who may stop any executor.
func registrant(r *http.Request, e store.Environment) store.Registrant {
	p := principal(r)
	owner := p.Actor()
	if p.Kind == auth.KindToken && p.TokenID != "" {
		owner = store.TokenOwner(p.TokenID)
	}
	return store.Registrant{Owner: owner, Admin: p.In(e.ID, e.Name) == auth.RoleAdmin}
}

// stopExecutor answers POST .../executor/registrations/{name}/stop: the
// executor stopped cleanly (or an admin marks it stopped).
func (s *Server) stopExecutor(w http.ResponseWriter, r *http.Request) error {
	e, name, err := s.executorOf(r)
	if err != nil {
		return err
	}
	if err := s.opts.Store.StopRegistration(r.Context(), e.Name, name, registrant(r, e)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// loadBatch answers GET .../executor/batches/{run}/{seq}: the batch with
// the content of its resources, for an executor of its agent; with
// ?resume_workflow=ID (a retried batch), also what the batch recorded in
// that workflow already. Resources outside the environment's confinement
// come without their attributes, recorded failed (store.ConfineBatch).
func (s *Server) loadBatch(w http.ResponseWriter, r *http.Request) error {
	e, run, seq, err := s.batchOf(r)
	if err != nil {
		return err
	}
	b, err := s.opts.Store.LoadBatch(r.Context(), e.ID, run, seq)
	if err != nil {
		return err
	}
	if err := servesAll(principal(r), b.AgentsOf()); err != nil {
		return err
	}
	if wf := r.URL.Query().Get("resume_workflow"); wf != "" {
		if len(wf) > 1000 {
			return InvalidField("/resume_workflow", "at most 1000 characters")
		}
		// A retried batch: what it recorded already, of its own
		// resources.
		if b.Recorded, err = s.opts.Store.BatchRecorded(r.Context(), e.ID, wf, seq, b.Resources); err != nil {
			return err
		}
		// And the changes its attempts intended and recorded no
		// outcome of: an attempt that died may have made them.
		if b.Intended, err = s.opts.Store.BatchIntended(r.Context(), e.ID, run, seq, wf, b.Recorded); err != nil {
			return err
		}
	}
	// What the environment's confinement refuses is recorded failed
	// and not handed out, by the settings of now.
	if err := s.opts.Store.ConfineBatch(r.Context(), e.Settings, e.ID, run, seq, &b); err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, b)
	return nil
}

// RecordRequest is the body of POST .../executor/batches/{run}/{seq}/actions.
type RecordRequest struct {
	Records []ledger.ActionRecord `json:"records"`
	// Again: this chunk may have been recorded already (the answer to an
	// earlier POST was lost); it is then not recorded twice.
	Again bool `json:"again"`
}

// The values an executor may record.
var (
	recordResults = []ledger.Result{ledger.ResultDeployed, ledger.ResultFailed, ledger.ResultSkipped, ledger.ResultSkippedForDependency, ledger.ResultUnavailable,
		ledger.ResultUnmanaged}
	recordOperations = []string{"", "none", "create", "update", "delete"}
	recordClasses    = []string{"", "permanent", "transient", "throttled", "unavailable", "skipped"}
)

// joinValues lists vs, comma-separated.
func joinValues[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// recordBatch answers POST .../executor/batches/{run}/{seq}/actions: the
// attempts of one chunk of the batch, written by intend, not by the
// executor. Each must be on a resource of the batch; the version, reason
// and content hash are the batch's, whatever the executor sent.
func (s *Server) recordBatch(w http.ResponseWriter, r *http.Request) error {
	e, run, seq, err := s.batchOf(r)
	if err != nil {
		return err
	}
	// The body first, to read the hashes of its resources only; its
	// problems are answered after those of the batch and the caller.
	var req RecordRequest
	body, decodeErr := ReadBody(r, MaxRecordBytes)
	if decodeErr == nil {
		decodeErr = decodeRecords(body, &req)
	}
	ids := make([]string, len(req.Records))
	for i, rec := range req.Records {
		ids[i] = rec.ResourceID
	}
	head, err := s.opts.Store.BatchHead(r.Context(), e.ID, run, seq, ids)
	if err != nil {
		return err
	}
	if err := servesAll(principal(r), head.AgentsOf()); err != nil {
		return err
	}
	if decodeErr != nil {
		return decodeErr
	}
	var errs []FieldError
	for i, rec := range req.Records {
		f := func(field, format string, args ...any) {
			if len(errs) < 20 {
				errs = append(errs, FieldError{Field: fmt.Sprintf("/records/%d/%s", i, field), Detail: fmt.Sprintf(format, args...)})
			}
		}
		hash, ok := head.Hashes[rec.ResourceID]
		if !ok {
			f("resource_id", "%.200q is not a resource of batch %d of run %d", rec.ResourceID, seq, run)
		}
		switch {
		case head.Action == ledger.ActionDryrun && rec.Action != ledger.ActionDryrun:
			f("action", "a dry-run records dryrun, not %.40q", rec.Action)
		case head.Action != ledger.ActionDryrun && rec.Action != ledger.ActionDeploy && rec.Action != ledger.ActionRepair:
			f("action", "want deploy or repair, not %.40q", rec.Action)
		}
		if !slices.Contains(recordResults, rec.Result) {
			f("result", "want one of %s", joinValues(recordResults))
		}
		if !slices.Contains(recordOperations, rec.Operation) {
			f("operation", "want none, create, update or delete")
		}
		if !slices.Contains(recordClasses, rec.ErrorClass) {
			f("error_class", "want permanent, transient, throttled, unavailable or skipped")
		}
		if rec.ErrorClass == "skipped" && rec.Result != ledger.ResultSkipped {
			f("result", "an executor records skipped for an adapter's skipped error")
		}
		if (rec.Result == ledger.ResultUnavailable) != (rec.ErrorClass == "unavailable") {
			f("result", "an executor records unavailable for an adapter's unavailable error, and only then")
		}
		if rec.StartedAt.IsZero() || rec.FinishedAt.Before(rec.StartedAt) {
			f("finished_at", "an attempt starts, then finishes")
		}
		if rec.WorkflowID == "" || len(rec.WorkflowID) > 1000 || len(rec.RunID) > 1000 || len(rec.Executor) > 255 {
			f("workflow_id", "the workflow id is required; ids have at most 1000 characters, the executor name 255")
		}
		if len(rec.Error) > 64<<10 {
			f("error", "at most 64 KiB")
		}
		if len(rec.Facts) > 1000 {
			f("facts", "at most 1000 facts")
		}
		req.Records[i].Hash, req.Records[i].Version, req.Records[i].Reason = hash, head.Version, head.Reason
		req.Records[i].Batch = seq
	}
	if len(errs) > 0 {
		return Validation("the records are not valid", errs...)
	}
	if err := s.opts.Store.RecordChunk(r.Context(), e.ID, req.Records, req.Again); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// MaxIntents bounds the intents of one POST .../intents (a wave holds at
// most the executor's concurrency of them; the executor splits a larger
// one).
const MaxIntents = 1000

// IntentsRequest is the body of POST .../executor/batches/{run}/{seq}/intents.
type IntentsRequest struct {
	Intents []ledger.Intent `json:"intents"`
}

// The operations an executor may intend.
var intentOperations = []string{"create", "update", "delete"}

// recordIntents answers POST .../executor/batches/{run}/{seq}/intents:
// attempts on resources of the batch are about to change them. Recording
// an intent twice is harmless.
func (s *Server) recordIntents(w http.ResponseWriter, r *http.Request) error {
	e, run, seq, err := s.batchOf(r)
	if err != nil {
		return err
	}
	// As recordBatch: the body first, its problems answered last.
	var req IntentsRequest
	body, decodeErr := ReadBody(r, 1<<20)
	if decodeErr == nil {
		decodeErr = decodeIntents(body, &req)
	}
	ids := make([]string, len(req.Intents))
	for i, in := range req.Intents {
		ids[i] = in.ResourceID
	}
	// The head as read for the batch's first intent: a batch gone since
	// is the insert's 404 (store.IntentHead).
	head, err := s.opts.Store.IntentHead(r.Context(), e.ID, run, seq, ids)
	if err != nil {
		return err
	}
	if err := servesAll(principal(r), head.AgentsOf()); err != nil {
		return err
	}
	if decodeErr != nil {
		return decodeErr
	}
	if len(req.Intents) > MaxIntents {
		return InvalidField("/intents", fmt.Sprintf("at most %d intents", MaxIntents))
	}
	var errs []FieldError
	for i, in := range req.Intents {
		f := func(field, format string, args ...any) {
			if len(errs) < 20 {
				errs = append(errs, FieldError{Field: fmt.Sprintf("/intents/%d/%s", i, field), Detail: fmt.Sprintf(format, args...)})
			}
		}
		if _, ok := head.Hashes[in.ResourceID]; !ok {
			f("resource_id", "%.200q is not a resource of batch %d of run %d", in.ResourceID, seq, run)
		}
		if head.Action == ledger.ActionDryrun {
			f("operation", "a dry-run changes nothing")
		} else if !slices.Contains(intentOperations, in.Operation) {
			f("operation", "want %s", strings.Join(intentOperations, ", "))
		}
		if in.WorkflowID == "" || len(in.WorkflowID) > 1000 {
			f("workflow_id", "the workflow id is required, at most 1000 characters")
		}
		if in.Attempt < 1 {
			f("attempt", "attempts count from 1")
		}
	}
	if len(errs) > 0 {
		return Validation("the intents are not valid", errs...)
	}
	if err := s.opts.Store.RecordIntents(r.Context(), e.ID, run, seq, req.Intents); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// servesAll refuses an executor principal that does not serve every one
// of agents.
func servesAll(p auth.Principal, agents []string) error {
	for _, a := range agents {
		if !p.ServesAgent(a) {
			return Forbidden("this executor token serves agents %s, not %.200q", strings.Join(p.Agents, ", "), a)
		}
	}
	return nil
}

// executorName is the {name} path parameter, a registered executor name.
func executorName(r *http.Request) (string, error) {
	name, err := pathParam(chi.URLParam(r, "name"))
	if err != nil {
		return "", err
	}
	if name == "" || len(name) > 255 {
		return "", BadRequest("an executor name has 1 to 255 characters")
	}
	return name, nil
}

// executorOf is the environment and the executor name of the path.
func (s *Server) executorOf(r *http.Request) (store.Environment, string, error) {
	e, err := s.env(r)
	if err != nil {
		return e, "", err
	}
	name, err := executorName(r)
	return e, name, err
}

// batchOf is the environment and the batch (run, seq) a batch route
// names.
func (s *Server) batchOf(r *http.Request) (store.Environment, int64, int, error) {
	e, err := s.env(r)
	if err != nil {
		return e, 0, 0, err
	}
	run, seq, err := batchParams(r)
	return e, run, seq, err
}

// batchParams are the {run} and {seq} path parameters.
func batchParams(r *http.Request) (int64, int, error) {
	run, err := strconv.ParseInt(chi.URLParam(r, "run"), 10, 64)
	if err != nil || run < 1 {
		return 0, 0, BadRequest("run %.40q is not a positive whole number", chi.URLParam(r, "run"))
	}
	seq, err := strconv.ParseInt(chi.URLParam(r, "seq"), 10, 32)
	if err != nil || seq < 0 {
		return 0, 0, BadRequest("batch %.40q is not a whole number", chi.URLParam(r, "seq"))
	}
	return run, int(seq), nil
}
