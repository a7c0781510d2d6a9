package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/store"
)

// The token, audit and identity routes: tokens are created, listed and
// revoked by global admins; the secret is in the creation's answer only.

// tokenRequest is the body of POST /api/v1/tokens.
type tokenRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Environments limits the token to these environments (ids or
	// names); absent: every environment.
	Environments []string `json:"environments"`
	// Agents limits an executor token to these agents.
	Agents []string `json:"agents"`
	// ExpiresIn is a Go duration ("720h") or a number of seconds.
	ExpiresIn json.RawMessage `json:"expires_in"`
}

// CreatedToken is the answer to a token's creation: the only time its
// secret is shown (client.CreatedToken).
type CreatedToken = client.CreatedToken

// parseDuration reads expires_in: "90m", "720h" or a whole number of
// seconds.
func parseDuration(raw json.RawMessage) (time.Duration, bool) {
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return time.Duration(n) * time.Second, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// maxTokenTTL bounds the lifetime a token request may ask for.
const maxTokenTTL = 10 * 365 * 24 * time.Hour

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	var req tokenRequest
	if err := Decode(r, &req, s.opts.MaxBodyBytes); err != nil {
		return err
	}
	var errs []FieldError
	if err := auth.ValidateTokenName(req.Name); err != nil {
		errs = append(errs, FieldError{Field: "/name", Detail: err.Error()})
	}
	role, err := auth.ParseRole(req.Role)
	if err != nil {
		errs = append(errs, FieldError{Field: "/role", Detail: err.Error()})
	}
	if req.Environments != nil && len(req.Environments) == 0 {
		errs = append(errs, FieldError{Field: "/environments", Detail: "is empty: leave it out for a token of every environment"})
	}
	if req.Agents != nil && role != auth.RoleExecutor {
		errs = append(errs, FieldError{Field: "/agents", Detail: "only an executor token is limited to agents"})
	}
	var expires *time.Time
	if req.ExpiresIn != nil {
		d, ok := parseDuration(req.ExpiresIn)
		switch {
		case !ok:
			errs = append(errs, FieldError{Field: "/expires_in", Detail: `must be a duration such as "720h" or a number of seconds`})
		case d <= 0 || d > maxTokenTTL:
			errs = append(errs, FieldError{Field: "/expires_in", Detail: "must be more than 0 and at most 10 years"})
		default:
			t := time.Now().Add(d)
			expires = &t
		}
	}
	var envIDs []string
	for i, ref := range req.Environments {
		e, err := s.opts.Store.GetEnvironment(r.Context(), ref)
		if errors.Is(err, store.ErrNotFound) {
			errs = append(errs, FieldError{Field: "/environments/" + strconv.Itoa(i), Detail: "no environment " + strconv.Quote(ref)})
			continue
		}
		if err != nil {
			return err
		}
		envIDs = append(envIDs, e.ID)
	}
	if len(errs) > 0 {
		return Validation("the token request is invalid", errs...)
	}
	secret := auth.NewSecret()
	t, err := s.opts.Store.CreateToken(r.Context(), store.NewToken{
		Name: req.Name, Role: role.String(), Environments: envIDs, Agents: req.Agents,
		Hash: auth.Hash(secret), Hint: auth.Hint(secret), CreatedBy: principal(r).Actor(), ExpiresAt: expires,
	})
	if err != nil {
		return err
	}
	auditedByStore(r)
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, http.StatusCreated, CreatedToken{Token: wireToken(t), Secret: secret})
	return nil
}

// listTokens answers GET /api/v1/tokens: a page of the tokens, newest
// first.
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	revoked := r.URL.Query().Get("revoked") == "true"
	limit, err := listPage(r)
	if err != nil {
		return err
	}
	after, err := afterKey(r)
	if err != nil {
		return err
	}
	ts, err := s.opts.Store.ListTokensPage(r.Context(), revoked, after, limit)
	if err != nil {
		return err
	}
	writePage(w, ts, limit, func(t store.Token) string { return pageKey(t.CreatedAt, t.ID) }, wireToken)
	return nil
}

// pageKey is the cursor of a row in a list ordered by a time and an id
// (store.PageKey): opaque to clients.
func pageKey(at time.Time, id string) string {
	b, _ := json.Marshal(store.PageKey{At: at, ID: id})
	return base64.RawURLEncoding.EncodeToString(b)
}

