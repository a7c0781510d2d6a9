package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/store"
)

// Every route declares, where routes.go declares it, who may call it: the
// role it needs and where that role must hold (in the environment the
// route addresses, or globally). A route is a *Route, and only a *Route:
// TestEveryRouteDeclaresItsAccess walks the router and fails on any other
// handler, so a route cannot be added without a declaration.

// Authenticator tells who a request's bearer credential names.
type Authenticator interface {
	// Authenticate returns the principal of credential (the text after
	// "Bearer "). An error wrapping auth.ErrUnauthenticated is a 401;
	// auth.ErrUnavailable a 503.
	Authenticate(ctx context.Context, credential string) (auth.Principal, error)
}

// EnvironmentAuthenticator is an Authenticator that reads the request's
// environment (its id or name) with the credential, in one query
// (auth.Authenticator): env is nil when it did not (read it as usual).
type EnvironmentAuthenticator interface {
	AuthenticateIn(ctx context.Context, credential, envRef string) (p auth.Principal, env *store.Environment, err error)
}

// Scope is where a route's role must hold.
type Scope int

const (
	// ScopeOpen needs no credentials (/healthz).
	ScopeOpen Scope = iota
	// ScopeGlobal needs the role in every environment (a global token):
	// projects, new environments, tokens, /metrics.
	ScopeGlobal
	// ScopeAny needs the role in some environment; the handler shows only
	// what the caller may see (the environment and project lists).
	ScopeAny
	// ScopePath needs the role in the environment of the {env} path
	// parameter.
	ScopePath
	// ScopeHeader needs the role in the environment the
	// X-Intend-Environment header names (the /lsm routes).
	ScopeHeader
)

func (s Scope) String() string {
	return [...]string{"open", "global", "any", "environment", "environment"}[s]
}

// Route is one route's declaration and handler: what it is (Action, also
// the audit trail's name for it), who may call it, and the handler.
type Route struct {
	Action string
	Role   auth.Role
	Scope  Scope
	s      *Server
	h      handlerFunc
	// bulk marks a route whose body may be large (exports): it gets
	// Options.BulkBodyTimeout to arrive instead of Options.BodyTimeout.
	bulk bool
	// quiet marks an executor's routine call (loading a batch, recording
	// a chunk, its heartbeat): the audit trail keeps its refusals only;
	// the action log and the registrations are its record.
	quiet bool
}

// quietly marks rt as an executor's routine call.
func (rt *Route) quietly() *Route {
	rt.quiet = true
	return rt
}

// withBulkBody marks rt as taking large bodies.
func (rt *Route) withBulkBody() *Route {
	rt.bulk = true
	return rt
}

// route declares a route.
func (s *Server) route(action string, role auth.Role, scope Scope, h handlerFunc) *Route {
	return &Route{Action: action, Role: role, Scope: scope, s: s, h: h}
}

// The declarations routes.go uses.
func (s *Server) open(action string, h handlerFunc) *Route {
	return s.route(action, auth.RoleNone, ScopeOpen, h)
}
func (s *Server) global(action string, role auth.Role, h handlerFunc) *Route {
	return s.route(action, role, ScopeGlobal, h)
}
func (s *Server) anyEnv(action string, role auth.Role, h handlerFunc) *Route {
	return s.route(action, role, ScopeAny, h)
}
func (s *Server) inEnv(action string, role auth.Role, h handlerFunc) *Route {
	return s.route(action, role, ScopePath, h)
}
func (s *Server) inLSMEnv(action string, role auth.Role, h handlerFunc) *Route {
	return s.route(action, role, ScopeHeader, h)
}

type envKey struct{}

