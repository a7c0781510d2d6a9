// Package rest holds rest::Object, one object behind an HTTP JSON API (a
// RabbitMQ user, an etcd key, an Alertmanager silence), managed by its
// JSON body: created, compared field by field, updated and deleted with
// the methods and URLs the API wants.
//
// The engine compares only the managed fields of the body (JSON
// pointers; by default every leaf of the desired body), so that what the
// server adds (ids, timestamps, links, defaults) never shows as drift.
// Observe reports the desired body with each managed field replaced by
// the server's value, under the one attribute "body", and logs one
// "field differs" line per managed field that differs; write-only fields
// (a password the API only hashes) are sent, never compared.
//
// Requests are bounded per agent and endpoint in the executor process
// (limits: in flight and per second), each by a timeout, and answers by
// max_body and a nesting depth of MaxDepth: a hostile answer is a
// permanent error in bounded memory and time. Errors: 429 and 503 are
// throttling (with the delay of Retry-After, at most MaxRetryAfter),
// other 5xx, 408 and timeouts transient, a server that cannot be reached
// (connection refused, no route, unknown host) unavailable, other 4xx
// permanent, quoting the answer's problem detail (at most MaxDetail
// bytes).
package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/intendhq/intend/adapters"
)

// ObjectType is the resource type of this package.
const ObjectType = "rest::Object"

// Register adds rest::Object to r.
func Register(r *adapters.Registry) { r.Register(ObjectType, Object{}) }

// Object is the handler of rest::Object. Its id is
// rest::Object[<agent>,name=<name>]. Attributes (plain JSON; every
// URL path below is relative to endpoint, and the model escapes what it
// puts in one):
//
//   - name (string, required): the identity, unique per agent.
//   - endpoint (string, required): the API's base URL, http:// or https://,
//     without query or user ("http://127.0.0.1:15672/api").
//   - path (string): the object's own URL path when its identity gives it
//     ("/users/app"); exactly one of path and search. A GET of it
//     answering 404 or 410 is the object absent.
//   - collection (string): where a POST creates the object; required
//     without path (unless purged).
//   - search (object): how the object is found when the server assigns
//     its id. Its fields: path (required) and method ("GET" or "POST",
//     default GET) of the search, body (a POST search's body), items (a
//     JSON pointer to the list in the answer; "" or absent: the answer is
//     the list), match (required: JSON pointer to value; the item with all
//     these values is the object, none is the object absent, several an
//     error), exclude (JSON pointer to a list of
//     values; an item with one of them counts as absent, an expired
//     silence), id (a JSON pointer to the server's id in an item), item
//     (the object's URL path once its id is known, with {id} replaced by
//     the path-escaped id: "/silence/{id}"; needs id), id_from (a JSON
//     pointer to the id in the create answer, logged).
//   - body (object, required unless purged): the desired JSON body.
//   - managed (list of JSON pointers): the fields compared for drift;
//     default every leaf of body (objects recursed, lists and empty
//     objects compared whole). Each must be a field of body.
//   - write_only (object of JSON pointer to value): fields set in the body
//     sent on create and update, never compared, recorded by size and
//     hash only (a password: give it as a secret reference).
//   - create (object): method ("PUT" default with path, "POST" default
//     without, or "PATCH") and path (default path, or collection for a
//     POST).
//   - update (object): format ("full" default: the whole body;
//     "merge-patch": RFC 7396 of the changed fields; "json-patch": RFC
//     6902 of the changed fields), method ("PUT" default for full, "PATCH"
//     for the patches, which need it; or "POST"), path (default the
//     object's URL; {id} is replaced), id_field (a JSON pointer where the
//     server's id is put into a full body; needs search.id).
//   - delete (object): method ("DELETE" default, or "POST"), path (default
//     the object's URL; {id} is replaced), body (sent with it, an object).
//     A 404 or 410 answer counts as deleted.
//   - success (list of int): the statuses that count as success for
//     create, update and delete; default any 2xx.
//   - facts (object of fact name to JSON pointer): fields of the live
//     object published as facts after every successful attempt (an id
//     the server assigned).
//   - auth (object): exactly one of bearer (a token), basic ({user,
//     password}) or header ({name, value}, an API key header); secrets
//     belong in secret references. Recorded by size and hash only.
//   - tls (object): ca (PEM certificates of a private CA, trusted instead
//     of the system's), cert and key (PEM, together: a client certificate
//     for mutual TLS; key normally a secret reference), server_name (the
//     name the certificate must hold). Needs https://. Recorded by size
//     and hash only.
//   - headers (object of header name to string): sent with every request;
//     not secret.
//   - timeout (number): seconds for one request, default 30, at most 3600.
//   - limits (object): in_flight (requests at once, default 16) and rate
//     (requests per second, default 0: no limit), for every object of the
//     agent on the same endpoint in the executor process; the last object
//     seen sets them.
//   - max_body (int): the largest answer read, in bytes (default 8 MiB,
//     at most 256 MiB); a larger one is a permanent error.
type Object struct{}

