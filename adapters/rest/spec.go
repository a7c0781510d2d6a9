package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/intendhq/intend/adapters"
)

// Defaults and bounds of the attributes.
const (
	DefaultTimeout  = 30 * time.Second
	MaxTimeout      = time.Hour
	DefaultInFlight = 16
	MaxInFlight     = 1024
	DefaultMaxBody  = 8 << 20
	MaxMaxBody      = 256 << 20
	// MaxRetryAfter caps the delay a server's Retry-After asks for.
	MaxRetryAfter = 10 * time.Minute
	// MaxDetail bounds the problem detail of an error response quoted in
	// an error.
	MaxDetail = 4 << 10
)

// The patterns the CUE package uses too (internal/compiler/std/rest).
var (
	endpointRE = regexp.MustCompile(`^https?://[^/?#@\s]+(/[^?#\s]*)?$`)
	pathRE     = regexp.MustCompile(`^/[^#\s]*$`)
	pointerRE  = regexp.MustCompile(`^(/([^~]|~[01])*)+$`)
	pointer0RE = regexp.MustCompile(`^(/([^~]|~[01])*)*$`) // "" allowed: the whole document
	headerRE   = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// spec is a parsed rest::Object.
type spec struct {
	name       string
	endpoint   string // without a trailing /
	path       string
	collection string
	search     *search
	body       map[string]any
	managed    []string
	writeOnly  map[string]any
	create     op
	update     updateOp
	del        deleteOp
	success    []int
	facts      map[string]string
	auth       auth
	tls        tlsSpec
	headers    map[string]string
	timeout    time.Duration
	inFlight   int
	rate       float64
	maxBody    int64
	purged     bool
}

type search struct {
	path    string
	method  string
	body    map[string]any
	items   string
	match   map[string]any
	exclude map[string][]any
	id      string
	item    string
	idFrom  string
}

type op struct{ method, path string }

type updateOp struct {
	method, format, path, idField string
}

type deleteOp struct {
	method, path string
	body         map[string]any
}

type auth struct {
	bearer            string
	user, password    string
	basic             bool
	header, headerVal string
}

type tlsSpec struct {
	ca, cert, key, serverName string
}

// attrErr is a permanent error naming the attribute.
func attrErr(attr, format string, args ...any) error {
	return adapters.Permanent(fmt.Errorf("attribute %s: %s", attr, fmt.Sprintf(format, args...)))
}

var topLevel = []string{"name", "endpoint", "path", "collection", "search", "body", "managed", "write_only",
	"create", "update", "delete", "success", "facts", "auth", "tls", "headers", "timeout", "limits", "max_body"}

// fields checks that obj (the value of attr) is an object holding only
// the given keys.
func fields(attr string, v any, keys ...string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, attrErr(attr, "want an object, got %s", kind(v))
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(keys, k) {
			return nil, attrErr(attr, "unknown field %q (want %s)", k, strings.Join(keys, ", "))
		}
	}
	return m, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	default:
		return "a number"
	}
}

func str(attr string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", attrErr(attr, "want a string, got %s", kind(v))
	}
	return s, nil
}

func matching(attr string, v any, re *regexp.Regexp, what string) (string, error) {
	s, err := str(attr, v)
	if err != nil {
		return "", err
	}
	if !re.MatchString(s) {
		return "", attrErr(attr, "%q is not %s", s, what)
	}
	return s, nil
}

func number(attr string, v any) (float64, error) {
	var f float64
	switch n := v.(type) {
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, attrErr(attr, "bad number %s", n)
		}
	case float64:
		f = n
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	default:
		return 0, attrErr(attr, "want a number, got %s", kind(v))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, attrErr(attr, "bad number")
	}
	return f, nil
}

func integer(attr string, v any, min, max int64) (int64, error) {
	f, err := number(attr, v)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) {
		return 0, attrErr(attr, "want an integer, got %v", f)
	}
	if f < float64(min) || f > float64(max) {
		return 0, attrErr(attr, "%v is out of range [%d, %d]", f, min, max)
	}
	return int64(f), nil
}

