package exec

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/intendhq/intend/adapters"
)

// Attribute names of exec::Command.
const (
	attrName        = "name"
	attrCommand     = "command"
	attrCwd         = "cwd"
	attrEnv         = "env"
	attrCreates     = "creates"
	attrUnless      = "unless"
	attrOnlyIf      = "onlyif"
	attrTimeout     = "timeout"
	attrReturns     = "returns"
	attrUndo        = "undo"
	attrRefreshOnly = "refresh_only"
)

// known lists every attribute, for the message about unknown ones.
var known = []string{attrName, attrCommand, attrCwd, attrEnv, attrCreates, attrUnless, attrOnlyIf,
	attrTimeout, attrReturns, attrUndo, attrRefreshOnly}

const (
	// defaultTimeout bounds each command (guards and undo included) when
	// the resource sets no timeout.
	defaultTimeout = 300 * time.Second
	// maxTimeout is the longest timeout accepted: a day. A longer one is
	// almost certainly a unit mistake (milliseconds for seconds).
	maxTimeout = 24 * time.Hour
)

// cmdline is one command to run: an argv run directly, or a string run by
// /bin/sh -c.
type cmdline struct {
	argv  []string // the program and its arguments (argv form)
	shell string   // the shell script (string form); empty in argv form
}

func (c cmdline) isShell() bool { return c.argv == nil }

// String renders the command for log lines and errors.
func (c cmdline) String() string {
	if c.isShell() {
		return c.shell
	}
	parts := make([]string, len(c.argv))
	for i, a := range c.argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") {
			a = strconv.Quote(a)
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// spec is the validated desired state of one exec::Command.
type spec struct {
	name        string
	command     *cmdline // nil only for a purged resource
	cwd         string
	env         []string // "KEY=value", sorted by key
	creates     string
	unless      *cmdline
	onlyif      *cmdline
	undo        *cmdline
	timeout     time.Duration
	returns     []int
	refreshOnly bool
	purged      bool
}

// guarded reports whether any guard is set.
func (s spec) guarded() bool { return s.creates != "" || s.unless != nil || s.onlyif != nil }

// parseSpec validates the attributes of desired (secret references already
// resolved by the engine). Every problem is reported, in a fixed order, as
// one Permanent error naming the attributes.
func parseSpec(desired adapters.Resource) (spec, error) {
	s := spec{timeout: defaultTimeout, returns: []int{0}, purged: desired.Purged}
	var errs []error
	bad := func(attr, format string, args ...any) {
		errs = append(errs, fmt.Errorf("attribute %q: %s", attr, fmt.Sprintf(format, args...)))
	}
	a := desired.Attributes

	var unknown []string
	for k := range a {
		if !contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		errs = append(errs, fmt.Errorf("unknown attributes %s (%s allows %s)",
			quoteAll(unknown), CommandType, strings.Join(known, ", ")))
	}

	switch v, ok := a[attrName]; {
	case !ok:
		bad(attrName, "is required")
	default:
		n, isString := v.(string)
		if !isString || n == "" {
			bad(attrName, "must be a non-empty string, got %s", describe(v))
			break
		}
		s.name = n
		if id := desired.ID; id.Attribute != "" && id.Attribute != attrName {
			errs = append(errs, fmt.Errorf("resource id names attribute %q, but %s is identified by %q",
				id.Attribute, CommandType, attrName))
		} else if id.Value != "" && id.Value != n {
			errs = append(errs, fmt.Errorf("resource id names %q, but attribute %q is %q", id.Value, attrName, n))
		}
	}

	if v, ok := a[attrCommand]; ok {
		c, err := parseCmdline(v)
		if err != nil {
			bad(attrCommand, "%v", err)
		} else {
			s.command = &c
		}
	} else if !desired.Purged {
		bad(attrCommand, "is required")
	}
	for _, g := range []struct {
		attr string
		dst  **cmdline
	}{{attrUnless, &s.unless}, {attrOnlyIf, &s.onlyif}, {attrUndo, &s.undo}} {
		v, ok := a[g.attr]
		if !ok {
			continue
		}
		c, err := parseCmdline(v)
		if err != nil {
			bad(g.attr, "%v", err)
			continue
		}
		*g.dst = &c
	}

	for _, p := range []struct {
		attr string
		dst  *string
	}{{attrCwd, &s.cwd}, {attrCreates, &s.creates}} {
		v, ok := a[p.attr]
		if !ok {
			continue
		}
		str, isString := v.(string)
		switch {
		case !isString:
			bad(p.attr, "must be an absolute path, got %s", describe(v))
		case !filepath.IsAbs(str):
			bad(p.attr, "%q is not an absolute path", str)
		case strings.ContainsRune(str, 0):
			bad(p.attr, "contains a NUL byte")
		default:
			*p.dst = str
		}
	}

	if v, ok := a[attrEnv]; ok {
		env, err := parseEnv(v)
		if err != nil {
			bad(attrEnv, "%v", err)
		} else {
			s.env = env
		}
	}

	if v, ok := a[attrTimeout]; ok {
		secs, isNum := number(v)
		switch {
		case !isNum:
			bad(attrTimeout, "must be a number of seconds, got %s", describe(v))
		case secs <= 0 || math.IsNaN(secs) || secs > maxTimeout.Seconds():
			bad(attrTimeout, "must be more than 0 and at most %d seconds, got %v", int(maxTimeout.Seconds()), v)
		default:
			s.timeout = time.Duration(secs * float64(time.Second))
		}
	}

	if v, ok := a[attrReturns]; ok {
		codes, err := parseReturns(v)
		if err != nil {
			bad(attrReturns, "%v", err)
		} else {
			s.returns = codes
		}
	}

	if v, ok := a[attrRefreshOnly]; ok {
		b, isBool := v.(bool)
		if !isBool {
			bad(attrRefreshOnly, "must be true or false, got %s", describe(v))
		}
		s.refreshOnly = b
	}

	// Only the guards make a command idempotent: without one, every
	// deploy and every repair would run it again.
	switch {
	case !desired.Purged && !s.refreshOnly && !s.guarded() && s.command != nil:
		errs = append(errs, fmt.Errorf("attribute %q (or %q or %q) is required: without a guard the command "+
			"would run on every deploy and repair; set %q to run it only when a dependency sends an event",
			attrCreates, attrUnless, attrOnlyIf, attrRefreshOnly))
	case desired.Purged && s.undo != nil && !s.guarded():
		errs = append(errs, fmt.Errorf("attribute %q (or %q or %q) is required for %q: without a guard "+
			"the undo would run on every deploy of the purge", attrCreates, attrUnless, attrOnlyIf, attrUndo))
	}

	if len(errs) > 0 {
		return spec{}, adapters.Permanent(fmt.Errorf("invalid %s: %w", CommandType, errors.Join(errs...)))
	}
	return s, nil
}

// parseCmdline accepts a non-empty string (a shell script) or a non-empty
// list of strings whose first element is not empty (an argv).
func parseCmdline(v any) (cmdline, error) {
	switch t := v.(type) {
	case string:
		switch {
		case strings.TrimSpace(t) == "":
			return cmdline{}, errors.New("must not be empty")
		case strings.ContainsRune(t, 0):
			return cmdline{}, errors.New("contains a NUL byte")
		}
		return cmdline{shell: t}, nil
	case []string:
		return argv(t)
	case []any:
		out := make([]string, len(t))
		for i, e := range t {
			s, ok := e.(string)
			if !ok {
				return cmdline{}, fmt.Errorf("element %d must be a string, got %s", i, describe(e))
			}
			out[i] = s
		}
		return argv(out)
	}
	return cmdline{}, fmt.Errorf("must be a string (run by /bin/sh -c) or a list of strings (run directly), got %s",
		describe(v))
}

func argv(a []string) (cmdline, error) {
	if len(a) == 0 || a[0] == "" {
		return cmdline{}, errors.New("the list must start with the program to run")
	}
	for i, s := range a {
		if strings.ContainsRune(s, 0) {
			return cmdline{}, fmt.Errorf("element %d contains a NUL byte", i)
		}
	}
	return cmdline{argv: append([]string(nil), a...)}, nil
}

// parseEnv accepts a map of variable names to string values (secret
// references are resolved before the adapter sees them).
func parseEnv(v any) ([]string, error) {
	vars := map[string]string{}
	switch t := v.(type) {
	case map[string]string:
		for k, val := range t {
			vars[k] = val
		}
	case map[string]any:
		for k, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("the value of %q must be a string, got %s", k, describe(e))
			}
			vars[k] = s
		}
	default:
		return nil, fmt.Errorf("must be a map of variable names to strings, got %s", describe(v))
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return nil, fmt.Errorf("%q is not a variable name (empty, or contains '=' or NUL)", k)
		case strings.ContainsRune(vars[k], 0):
			return nil, fmt.Errorf("the value of %q contains a NUL byte", k)
		}
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

