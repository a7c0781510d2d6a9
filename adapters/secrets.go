package adapters

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
)

// A secret reference is an attribute value (at any depth) that is an object
// with the single key "secret":
//
//	{"secret": "env:INTEND_SECRET_PG_ADMIN"}   an environment variable of the executor
//	{"secret": "file:pg/admin"}                a file in the executor's secrets directory
//
// The desired state in PostgreSQL and everything sent through Temporal
// hold the reference only. The engine resolves it in the executor just
// before calling the adapter, which sees the plain value; the value is
// masked in the diff, the log lines and the facts the attempt records.
//
// Whoever can release a version chooses the references, so a reference
// reaches only what the executor's operator set aside for secrets: a file
// inside the secrets directory (no absolute path, no "..", no symlink
// out of it), or a variable whose name starts with the secret prefix
// (never the executor's own INTEND_DATABASE_URL or API keys).

// SecretKey is the key of a secret reference object.
const SecretKey = "secret"

// DefaultSecretEnvPrefix is the prefix an env: reference's variable must
// start with when Secrets.EnvPrefix is empty.
const DefaultSecretEnvPrefix = "INTEND_SECRET_"

// Secrets resolves secret references on an executor. A nil *Secrets
// resolves as the zero value does. It is safe for concurrent use when
// LookupEnv is.
type Secrets struct {
	// Dir is the secrets directory: a file: reference names a file
	// inside it, by a relative path, and resolves nowhere else. Empty
	// means no file: reference resolves.
	Dir string
	// EnvPrefix is what the name of an env: reference's variable must
	// start with; empty means DefaultSecretEnvPrefix.
	EnvPrefix string
	// LookupEnv reads an environment variable; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// WithSecrets makes the engine resolve secret references with s. Without
// it, env: references with the default prefix resolve from the process
// environment and no file: reference resolves.
func WithSecrets(s *Secrets) ContextOption { return func(hc *Context) { hc.secrets = s } }

// envPrefix is the prefix env: references must carry.
func (s *Secrets) envPrefix() string {
	if s == nil || s.EnvPrefix == "" {
		return DefaultSecretEnvPrefix
	}
	return s.EnvPrefix
}

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
// A file's trailing newline is dropped. An error never holds a value:
// only the reference, and why it does not resolve.
func (s *Secrets) Lookup(ref string) (string, error) {
	kind, name, ok := strings.Cut(ref, ":")
	if !ok || name == "" {
		return "", fmt.Errorf("secret %q: want env:NAME or file:PATH", ref)
	}
	switch kind {
	case "env":
		if prefix := s.envPrefix(); !strings.HasPrefix(name, prefix) {
			return "", fmt.Errorf("secret %s: refused: only variables whose names start with %s resolve on this executor",
				ref, prefix)
		}
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
		if s == nil || s.Dir == "" {
			return "", fmt.Errorf("secret %s: refused: this executor has no --secrets-dir, so no file: reference resolves", ref)
		}
		if filepath.IsAbs(name) || hasDotDot(name) || !filepath.IsLocal(name) {
			return "", fmt.Errorf("secret %s: refused: want a relative path inside the secrets directory, without .. elements", ref)
		}
		// os.Root confines every step of the lookup, symlinks included,
		// to the directory.
		root, err := os.OpenRoot(s.Dir)
		if err != nil {
			return "", fmt.Errorf("secret %s: secrets directory: %w", ref, err)
		}
		defer root.Close()
		b, err := readRegular(root, name)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is the reference's
			}
			return "", fmt.Errorf("secret %s: read %s in the secrets directory: %w", ref, name, err)
		}
		return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
	default:
		return "", fmt.Errorf("secret %q: unknown kind %q (want env or file)", ref, kind)
	}
}

// MaxSecretFileBytes bounds a file: secret: a larger file is refused
// rather than read into the executor's memory.
const MaxSecretFileBytes = 1 << 20

// errNotRegular is the refusal of a secret that is not a regular file.
var errNotRegular = errors.New("refused: not a regular file")

// readRegular reads name in root if it is a regular file of at most
// MaxSecretFileBytes. A FIFO (or a device) would block the read, and the
// batch with it, until someone writes: the file is opened without
// blocking (O_NONBLOCK makes the open of a FIFO return at once and is
// nothing to a regular file), then the opened file itself is checked
// (fstat), so that no swap between a check and the open can slip a FIFO
// in; symlinks are followed inside root only (os.Root).
func readRegular(root *os.Root, name string) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s)", errNotRegular, fileKind(fi.Mode()))
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSecretFileBytes {
		return nil, fmt.Errorf("refused: larger than %d bytes", MaxSecretFileBytes)
	}
	return b, nil
}

// fileKind names the type of a file that is not regular.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	default:
		return "not a regular file"
	}
}

// hasDotDot reports whether a path has a ".." element, with either
// separator: refused even where it would stay inside the directory, so
// that no reference needs a second look.
func hasDotDot(p string) bool {
	return slices.Contains(strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }), "..")
}

// resolveSecrets returns a copy of attrs with every secret reference
// replaced by its value, the names of the top-level attributes that held
// one, and the values (to mask). An unresolvable reference is a permanent
// error naming the attribute: retrying cannot set a variable.
func (s *Secrets) resolve(attrs map[string]any) (map[string]any, map[string]bool, []string, error) {
	if !hasContainer(attrs) {
		// No map, no list: no reference (most resources). The copy only.
		out := make(map[string]any, len(attrs))
		for k, v := range attrs {
			out[k] = v
		}
		return out, nil, nil, nil
	}
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

// hasContainer reports whether a value of attrs is a map or a list, which
// may hold a secret reference.
func hasContainer(attrs map[string]any) bool {
	for _, v := range attrs {
		switch v.(type) {
		case map[string]any, []any:
			return true
		}
	}
	return false
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
