package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/fetchhosts"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/lsmevents"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/telemetry"
)

// Scheduler reaches the environments' scheduler workflows. Requests are
// queued in PostgreSQL first; waking is how the scheduler hears of them at
// once (it also polls), so a failed wake-up delays work but loses nothing.
type Scheduler interface {
	// Ensure makes sure the environment's scheduler runs.
	Ensure(ctx context.Context, env store.Environment) error
	// Wake tells it to look at its queue now. release says new intent
	// arrived (a running repair yields to it); halt that the environment
	// was halted (the running run stops dispatching).
	Wake(ctx context.Context, env store.Environment, reason string, release, halt bool) error
	// Stop terminates every running workflow of the environment: the
	// scheduler and its runs, the compile queue, dry-runs, service
	// instances and orders.
	Stop(ctx context.Context, env store.Environment) error
}

// Dryruns starts the workflow of a recorded dry-run.
type Dryruns interface {
	StartDryrun(ctx context.Context, env store.Environment, run store.DeployRun) error
}

// Options configures a Server.
type Options struct {
	Store     *store.Store
	Scheduler Scheduler
	Dryruns   Dryruns
	// LSM sends the service inventory's writes to the lifecycle engine;
	// without it they answer 503.
	LSM lsm.Engine
	// LSMPreview serves the service instances' dry-runs; without it they
	// answer 503.
	LSMPreview LSMPreviewer
	// ModelPreview serves the previews of a model change over the live
	// service instances; without it they answer 503.
	ModelPreview ModelPreviewer
	// LSMMigrate maps instances' attributes to newer entity versions;
	// without it migrations answer 503.
	LSMMigrate LSMMigrator
	// Orders starts orders' workflows; without it (or LSM) POST
	// /lsm/v1/orders answers 503.
	Orders LSMOrders
	// Compiles wakes compile queues; without it, a requested compile
	// waits for the reconciler.
	Compiles Compiles
	// Auth authenticates bearer credentials; without it every route but
	// /healthz answers 401 (intend fails closed).
	Auth Authenticator
	// AllowedHosts are the Host names (without port) the API answers
	// to; empty: any. Refuses DNS rebinding (see checkHost).
	AllowedHosts []string
	Log          *slog.Logger
	Telemetry    *telemetry.Telemetry
	// Tracer traces every request as a server span (nil: no spans).
	Tracer trace.Tracer
	// AccessLog is the level of the access log's lines (routine calls
	// that succeed log at debug); AccessLogOff turns it off.
	AccessLog    slog.Level
	AccessLogOff bool
	// Health checks, by name ("postgresql", "temporal"), run by /healthz.
	Health map[string]func(context.Context) error
	// MaxBodyBytes limits ordinary request bodies (default 1 MiB).
	MaxBodyBytes int64
	// MaxExportBytes limits version exports (default 256 MiB).
	MaxExportBytes int64
	// MaxArtifactSize limits one adapter plugin artifact (default
	// store.DefaultMaxArtifactSize, 256 MiB); the environment's
	// artifact_quota limits them together.
	MaxArtifactSize int64
	// MaxFactBytes bounds a user-set fact's value, as JSON (default
	// DefaultMaxFactBytes); MaxUserFacts the user-set facts of one
	// environment (default DefaultMaxUserFacts).
	MaxFactBytes, MaxUserFacts int
	// BodyTimeout bounds how long a request's body may take to arrive
	// (default 60 s); BulkBodyTimeout that of exports and model uploads
	// (default 10 minutes).
	BodyTimeout, BulkBodyTimeout time.Duration
	// MaxBulkPerEnvironment bounds the exports and model uploads one
	// server handles at once for one environment (default 4); one more
	// is a 429.
	MaxBulkPerEnvironment int
	// MaxArtifactUploads bounds the artifact uploads one server takes at
	// once (default DefaultMaxArtifactUploads), an environment one: each
	// holds a database connection while its body arrives. One more is a
	// 429.
	MaxArtifactUploads int
	// AllowLocalRepos lets a repo_url name a local path or file:// URL on
	// the server's host (intend server --allow-local-repos); without it
	// such a setting is a 422.
	AllowLocalRepos bool
	// CompileFetchHosts, when set, are the hosts a repo_url may name
	// (intend server --compile-fetch-hosts): another is a 422. The
	// compile checks the host's addresses again when it fetches.
	CompileFetchHosts *fetchhosts.Policy
	// Compiler runs the compile of an uploaded model (nil:
	// compiler.InProcess), within CompileTimeout (default 10 minutes).
	Compiler       compiler.Runner
	CompileTimeout time.Duration
	// CallbackHosts are the hosts LSM callbacks may be registered for
	// (see CallbackHostAllowed); empty: any.
	CallbackHosts []string
	// Events wakes the service instances' event streams (nil: the
	// streams answer 503); MaxEventStreams bounds the streams served at
	// once (default DefaultMaxEventStreams; one more is a 503);
	// EventHeartbeat is an idle stream's comment period (default
	// DefaultEventHeartbeat).
	Events          *lsmevents.Hub
	MaxEventStreams int
	EventHeartbeat  time.Duration
	// MaxEventStreamsPerCaller bounds the streams one caller (its
	// actor: a token, an OIDC subject) holds at once (default
	// DefaultMaxEventStreamsPerCaller; one more is a 429), so that one
	// caller cannot take every stream of the server.
	MaxEventStreamsPerCaller int
	// AuditRefusalWindow is how often a caller's refusals of one kind
	// (action, status, environment) get an audit row of their own; the
	// others are counted into a summary row (default
	// store.DefaultRefusalWindow).
	AuditRefusalWindow time.Duration
}