var (
	_ adapters.Handler        = Object{}
	_ adapters.Validator      = Object{}
	_ adapters.FactDiscoverer = Object{}
	_ adapters.Sensitive      = Object{}
)

// SensitiveAttributes are recorded by size and hash only.
func (Object) SensitiveAttributes() []string { return []string{"auth", "tls", "write_only"} }

// Validate checks the attributes.
func (Object) Validate(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	_, err := parse(desired)
	return err
}

func load(hc *adapters.Context, desired adapters.Resource) (*spec, call, error) {
	s, err := parse(desired)
	if err != nil {
		return nil, call{}, err
	}
	if err := s.checkBody(); err != nil {
		return nil, call{}, err
	}
	return s, call{hc: hc, s: s, agent: desired.ID.Agent}, nil
}

// live is the object as found on the server.
type live struct {
	doc  any
	self string // its URL path, "" when it has none
	id   string // the server's id, "" without search.id
}

// find looks the object up: a GET of path, or the search.
func (c call) find(ctx context.Context) (*live, error) {
	s := c.s
	if s.path != "" {
		r, err := c.do(ctx, "GET", s.path, "", nil)
		if err != nil {
			return nil, err
		}
		if r.status == 404 || r.status == 410 {
			return nil, nil
		}
		if r.status < 200 || r.status > 299 {
			return nil, statusError("GET "+s.path, r)
		}
		doc, err := decodeJSON(r.body)
		if err != nil {
			return nil, adapters.Permanent(fmt.Errorf("GET %s: %d: the answer: %w", s.path, r.status, err))
		}
		return &live{doc: doc, self: s.path}, nil
	}
	q := s.search
	var body any
	if q.body != nil {
		body = q.body
	}
	r, err := c.do(ctx, q.method, q.path, "", body)
	if err != nil {
		return nil, err
	}
	what := q.method + " " + q.path
	if r.status < 200 || r.status > 299 {
		return nil, statusError(what, r)
	}
	doc, err := decodeJSON(r.body)
	if err != nil {
		return nil, adapters.Permanent(fmt.Errorf("%s: %d: the answer: %w", what, r.status, err))
	}
	var list []any
	if v, ok := get(doc, q.items); ok {
		list, ok = v.([]any)
		if !ok && v != nil {
			return nil, adapters.Permanent(fmt.Errorf("%s: the answer has no list at search.items %q", what, q.items))
		}
	} // absent: none (etcd leaves kvs out when nothing matches)
	var found []any
	for _, item := range list {
		if matches(item, q.match) && !excluded(item, q.exclude) {
			found = append(found, item)
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, adapters.Permanent(fmt.Errorf("%s: %d items match search.match: want one", what, len(found)))
	}
	l := &live{doc: found[0]}
	if q.id != "" {
		v, ok := get(found[0], q.id)
		if !ok {
			return nil, adapters.Permanent(fmt.Errorf("%s: the item found has no id at search.id %s", what, q.id))
		}
		if l.id, err = idString(v); err != nil {
			return nil, adapters.Permanent(fmt.Errorf("%s: search.id %s: %w", what, q.id, err))
		}
		if q.item != "" {
			l.self = withID(q.item, l.id)
		}
	}
	return l, nil
}

func idString(v any) (string, error) {
	switch t := v.(type) {
	case string:
		if t == "" {
			return "", errNoID
		}
		return t, nil
	case json.Number:
		return t.String(), nil
	}
	return "", fmt.Errorf("the id is %s, want a string or a number", kind(v))
}

func withID(path, id string) string { return strings.ReplaceAll(path, "{id}", url.PathEscape(id)) }

func equal(a, b any) bool {
	return len(adapters.ComputeDiff(map[string]any{"v": a}, map[string]any{"v": b})) == 0
}

func matches(item any, match map[string]any) bool {
	for p, want := range match {
		got, ok := get(item, p)
		if !ok || !equal(got, want) {
			return false
		}
	}
	return true
}

func excluded(item any, exclude map[string][]any) bool {
	for p, values := range exclude {
		got, ok := get(item, p)
		if !ok {
			continue
		}
		for _, v := range values {
			if equal(got, v) {
				return true
			}
		}
	}
	return false
}

// Observe finds the object and reports its body: the desired one with
// every managed field as the server has it.
func (Object) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	s, c, err := load(hc, desired)
	if err != nil {
		return adapters.Observation{}, err
	}
	l, err := c.find(ctx)
	if err != nil || l == nil {
		return adapters.Observation{}, err
	}
	if s.purged {
		return adapters.Observation{Exists: true}, nil
	}
	body := deepCopy(s.body).(map[string]any)
	for _, p := range s.managedFields() {
		want, _ := get(s.body, p)
		got, ok := get(l.doc, p)
		if ok {
			_ = set(body, p, got)
		} else {
			remove(body, p)
		}
		switch {
		case !ok:
			hc.Info("field differs", "field", p, "from", "(absent)", "to", want)
		case !equal(got, want):
			hc.Info("field differs", "field", p, "from", got, "to", want)
		}
	}
	return adapters.Observation{Exists: true, Attributes: map[string]any{"body": body}}, nil
}