// afterKey reads ?after= of a list ordered by a time and an id: a
// cursor of pageKey, or nil when absent.
func afterKey(r *http.Request) (*store.PageKey, error) {
	v := r.URL.Query().Get("after")
	if v == "" {
		return nil, nil
	}
	var k store.PageKey
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(v) > 200 || json.Unmarshal(b, &k) != nil || k.At.IsZero() || !isUUID(k.ID) {
		return nil, InvalidField("?after", "is not a cursor: take next from the previous page")
	}
	return &k, nil
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	ref, err := pathParam(chi.URLParam(r, "token"))
	if err != nil {
		return err
	}
	t, err := s.opts.Store.RevokeToken(r.Context(), ref)
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"token_id": t.ID, "name": t.Name})
	WriteJSON(w, http.StatusOK, wireToken(t))
	return nil
}

// Whoami is who the caller is, as GET /api/v1/whoami tells it
// (client.Whoami).
type Whoami = client.Whoami

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	es, err := s.visibleEnvironments(r, "")
	if err != nil {
		return err
	}
	out := Whoami{Kind: string(p.Kind), Name: p.Name, Actor: p.Actor(), Role: p.Global().String(),
		Environments: map[string]string{}}
	for _, e := range es {
		out.Environments[e.Name] = p.In(e.ID, e.Name).String()
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

// visibleEnvironments lists the environments (of project, when not "")
// the caller has a role in.
func (s *Server) visibleEnvironments(r *http.Request, project string) ([]store.Environment, error) {
	es, err := s.opts.Store.ListEnvironments(r.Context(), project)
	if err != nil {
		return nil, err
	}
	p := principal(r)
	return slices.DeleteFunc(es, func(e store.Environment) bool { return p.In(e.ID, e.Name) == auth.RoleNone }), nil
}

// auditedByStore notes that the store has written the request's audit
// row with its write (CreateToken does, whoever calls it), so that the
// guard does not write a second one.
func auditedByStore(r *http.Request) {
	if d, ok := r.Context().Value(auditDetailKey{}).(*auditDetail); ok {
		d.byStore = true
	}
}

// noteAudit adds detail to the request's audit entry.
func noteAudit(r *http.Request, v any) {
	if d, ok := r.Context().Value(auditDetailKey{}).(*auditDetail); ok {
		d.v = v
	}
}

// auditQuery reads the audit filters of a request: actor, action
// (exact, or a prefix ending in '.'), since and until (RFC 3339), limit
// and before (the cursor).
func auditQuery(r *http.Request) (store.AuditFilter, error) {
	q := r.URL.Query()
	f := store.AuditFilter{Actor: q.Get("actor"), Action: q.Get("action")}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		t, err := queryTime(r, p.name)
		if err != nil {
			return f, err
		}
		if t != nil {
			*p.dst = *t
		}
	}
	limit, err := queryInt(r, "limit", 100, 1, 1000)
	if err != nil {
		return f, err
	}
	f.Limit = limit
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return f, InvalidField("?before", "must be an audit entry id (a positive whole number)")
		}
		f.Before = n
	}
	return f, nil
}

func (s *Server) writeAudit(ctx context.Context, w http.ResponseWriter, f store.AuditFilter) error {
	es, err := s.opts.Store.ListAudit(ctx, f)
	if err != nil {
		return err
	}
	writePage(w, es, f.Limit, func(e store.AuditEntry) string { return strconv.FormatInt(e.ID, 10) }, wireAuditEntry)
	return nil
}

// listAudit serves GET /api/v1/environments/{env}/audit.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	f, err := auditQuery(r)
	if err != nil {
		return err
	}
	f.EnvironmentID = e.ID
	return s.writeAudit(r.Context(), w, f)
}

// listGlobalAudit serves GET /api/v1/audit: every entry, or with
// ?scope=global those of no environment (tokens, projects).
func (s *Server) listGlobalAudit(w http.ResponseWriter, r *http.Request) error {
	f, err := auditQuery(r)
	if err != nil {
		return err
	}
	switch r.URL.Query().Get("scope") {
	case "", "all":
	case "global":
		f.Global = true
	default:
		return InvalidField("?scope", "must be all or global")
	}
	return s.writeAudit(r.Context(), w, f)
}