// parseReturns accepts a non-empty list of exit codes (0 to 255).
func parseReturns(v any) ([]int, error) {
	var elems []any
	switch t := v.(type) {
	case []any:
		elems = t
	case []int:
		for _, e := range t {
			elems = append(elems, e)
		}
	default:
		return nil, fmt.Errorf("must be a list of exit codes such as [0, 2], got %s", describe(v))
	}
	if len(elems) == 0 {
		return nil, errors.New("must list at least one exit code")
	}
	out := make([]int, 0, len(elems))
	for _, e := range elems {
		f, ok := number(e)
		if !ok || f != math.Trunc(f) || f < 0 || f > 255 {
			return nil, fmt.Errorf("%v is not an exit code (an integer from 0 to 255)", e)
		}
		out = append(out, int(f))
	}
	return out, nil
}

// number reads the numeric forms attributes arrive in: json.Number from
// the executor, float64 from encoding/json, ints from Go tests.
func number(v any) (float64, bool) {
	switch t := v.(type) {
	case json.Number:
		f, err := t.Float64()
		return f, err == nil
	case float64:
		return t, true
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	}
	return 0, false
}

// describe names the JSON type of v, for messages.
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("%q", t)
	case bool:
		return "a boolean"
	case json.Number, float64, int, int64:
		return fmt.Sprintf("the number %v", t)
	case []any, []string, []int:
		return "a list"
	case map[string]any, map[string]string:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