// Diff reports one change per managed field of the body, keyed "body"
// and the field's JSON pointer ("body/definition/max-length"): a dry-run
// and the action log show what differs field by field, and the fields a
// server adds or defaults never appear. A create lists every managed
// field. The engine masks a secret a field holds.
func (Object) Diff(desired adapters.Resource, observed adapters.Observation) adapters.Diff {
	s, err := parse(desired)
	if err != nil {
		// Validated before Observe: not reached; the whole attributes
		// then, as the engine would.
		return adapters.ComputeDiff(desired.Attributes, observed.Attributes)
	}
	var have map[string]any
	if observed.Exists {
		have, _ = observed.Attributes["body"].(map[string]any)
	}
	d := adapters.Diff{}
	for _, p := range s.managedFields() {
		want, wok := get(s.body, p)
		got, gok := get(have, p)
		if wok == gok && (!wok || equal(got, want)) {
			continue
		}
		var c adapters.Change
		if gok {
			c.From = got
		}
		if wok {
			c.To = want
		}
		d["body"+p] = c
	}
	return d
}

func (s *spec) ok(status int) bool {
	if s.success != nil {
		for _, st := range s.success {
			if st == status {
				return true
			}
		}
		return false
	}
	return status >= 200 && status <= 299
}

// Create creates the object. With a POST (or a search), it looks for the
// object first, so that a repeat after a crash does not create a second
// one; found, it is updated if a managed field differs.
func (Object) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, c, err := load(hc, desired)
	if err != nil {
		return err
	}
	if s.create.method != "PUT" || s.search != nil {
		l, err := c.find(ctx)
		if err != nil {
			return err
		}
		if l != nil {
			// Made by an earlier attempt that did not finish, or by
			// someone else: up to date, or updated, not made twice.
			if len(s.changed(l.doc)) == 0 {
				hc.Info("found, nothing to create", "path", l.self)
				return nil
			}
			return c.update(ctx, l)
		}
	}
	what := s.create.method + " " + s.create.path
	r, err := c.do(ctx, s.create.method, s.create.path, "", s.sendBody())
	if err != nil {
		return err
	}
	if !s.ok(r.status) {
		return statusError(what, r)
	}
	args := []any{"method", s.create.method, "path", s.create.path, "status", r.status}
	if s.search != nil && s.search.idFrom != "" {
		if doc, err := decodeJSON(r.body); err == nil {
			if v, ok := get(doc, s.search.idFrom); ok {
				args = append(args, "id", v)
			}
		}
	}
	hc.Info("created", args...)
	return nil
}

// Update sends the change in the object's update format.
func (Object) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) error {
	s, c, err := load(hc, desired)
	if err != nil {
		return err
	}
	if s.update.format == "full" && s.path != "" && s.search == nil {
		// The whole body to a URL known from the identity: nothing of
		// the live object goes into it, so it is not read again (one
		// call, not two, per update).
		return c.update(ctx, &live{self: s.path})
	}
	l, err := c.find(ctx)
	if err != nil {
		return err
	}
	if l == nil { // gone since Observe
		return Object{}.Create(ctx, hc, desired)
	}
	return c.update(ctx, l)
}

func (c call) update(ctx context.Context, l *live) error {
	s := c.s
	path := l.self
	if s.update.path != "" {
		path = s.update.path
	}
	if strings.Contains(path, "{id}") {
		if l.id == "" {
			return attrErr("update.path", "holds {id}, but the object has no id (search.id)")
		}
		path = withID(path, l.id)
	}
	body, contentType, err := s.updateBody(l)
	if err != nil || body == nil {
		return err
	}
	what := s.update.method + " " + path
	r, err := c.do(ctx, s.update.method, path, contentType, body)
	if err != nil {
		return err
	}
	if !s.ok(r.status) {
		return statusError(what, r)
	}
	c.hc.Info("updated", "method", s.update.method, "path", path, "format", s.update.format, "status", r.status)
	return nil
}