func oneOf(attr string, v any, allowed ...string) (string, error) {
	s, err := str(attr, v)
	if err != nil {
		return "", err
	}
	if !slices.Contains(allowed, s) {
		return "", attrErr(attr, "%q is not one of %s", s, strings.Join(allowed, ", "))
	}
	return s, nil
}

func pointers(attr string, v any) ([]string, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, attrErr(attr, "want a list of JSON pointers, got %s", kind(v))
	}
	out := make([]string, 0, len(l))
	for i, e := range l {
		p, err := matching(fmt.Sprintf("%s[%d]", attr, i), e, pointerRE, "a JSON pointer to a field (/a/b)")
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, p) {
			return nil, attrErr(attr, "%s twice", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// parse checks the attributes of a rest::Object and returns its spec.
// Everything is checked but that the managed and write_only pointers fit
// the body (checkBody), which Observe checks too.
func parse(r adapters.Resource) (*spec, error) {
	a := r.Attributes
	for _, k := range sortedKeys(a) {
		if !slices.Contains(topLevel, k) {
			return nil, attrErr(k, "unknown attribute")
		}
	}
	s := &spec{purged: r.Purged, timeout: DefaultTimeout, inFlight: DefaultInFlight, maxBody: DefaultMaxBody}
	var err error
	if s.name, err = str("name", a["name"]); err != nil {
		return nil, err
	}
	if s.name == "" {
		return nil, attrErr("name", "empty")
	}
	if r.ID.Attribute != "name" || r.ID.Value != s.name {
		return nil, attrErr("name", "%q is not the id's (%s): want the id rest::Object[<agent>,name=%s]", s.name, r.ID, s.name)
	}
	if s.endpoint, err = matching("endpoint", a["endpoint"], endpointRE, "an http:// or https:// URL without query, fragment or user"); err != nil {
		return nil, err
	}
	if _, err := url.Parse(s.endpoint); err != nil {
		return nil, attrErr("endpoint", "%v", err)
	}
	s.endpoint = strings.TrimRight(s.endpoint, "/")
	if v, ok := a["path"]; ok {
		if s.path, err = matching("path", v, pathRE, "a path starting with /"); err != nil {
			return nil, err
		}
	}
	if v, ok := a["collection"]; ok {
		if s.collection, err = matching("collection", v, pathRE, "a path starting with /"); err != nil {
			return nil, err
		}
	}
	if v, ok := a["search"]; ok {
		if s.search, err = parseSearch(v); err != nil {
			return nil, err
		}
	}
	switch {
	case s.path == "" && s.search == nil:
		return nil, attrErr("path", "want path or search: how the object is found")
	case s.path != "" && s.search != nil:
		return nil, attrErr("search", "want path or search, not both")
	case s.path == "" && s.collection == "" && !s.purged:
		return nil, attrErr("collection", "required without path: where a POST creates the object")
	}
	if v, ok := a["body"]; ok {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, attrErr("body", "want an object, got %s", kind(v))
		}
		s.body = m
	} else if !s.purged {
		return nil, attrErr("body", "required")
	}
	if v, ok := a["managed"]; ok {
		if s.managed, err = pointers("managed", v); err != nil {
			return nil, err
		}
		if len(s.managed) == 0 {
			return nil, attrErr("managed", "empty: leave it out to manage every field of body")
		}
	}
	if v, ok := a["write_only"]; ok {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, attrErr("write_only", "want an object of JSON pointer to value, got %s", kind(v))
		}
		for _, p := range sortedKeys(m) {
			if !pointerRE.MatchString(p) {
				return nil, attrErr("write_only", "%q is not a JSON pointer to a field (/a/b)", p)
			}
		}
		s.writeOnly = m
	}
	if err := s.parseOps(a); err != nil {
		return nil, err
	}
	if v, ok := a["success"]; ok {
		l, ok := v.([]any)
		if !ok || len(l) == 0 {
			return nil, attrErr("success", "want a non-empty list of HTTP statuses")
		}
		for i, e := range l {
			n, err := integer(fmt.Sprintf("success[%d]", i), e, 200, 399)
			if err != nil {
				return nil, err
			}
			s.success = append(s.success, int(n))
		}
	}
	if v, ok := a["facts"]; ok {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, attrErr("facts", "want an object of fact name to JSON pointer, got %s", kind(v))
		}
		s.facts = map[string]string{}
		for _, k := range sortedKeys(m) {
			if k == "" {
				return nil, attrErr("facts", "a fact without a name")
			}
			if s.facts[k], err = matching("facts."+k, m[k], pointer0RE, "a JSON pointer"); err != nil {
				return nil, err
			}
		}
	}
	if v, ok := a["auth"]; ok {
		if err := s.parseAuth(v); err != nil {
			return nil, err
		}
	}
	if v, ok := a["tls"]; ok {
		m, err := fields("tls", v, "ca", "cert", "key", "server_name")
		if err != nil {
			return nil, err
		}
		for k, dst := range map[string]*string{"ca": &s.tls.ca, "cert": &s.tls.cert, "key": &s.tls.key, "server_name": &s.tls.serverName} {
			if e, ok := m[k]; ok {
				if *dst, err = str("tls."+k, e); err != nil {
					return nil, err
				}
				if *dst == "" {
					return nil, attrErr("tls."+k, "empty")
				}
			}
		}
		if (s.tls.cert == "") != (s.tls.key == "") {
			return nil, attrErr("tls", "cert and key go together")
		}
		if !strings.HasPrefix(s.endpoint, "https://") {
			return nil, attrErr("tls", "needs an https:// endpoint")
		}
	}
	if v, ok := a["headers"]; ok {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, attrErr("headers", "want an object of header name to value, got %s", kind(v))
		}
		s.headers = map[string]string{}
		for _, k := range sortedKeys(m) {
			if !headerRE.MatchString(k) {
				return nil, attrErr("headers", "%q is not a header name", k)
			}
			if s.headers[k], err = str("headers."+k, m[k]); err != nil {
				return nil, err
			}
			if strings.ContainsAny(s.headers[k], "\r\n\x00") {
				return nil, attrErr("headers."+k, "holds a line break or NUL")
			}
		}
	}
	if v, ok := a["timeout"]; ok {
		f, err := number("timeout", v)
		if err != nil {
			return nil, err
		}
		if f <= 0 || f > MaxTimeout.Seconds() {
			return nil, attrErr("timeout", "%v is not in (0, %v] seconds", f, MaxTimeout.Seconds())
		}
		s.timeout = time.Duration(f * float64(time.Second))
	}
	if v, ok := a["limits"]; ok {
		m, err := fields("limits", v, "in_flight", "rate")
		if err != nil {
			return nil, err
		}
		if e, ok := m["in_flight"]; ok {
			n, err := integer("limits.in_flight", e, 1, MaxInFlight)
			if err != nil {
				return nil, err
			}
			s.inFlight = int(n)
		}
		if e, ok := m["rate"]; ok {
			if s.rate, err = number("limits.rate", e); err != nil {
				return nil, err
			}
			if s.rate < 0 || s.rate > 1e6 {
				return nil, attrErr("limits.rate", "%v is not in [0, 1000000] requests per second", s.rate)
			}
		}
	}
	if v, ok := a["max_body"]; ok {
		if s.maxBody, err = integer("max_body", v, 1024, MaxMaxBody); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func parseSearch(v any) (*search, error) {
	m, err := fields("search", v, "path", "method", "body", "items", "match", "exclude", "id", "item", "id_from")
	if err != nil {
		return nil, err
	}
	s := &search{method: "GET"}
	if s.path, err = matching("search.path", m["path"], pathRE, "a path starting with /"); err != nil {
		return nil, err
	}
	if e, ok := m["method"]; ok {
		if s.method, err = oneOf("search.method", e, "GET", "POST"); err != nil {
			return nil, err
		}
	}
	if e, ok := m["body"]; ok {
		b, ok := e.(map[string]any)
		if !ok {
			return nil, attrErr("search.body", "want an object, got %s", kind(e))
		}
		if s.method != "POST" {
			return nil, attrErr("search.body", `needs method "POST"`)
		}
		s.body = b
	}
	if e, ok := m["items"]; ok {
		if s.items, err = matching("search.items", e, pointer0RE, "a JSON pointer"); err != nil {
			return nil, err
		}
	}
	mt, ok := m["match"].(map[string]any)
	if !ok || len(mt) == 0 {
		return nil, attrErr("search.match", "required: an object of JSON pointer to the value the object has there")
	}
	for _, p := range sortedKeys(mt) {
		if !pointerRE.MatchString(p) {
			return nil, attrErr("search.match", "%q is not a JSON pointer to a field (/a/b)", p)
		}
	}
	s.match = mt
	if e, ok := m["exclude"]; ok {
		ex, ok := e.(map[string]any)
		if !ok {
			return nil, attrErr("search.exclude", "want an object of JSON pointer to a list of values, got %s", kind(e))
		}
		s.exclude = map[string][]any{}
		for _, p := range sortedKeys(ex) {
			if !pointerRE.MatchString(p) {
				return nil, attrErr("search.exclude", "%q is not a JSON pointer to a field (/a/b)", p)
			}
			l, ok := ex[p].([]any)
			if !ok || len(l) == 0 {
				return nil, attrErr("search.exclude", "%s: want a non-empty list of values", p)
			}
			s.exclude[p] = l
		}
	}
	if e, ok := m["id"]; ok {
		if s.id, err = matching("search.id", e, pointerRE, "a JSON pointer to a field (/a/b)"); err != nil {
			return nil, err
		}
	}
	if e, ok := m["item"]; ok {
		if s.item, err = matching("search.item", e, pathRE, "a path starting with /"); err != nil {
			return nil, err
		}
		if !strings.Contains(s.item, "{id}") {
			return nil, attrErr("search.item", "%q does not hold {id}", s.item)
		}
		if s.id == "" {
			return nil, attrErr("search.id", "required with search.item")
		}
	}
	if e, ok := m["id_from"]; ok {
		if s.idFrom, err = matching("search.id_from", e, pointer0RE, "a JSON pointer"); err != nil {
			return nil, err
		}
		if s.id == "" {
			return nil, attrErr("search.id", "required with search.id_from")
		}
	}
	return s, nil
}

func (s *spec) parseOps(a map[string]any) error {
	var err error
	s.create = op{method: "PUT", path: s.path}
	if s.path == "" {
		s.create = op{method: "POST", path: s.collection}
	}
	if v, ok := a["create"]; ok {
		m, err := fields("create", v, "method", "path")
		if err != nil {
			return err
		}
		if e, ok := m["method"]; ok {
			if s.create.method, err = oneOf("create.method", e, "PUT", "POST", "PATCH"); err != nil {
				return err
			}
		}
		if e, ok := m["path"]; ok {
			if s.create.path, err = matching("create.path", e, pathRE, "a path starting with /"); err != nil {
				return err
			}
		} else if s.create.method == "POST" && s.collection != "" {
			s.create.path = s.collection
		}
	}
	if s.create.path == "" && !s.purged {
		return attrErr("create", "no path to create the object at: give path, collection or create.path")
	}
	s.update = updateOp{format: "full"}
	if v, ok := a["update"]; ok {
		m, err := fields("update", v, "method", "format", "path", "id_field")
		if err != nil {
			return err
		}
		if e, ok := m["format"]; ok {
			if s.update.format, err = oneOf("update.format", e, "full", "merge-patch", "json-patch"); err != nil {
				return err
			}
		}
		if e, ok := m["method"]; ok {
			if s.update.method, err = oneOf("update.method", e, "PUT", "PATCH", "POST"); err != nil {
				return err
			}
		}
		if e, ok := m["path"]; ok {
			if s.update.path, err = matching("update.path", e, pathRE, "a path starting with /"); err != nil {
				return err
			}
		}
		if e, ok := m["id_field"]; ok {
			if s.update.idField, err = matching("update.id_field", e, pointerRE, "a JSON pointer to a field (/a/b)"); err != nil {
				return err
			}
			if s.search == nil || s.search.id == "" {
				return attrErr("update.id_field", "needs search.id: the server's id of the object")
			}
		}
	}
	if s.update.method == "" {
		s.update.method = "PUT"
		if s.update.format != "full" {
			s.update.method = "PATCH"
		}
	}
	if s.update.format != "full" && s.update.method != "PATCH" {
		return attrErr("update.method", "%s with format %s: a patch is sent with PATCH", s.update.method, s.update.format)
	}
	s.del = deleteOp{method: "DELETE"}
	if v, ok := a["delete"]; ok {
		m, err := fields("delete", v, "method", "path", "body")
		if err != nil {
			return err
		}
		if e, ok := m["method"]; ok {
			if s.del.method, err = oneOf("delete.method", e, "DELETE", "POST"); err != nil {
				return err
			}
		}
		if e, ok := m["path"]; ok {
			if s.del.path, err = matching("delete.path", e, pathRE, "a path starting with /"); err != nil {
				return err
			}
		}
		if e, ok := m["body"]; ok {
			b, ok := e.(map[string]any)
			if !ok {
				return attrErr("delete.body", "want an object, got %s", kind(e))
			}
			s.del.body = b
		}
	}
	self := s.path != "" || (s.search != nil && s.search.item != "")
	if !self && s.update.path == "" {
		return attrErr("update.path", "required when the object has no URL of its own (no path, no search.item)")
	}
	if !self && s.del.path == "" {
		return attrErr("delete.path", "required when the object has no URL of its own (no path, no search.item)")
	}
	return err
}

func (s *spec) parseAuth(v any) error {
	m, err := fields("auth", v, "bearer", "basic", "header")
	if err != nil {
		return err
	}
	if len(m) != 1 {
		return attrErr("auth", "want exactly one of bearer, basic, header")
	}
	if e, ok := m["bearer"]; ok {
		if s.auth.bearer, err = str("auth.bearer", e); err != nil {
			return err
		}
		if s.auth.bearer == "" || strings.ContainsAny(s.auth.bearer, "\r\n\x00") {
			return attrErr("auth.bearer", "empty or holds a line break")
		}
	}
	if e, ok := m["basic"]; ok {
		b, err := fields("auth.basic", e, "user", "password")
		if err != nil {
			return err
		}
		if s.auth.user, err = str("auth.basic.user", b["user"]); err != nil {
			return err
		}
		if s.auth.password, err = str("auth.basic.password", b["password"]); err != nil {
			return err
		}
		if s.auth.user == "" || strings.Contains(s.auth.user, ":") {
			return attrErr("auth.basic.user", "empty or holds a colon")
		}
		s.auth.basic = true
	}
	if e, ok := m["header"]; ok {
		h, err := fields("auth.header", e, "name", "value")
		if err != nil {
			return err
		}
		if s.auth.header, err = matching("auth.header.name", h["name"], headerRE, "a header name"); err != nil {
			return err
		}
		if s.auth.headerVal, err = str("auth.header.value", h["value"]); err != nil {
			return err
		}
		if s.auth.headerVal == "" || strings.ContainsAny(s.auth.headerVal, "\r\n\x00") {
			return attrErr("auth.header.value", "empty or holds a line break")
		}
	}
	return nil
}

// checkBody checks the pointers that must fit the body: every managed one
// names a field of it, and write_only ones can be placed in it.
func (s *spec) checkBody() error {
	if s.purged {
		return nil
	}
	for _, p := range s.managed {
		if _, ok := get(s.body, p); !ok {
			return attrErr("managed", "%s is not a field of body", p)
		}
	}
	for _, p := range sortedKeys(s.writeOnly) {
		if slices.Contains(s.managed, p) {
			return attrErr("write_only", "%s is managed too: a write-only field is never compared", p)
		}
		if err := set(deepCopy(s.body).(map[string]any), p, s.writeOnly[p]); err != nil {
			return attrErr("write_only", "%v", err)
		}
	}
	return nil
}

// managedFields are the pointers compared for drift.
func (s *spec) managedFields() []string {
	if s.managed != nil {
		return s.managed
	}
	return leaves(s.body)
}

// sendBody is the body sent on create and full update: the desired body
// with the write-only fields set.
func (s *spec) sendBody() map[string]any {
	b := deepCopy(s.body).(map[string]any)
	for _, p := range sortedKeys(s.writeOnly) {
		_ = set(b, p, s.writeOnly[p]) // checked by checkBody
	}
	return b
}

var errNoID = errors.New("no id")