// ServeHTTP authenticates the request, resolves and checks its
// environment, checks the role, runs the handler and audits a write.
func (rt *Route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := rt.s
	// The body must arrive in time: observe gave it Options.BodyTimeout
	// (deadline.go); a large one gets longer.
	if rt.bulk {
		setBodyDeadline(w, r, s.opts.BulkBodyTimeout)
	}
	noteCaller(r.Context(), "", rt.quiet)
	if rt.Scope == ScopeOpen {
		s.serve(rt.h)(w, r)
		return
	}
	var ref string // the environment the route names, read with the credential
	if rt.Scope == ScopePath || rt.Scope == ScopeHeader {
		ref, _ = envRef(r, rt.Scope)
	}
	p, prefetched, err := s.authenticate(r, ref)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="intend"`)
		WriteError(w, r, s.log, err)
		return
	}
	noteCaller(r.Context(), p.Actor(), rt.quiet)
	ctx := auth.WithPrincipal(r.Context(), p)
	ctx = store.WithActor(ctx, p.Actor())
	ctx = store.WithOrigin(ctx, store.Origin{RemoteAddr: remoteHost(r), Method: r.Method, Path: r.URL.Path})
	ctx = context.WithValue(ctx, auditDetailKey{}, &auditDetail{})
	r = r.WithContext(ctx)
	rec := &statusRecorder{ResponseWriter: w}
	var env *store.Environment
	err = func() error {
		switch rt.Scope {
		case ScopeGlobal:
			if have := p.Global(); !have.Grants(rt.Role) {
				return forbidden(rt, have, "every environment")
			}
		case ScopeAny:
			if !p.Global().Grants(rt.Role) && !p.Anywhere(rt.Role) {
				return forbidden(rt, p.Global(), "any environment")
			}
		case ScopePath, ScopeHeader:
			e, err := s.resolveEnv(r, rt.Scope, p, prefetched)
			if e.ID != "" {
				// Audited there, a probe from another tenant included.
				env = &e
			}
			if err != nil {
				return err
			}
			if have := p.In(e.ID, e.Name); !have.Grants(rt.Role) {
				return forbidden(rt, have, "environment "+e.Name)
			}
			r = r.WithContext(context.WithValue(r.Context(), envKey{}, e))
			if rt.bulk {
				release, ok := s.bulk.acquire(e.ID, s.opts.MaxBulkPerEnvironment)
				if !ok {
					rec.Header().Set("Retry-After", "2")
					return TooManyRequests("environment %s takes %d exports or model uploads at once on this server; "+
						"retry when one has finished", e.Name, s.opts.MaxBulkPerEnvironment)
				}
				defer release()
			}
		}
		return rt.h(rec, r)
	}()
	if err != nil {
		WriteError(rec, r, s.log, storeProblem(err))
	}
	s.audit(r, rt, p, env, rec.status())
}

func forbidden(rt *Route, have auth.Role, where string) error {
	return Forbidden("%s needs role %s in %s; the caller has %s", rt.Action, rt.Role, where, have)
}

// authenticate reads the bearer credential and asks the authenticator
// who it names. Without an authenticator nobody is anyone: intend fails
// closed.
//
// With envRef (the environment the route names, "" for none) and an
// EnvironmentAuthenticator, the environment is read with the credential
// and returned (nil when it was not, or does not exist).
func (s *Server) authenticate(r *http.Request, envRef string) (auth.Principal, *store.Environment, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return auth.Principal{}, nil, Unauthenticated("send \"Authorization: Bearer TOKEN\" with an API token " +
			"(the CLI sends --token or INTEND_TOKEN; an admin makes one with `intend token create`)")
	}
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(cred) == "" {
		return auth.Principal{}, nil, Unauthenticated("the Authorization header must be \"Bearer TOKEN\"")
	}
	if s.opts.Auth == nil {
		return auth.Principal{}, nil, Unauthenticated("this server accepts no credentials")
	}
	var p auth.Principal
	var env *store.Environment
	var err error
	if ea, ok := s.opts.Auth.(EnvironmentAuthenticator); ok && envRef != "" {
		p, env, err = ea.AuthenticateIn(r.Context(), strings.TrimSpace(cred), envRef)
	} else {
		p, err = s.opts.Auth.Authenticate(r.Context(), strings.TrimSpace(cred))
	}
	switch {
	case err == nil:
		return p, env, nil
	case errors.Is(err, auth.ErrUnauthenticated):
		return p, nil, Unauthenticated("%s", err.Error())
	case errors.Is(err, auth.ErrUnavailable):
		s.log.WarnContext(r.Context(), "authentication unavailable", "error", err)
		return p, nil, Unavailable("credentials cannot be checked now; retry later")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return p, nil, Unavailable("the request was cancelled or timed out")
	case store.IsUnavailable(err):
		// The token lookup is every request's first query: PostgreSQL
		// down is the server's fault, and worth a retry.
		s.log.WarnContext(r.Context(), "authentication unavailable", "error", err)
		return p, nil, Unavailable("the database cannot be reached now; retry later")
	}
	return p, nil, fmt.Errorf("authenticate: %w", err)
}

// envRef is the environment (its id or name) a route of scope names.
func envRef(r *http.Request, scope Scope) (string, error) {
	if scope == ScopeHeader {
		ref := r.Header.Get(EnvironmentHeader)
		if ref == "" {
			return "", BadRequest("the %s header is missing: name the environment (its id or name)", EnvironmentHeader)
		}
		return ref, nil
	}
	return pathParam(chi.URLParam(r, "env"))
}

// resolveEnv finds the route's environment. One the caller may not see
// is "not found", worded exactly as one that does not exist, so that
// names do not leak across tenants.
// prefetched, when not nil, is the environment authenticate read with
// the credential.
func (s *Server) resolveEnv(r *http.Request, scope Scope, p auth.Principal, prefetched *store.Environment) (store.Environment, error) {
	ref, err := envRef(r, scope)
	if err != nil {
		return store.Environment{}, err
	}
	var e store.Environment
	if prefetched != nil {
		e = *prefetched
	} else {
		e, err = s.opts.Store.GetEnvironment(r.Context(), ref)
	}
	if err == nil && p.In(e.ID, e.Name) == auth.RoleNone {
		err = store.NotFound("environment %q", ref)
	}
	return e, err
}

// requestEnv is the environment the guard resolved for the request.
func requestEnv(r *http.Request) (store.Environment, bool) {
	e, ok := r.Context().Value(envKey{}).(store.Environment)
	return e, ok
}

// principal is the request's principal (the zero one on open routes).
func principal(r *http.Request) auth.Principal {
	p, _ := auth.From(r.Context())
	return p
}

// audit records a write (any method but GET and HEAD, and but an
// executor's routine calls), and any refusal of a known caller, in the
// audit trail; refusals (4xx) at most once per Options.AuditRefusalWindow
// for each caller, action, status and environment
// (store.AuditRefusal). A failure to record is logged: the request has
// been answered by then.
func (s *Server) audit(r *http.Request, rt *Route, p auth.Principal, env *store.Environment, status int) {
	if (r.Method == http.MethodGet || r.Method == http.MethodHead || rt.quiet) && status < 400 {
		return
	}
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && status != http.StatusForbidden {
		return
	}
	d, _ := r.Context().Value(auditDetailKey{}).(*auditDetail)
	if d != nil && d.byStore && status < 400 {
		// The store wrote the row with the write itself (CreateToken).
		return
	}
	e := store.AuditEntry{
		ActorKind: string(p.Kind), Actor: p.Actor(), RemoteAddr: remoteHost(r), Action: rt.Action,
		Method: r.Method, Path: r.URL.Path, Status: status,
	}
	if env != nil && env.ID != "" {
		e.EnvironmentID, e.Environment = &env.ID, env.Name
	}
	if d != nil && d.v != nil {
		if b, err := json.Marshal(d.v); err == nil {
			e.Detail = b
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	var err error
	if status >= 400 && status < 500 {
		// A refusal: one row a window per caller and kind, the rest
		// counted into a summary row, so that a caller cannot fill the
		// trail by being refused.
		_, err = s.opts.Store.AuditRefusal(ctx, e, s.opts.AuditRefusalWindow)
	} else {
		err = s.opts.Store.Audit(ctx, e)
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "audit trail: entry not recorded", "action", rt.Action, "actor", e.Actor, "status", status, "error", err)
	}
}

type auditDetailKey struct{}

// auditDetail is what a handler adds to its request's audit row: a
// detail, or that the store has written the row already (byStore), in
// the transaction of the write itself.
type auditDetail struct {
	v       any
	byStore bool
}

// remoteHost is the client's address without its port.
func remoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// statusRecorder remembers the status a handler wrote and counts the
// bytes of the body.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	bytes int64
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Flush lets streaming handlers flush through the recorder.
func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusRecorder) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
