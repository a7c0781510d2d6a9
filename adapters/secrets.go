package adapters

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// A secret reference is an attribute value (at any depth) that is an object
// with the single key "secret":
//
//	{"secret": "env:PG_ADMIN_PASSWORD"}   an environment variable of the executor
//	{"secret": "file:pg/admin"}           a file on the executor (relative to its secrets directory)
//
// The desired state in PostgreSQL and everything sent through Temporal
// hold the reference only. The engine resolves it in the executor just
// before calling the adapter, which sees the plain value; the value is
// masked in the diff, the log lines and the facts the attempt records.

// SecretKey is the key of a secret reference object.
const SecretKey = "secret"

// Secrets resolves secret references on an executor.
type Secrets struct {
	// Dir is where relative file references are read from; empty means
	// only absolute file references resolve.
	Dir string
	// LookupEnv reads an environment variable; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// WithSecrets makes the engine resolve secret references with s. Without
// it, references resolve from the environment and absolute file paths.
func WithSecrets(s *Secrets) ContextOption { return func(hc *Context) { hc.secrets = s } }

// IsSecretRef reports whether v is a secret reference, and returns it.
func IsSecretRef(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", false
	}
	ref, ok := m[SecretKey].(string)
	return ref, ok
}

// Lookup returns the value of one reference ("env:NAME" or "file:PATH").
// A file's trailing newline is dropped.
func (s *Secrets) Lookup(ref string) (string, error) {
	kind, name, ok := strings.Cut(ref, ":")
	if !ok || name == "" {
		return "", fmt.Errorf("secret %q: want env:NAME or file:PATH", ref)
	}
	switch kind {
	case "env":
		lookup := os.LookupEnv
		if s != nil && s.LookupEnv != nil {
			lookup = s.LookupEnv
		}
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("secret %s: environment variable %s is not set on this executor", ref, name)
		}
		return v, nil
	case "file":
		path := name
		if !filepath.IsAbs(path) {
			if s == nil || s.Dir == "" {
				return "", fmt.Errorf("secret %s: relative path and this executor has no secrets directory", ref)
			}
			path = filepath.Join(s.Dir, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is already in the message
			}
			return "", fmt.Errorf("secret %s: read %s: %w", ref, path, err)
		}
		return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
	default:
		return "", fmt.Errorf("secret %q: unknown kind %q (want env or file)", ref, kind)
	}
}

// resolveSecrets returns a copy of attrs with every secret reference
// replaced by its value, the names of the top-level attributes that held
// one, and the values (to mask). An unresolvable reference is a permanent
// error naming the attribute: retrying cannot set a variable.
func (s *Secrets) resolve(attrs map[string]any) (map[string]any, map[string]bool, []string, error) {
	var values []string
	var errs []error
	secret := map[string]bool{}
	var walk func(attr string, v any) any
	walk = func(attr string, v any) any {
		if ref, ok := IsSecretRef(v); ok {
			secret[attr] = true
			val, err := s.Lookup(ref)
			if err != nil {
				errs = append(errs, fmt.Errorf("attribute %s: %w", attr, err))
				return nil
			}
			if val != "" {
				values = append(values, val)
			}
			return val
		}
		switch t := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(t))
			for k, e := range t {
				out[k] = walk(attr, e)
			}
			return out
		case []any:
			out := make([]any, len(t))
			for i, e := range t {
				out[i] = walk(attr, e)
			}
			return out
		}
		return v
	}
	out := make(map[string]any, len(attrs))
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Strings(names) // errors in a fixed order
	for _, k := range names {
		out[k] = walk(k, attrs[k])
	}
	if len(errs) > 0 {
		return nil, nil, nil, Permanent(errors.Join(errs...))
	}
	// Longest first, so a secret containing another is masked whole.
	sort.Slice(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
	return out, secret, values, nil
}

// Masked is what a secret value is replaced with in diffs, logs and facts.
const Masked = "********"

// mask replaces every secret value in s.
func mask(s string, values []string) string {
	for _, v := range values {
		s = strings.ReplaceAll(s, v, Masked)
	}
	return s
}

// maskAny returns v with every secret value masked in its strings.
func maskAny(v any, values []string) any {
	if len(values) == 0 {
		return v
	}
	switch t := v.(type) {
	case string:
		return mask(t, values)
	case error:
		return mask(t.Error(), values)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = maskAny(e, values)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = maskAny(e, values)
		}
		return out
	case []string:
		out := make([]string, len(t))
		for i, e := range t {
			out[i] = mask(e, values)
		}
		return out
	}
	return v
}