// updateBody is what an update sends to the object found as l, in the
// update format, and its content type; nil when a patch has nothing to
// change.
func (s *spec) updateBody(l *live) (any, string, error) {
	switch s.update.format {
	case "merge-patch":
		patch := map[string]any{}
		for _, p := range s.changed(l.doc) {
			v, _ := get(s.body, p)
			_ = set(patch, p, v)
		}
		for _, p := range sortedKeys(s.writeOnly) {
			_ = set(patch, p, s.writeOnly[p])
		}
		if len(patch) == 0 {
			return nil, "", nil
		}
		return patch, "application/merge-patch+json", nil
	case "json-patch":
		ops := []any{}
		add := func(p string, v any) {
			// RFC 6902 adds into an existing object only: add the
			// first missing ancestor whole.
			if q := missingAncestor(l.doc, p); q != "" {
				for _, o := range ops {
					if o.(map[string]any)["path"] == q {
						return // added already, for another field under it
					}
				}
				w, _ := get(s.sendBody(), q)
				ops = append(ops, map[string]any{"op": "add", "path": q, "value": w})
				return
			}
			ops = append(ops, map[string]any{"op": "add", "path": p, "value": v})
		}
		for _, p := range s.changed(l.doc) {
			v, _ := get(s.body, p)
			if _, ok := get(l.doc, p); ok {
				ops = append(ops, map[string]any{"op": "replace", "path": p, "value": v})
			} else {
				add(p, v)
			}
		}
		for _, p := range sortedKeys(s.writeOnly) {
			add(p, s.writeOnly[p])
		}
		if len(ops) == 0 {
			return nil, "", nil
		}
		return ops, "application/json-patch+json", nil
	}
	b := s.sendBody()
	if s.update.idField != "" {
		if err := set(b, s.update.idField, l.id); err != nil {
			return nil, "", attrErr("update.id_field", "%v", err)
		}
	}
	return b, "", nil
}

// missingAncestor returns the shortest proper prefix of pointer p that
// doc lacks, or "".
func missingAncestor(doc any, p string) string {
	toks, err := parsePointer(p)
	if err != nil {
		return ""
	}
	prefix := ""
	for _, t := range toks[:len(toks)-1] {
		prefix += "/" + escapeToken(t)
		if _, ok := get(doc, prefix); !ok {
			return prefix
		}
	}
	return ""
}

// changed returns the managed fields whose value on the server (doc)
// is not the desired one.
func (s *spec) changed(doc any) []string {
	var out []string
	for _, p := range s.managedFields() {
		want, _ := get(s.body, p)
		got, ok := get(doc, p)
		if !ok || !equal(got, want) {
			out = append(out, p)
		}
	}
	return out
}

// Delete deletes the object; one already gone is left alone.
func (Object) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, c, err := load(hc, desired)
	if err != nil {
		return err
	}
	var l *live
	if s.path != "" && s.search == nil {
		// The URL is the identity's: a 404 or 410 says it is gone
		// already, so it is not read first (one call, not two).
		l = &live{self: s.path}
	} else if l, err = c.find(ctx); err != nil || l == nil {
		return err
	}
	path := l.self
	if s.del.path != "" {
		path = s.del.path
	}
	if strings.Contains(path, "{id}") {
		if l.id == "" {
			return attrErr("delete.path", "holds {id}, but the object has no id (search.id)")
		}
		path = withID(path, l.id)
	}
	var body any
	if s.del.body != nil {
		body = s.del.body
	}
	r, err := c.do(ctx, s.del.method, path, "", body)
	if err != nil {
		return err
	}
	if r.status != 404 && r.status != 410 && !s.ok(r.status) {
		return statusError(s.del.method+" "+path, r)
	}
	hc.Info("deleted", "method", s.del.method, "path", path, "status", r.status)
	return nil
}

// DiscoverFacts publishes the fields named by facts, read from the
// object as the attempt left it.
func (Object) DiscoverFacts(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, c, err := load(hc, desired)
	if err != nil || len(s.facts) == 0 {
		return err
	}
	l, err := c.find(ctx)
	if err != nil || l == nil {
		return err
	}
	for _, name := range sortedKeys(s.facts) {
		if v, ok := get(l.doc, s.facts[name]); ok {
			hc.SetFact(name, v)
		}
	}
	return nil
}