// Server is intend's REST API.
type Server struct {
	opts Options
	log  *slog.Logger
	bulk slots
	// streams counts the event streams being served; callerStreams
	// those of each caller.
	streams       atomic.Int64
	callerStreams slots
}

// slots counts work in progress per key, up to a limit.
type slots struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire takes a slot of key when fewer than limit are taken; release
// gives it back.
func (s *slots) acquire(key string, limit int) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[key] >= limit {
		return nil, false
	}
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[key]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.n[key]--; s.n[key] <= 0 {
			delete(s.n, key)
		}
	}, true
}

// New returns the API server; Handler serves it.
func New(opts Options) *Server {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxExportBytes <= 0 {
		opts.MaxExportBytes = 256 << 20
	}
	if opts.MaxArtifactSize <= 0 {
		opts.MaxArtifactSize = store.DefaultMaxArtifactSize
	}
	if opts.MaxFactBytes <= 0 {
		opts.MaxFactBytes = DefaultMaxFactBytes
	}
	if opts.MaxUserFacts <= 0 {
		opts.MaxUserFacts = DefaultMaxUserFacts
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = time.Minute
	}
	if opts.BulkBodyTimeout <= 0 {
		opts.BulkBodyTimeout = 10 * time.Minute
	}
	if opts.MaxBulkPerEnvironment <= 0 {
		opts.MaxBulkPerEnvironment = 4
	}
	if opts.MaxArtifactUploads <= 0 {
		opts.MaxArtifactUploads = DefaultMaxArtifactUploads
	}
	if opts.MaxEventStreams <= 0 {
		opts.MaxEventStreams = DefaultMaxEventStreams
	}
	if opts.MaxEventStreamsPerCaller <= 0 {
		opts.MaxEventStreamsPerCaller = DefaultMaxEventStreamsPerCaller
	}
	if opts.EventHeartbeat <= 0 {
		opts.EventHeartbeat = DefaultEventHeartbeat
	}
	return &Server{opts: opts, log: opts.Log}
}

// wake wakes an environment's scheduler; failures are logged, not
// returned: the request is queued and the scheduler's poll finds it.
func (s *Server) wake(r *http.Request, env store.Environment, reason string, release, halt bool) {
	if s.opts.Scheduler == nil {
		return
	}
	if err := s.opts.Scheduler.Wake(r.Context(), env, reason, release, halt); err != nil {
		s.log.WarnContext(r.Context(), "scheduler not woken; it will find the request when it polls",
			"environment", env.Name, "reason", reason, "error", err)
	}
}

// handlerFunc is an HTTP handler that returns its error; serve renders it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) serve(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			WriteError(w, r, s.log, storeProblem(err))
		}
	}
}

// storeProblem turns the store's typed errors into problems; everything
// else stays an internal error.
func storeProblem(err error) error {
	var se *store.SettingError
	var nf *store.NotFoundError
	var ce *store.ConflictError
	var eo *store.ExecutorOwnedError
	var el *store.ExecutorLimitError
	switch {
	case errors.As(err, new(*Problem)):
		return err
	case errors.Is(err, store.ErrNoRepository):
		return Validation("the environment has no repository to compile: set its repo_url setting",
			FieldError{Field: "/settings/repo_url", Detail: "is empty"})
	case errors.As(err, &nf):
		return NotFound("%s", nf.What)
	case errors.As(err, &ce):
		return Conflict("%s", ce.What)
	case errors.As(err, new(*store.BreakingChangesError)):
		// A release whose staged model would break live instances now.
		be, _ := errors.AsType[*store.BreakingChangesError](err)
		return breakingProblem(be)
	case errors.As(err, &eo):
		return Forbidden("%s", eo.Error())
	case errors.As(err, &el):
		return Validation(el.Error())
	case errors.Is(err, store.ErrNotFound):
		// A bare sentinel (the store's own are typed) still answers 404.
		return NotFound("%s", err.Error())
	case errors.Is(err, store.ErrConflict):
		return Conflict("%s", err.Error())
	case errors.As(err, &se):
		return InvalidField("/settings/"+se.Key, se.Reason)
	case errors.As(err, new(*intent.ValidationError)):
		// Stored state can refuse a version too (a partial export that
		// does not merge): its problems point into the body.
		return exportProblem(err)
	case store.IsInvalidText(err):
		// What the early checks (input.go) let through, PostgreSQL
		// refuses: it came from the request.
		return BadRequest("the request holds text the server cannot store: %s", invalidTextDetail)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Unavailable("the request was cancelled or timed out")
	case store.IsUnavailable(err):
		// A client may retry (an executor keeps its batch meanwhile).
		return Unavailable("the database cannot be reached now; retry later")
	}
	return err
}

// writeList writes a whole list (client.List, the envelope of every list
// response), each row converted to its wire type.
func writeList[R, W any](w http.ResponseWriter, rows []R, conv func(R) W) {
	WriteJSON(w, http.StatusOK, client.List[W]{Items: wireAll(rows, conv)})
}

// writePage writes one page of a list, each row converted to its wire type:
// a full page (limit rows) names the cursor of the next, the last row's.
func writePage[R, W any](w http.ResponseWriter, rows []R, limit int, cursor func(R) string, conv func(R) W) {
	out := client.List[W]{Items: wireAll(rows, conv)}
	if limit > 0 && len(rows) == limit {
		out.Next = cursor(rows[len(rows)-1])
	}
	WriteJSON(w, http.StatusOK, out)
}

// queryTime reads an RFC 3339 time parameter (nil when absent).
func queryTime(r *http.Request, name string) (*time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, InvalidField("?"+name, "must be an RFC 3339 time, e.g. 2026-11-22T10:00:00Z")
	}
	return &t, nil
}

func queryInt(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, InvalidField("?"+name, "must be a whole number from "+strconv.Itoa(lo)+" to "+strconv.Itoa(hi))
	}
	return n, nil
}

// pathParam returns a path parameter unescaped ("%2F" → "/"). One that
// holds a NUL character or invalid UTF-8 (once unescaped) names nothing
// and is refused.
func pathParam(raw string) (string, error) {
	v, err := url.PathUnescape(raw)
	if err != nil {
		return "", BadRequest("path segment %q is not valid URL encoding", raw)
	}
	if !validText(v) {
		return "", BadRequest("a path segment holds %s", invalidTextDetail)
	}
	return v, nil
}

// healthz reports whether PostgreSQL and Temporal answer. It is open to
// anyone (load balancers, probes), so it says only "ok" or
// "unavailable": which check failed, and why, goes to the log.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	ok := true
	for name, check := range s.opts.Health {
		if err := check(ctx); err != nil {
			s.log.WarnContext(r.Context(), "health check failed", "check", name, "error", err)
			ok = false
		}
	}
	status, code := "ok", http.StatusOK
	if !ok {
		status, code = "unavailable", http.StatusServiceUnavailable
		w.Header().Set("Retry-After", retryAfterUnavailable)
	}
	WriteJSON(w, code, map[string]any{"status": status})
	return nil
}
