package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/internal/textdiff"
)

// Bounds of what an action record keeps of a change: a file's content may
// be 16 MiB, and the record is read back by the dry-run report, the
// resource's history and the CLI.
const (
	// inlineText is the longest string recorded as it is.
	inlineText = 1 << 10
	// inlineValue is the longest JSON of another value (a list, an
	// object) recorded as it is.
	inlineValue = 16 << 10
	// diffText is the longest string a diff is computed for; beyond,
	// sizes and hashes only.
	diffText = 4 << 20
	// The diff of a change: lines of context, and its bounds.
	diffContext  = 3
	diffMaxLines = 200
	diffMaxBytes = 16 << 10
)

// recordedChange is a change of one attribute as an action record keeps
// it when its values are text of several lines, large, or sensitive.
// Other changes are kept as adapters.Change ({"from", "to"}) is.
//
// from and to stay the values, or null for an absent side, unless a value
// is beyond inlineText (a string) or inlineValue (another value, by its
// JSON) or sensitive: then it is a short summary, "(N bytes, sha256:…)" or
// "(sensitive)", and from_bytes/from_sha256 (to_…) describe the value
// itself: a string's bytes, another value's JSON. A summarised or
// sensitive change has them for each side present.
type recordedChange struct {
	From any `json:"from"`
	To   any `json:"to"`
	// Diff is the unified diff from from to to (hunks only, no file
	// headers), within diffMaxLines and diffMaxBytes; when cut, its last
	// line says how many lines were left out and DiffTruncated is set.
	// Absent for a value that is not text, sensitive, beyond diffText or
	// too different to diff within textdiff's bounds.
	Diff          string `json:"diff,omitempty"`
	DiffTruncated bool   `json:"diff_truncated,omitempty"`
	Sensitive     bool   `json:"sensitive,omitempty"`
	// SensitiveOutput marks the change of an attribute the adapter
	// declares a sensitive diff (adapters.SensitiveDiffs): the server
	// shows it only to the environment's authors and admins.
	SensitiveOutput bool   `json:"sensitive_output,omitempty"`
	FromBytes       *int   `json:"from_bytes,omitempty"`
	FromSHA256      string `json:"from_sha256,omitempty"`
	ToBytes         *int   `json:"to_bytes,omitempty"`
	ToSHA256        string `json:"to_sha256,omitempty"`
}

// sensitiveMarker stands for a sensitive value in a recorded change.
const sensitiveMarker = "(sensitive)"

// recordChanges returns the changes of an attempt as its action record
// keeps them. d comes from adapters.Run, with secret values already
// masked; s tells the attributes the adapter declared sensitive, and
// those whose diffs it declared sensitive outputs.
func recordChanges(d adapters.Diff, s sensitivity) map[string]any {
	out := make(map[string]any, len(d))
	for name, c := range d {
		out[name] = recordChange(c, s.hashOnly(name))
		if s.output(name) && !hasSecretRef(c.To) { // a masked secret shows nothing
			out[name] = markOutput(out[name])
		}
	}
	return out
}

// markOutput marks a recorded change as a sensitive output.
func markOutput(rec any) any {
	switch r := rec.(type) {
	case recordedChange:
		r.SensitiveOutput = true
		return r
	case adapters.Change:
		return recordedChange{From: r.From, To: r.To, SensitiveOutput: true}
	}
	return rec
}

// recordChange bounds one change (see recordedChange).
func recordChange(c adapters.Change, sensitive bool) any {
	if hasSecretRef(c.To) {
		// The engine masked it: the reference, and "********" for the
		// value found, say all there is to say.
		return c
	}
	from, to := sideOf(c.From), sideOf(c.To)
	if sensitive {
		r := recordedChange{Sensitive: true}
		r.From, r.FromBytes, r.FromSHA256 = from.summary(sensitiveMarker)
		r.To, r.ToBytes, r.ToSHA256 = to.summary(sensitiveMarker)
		return r
	}
	large := from.large() || to.large()
	text := (from.isText || from.absent) && (to.isText || to.absent)
	if !large && !(text && (strings.Contains(from.data, "\n") || strings.Contains(to.data, "\n"))) {
		return c
	}
	r := recordedChange{From: c.From, To: c.To}
	if large {
		r.From, r.FromBytes, r.FromSHA256 = from.summary("")
		r.To, r.ToBytes, r.ToSHA256 = to.summary("")
		if !from.large() {
			r.From = c.From
		}
		if !to.large() {
			r.To = c.To
		}
	}
	if text && len(from.data) <= diffText && len(to.data) <= diffText {
		// "" and true: too different to diff; the hashes tell.
		r.Diff, r.DiffTruncated = textdiff.Unified(from.data, to.data, diffContext, diffMaxLines, diffMaxBytes)
		if r.Diff == "" {
			r.DiffTruncated = false
		}
	}
	return r
}

// side is one side of a change: a string as it is, another value as its
// JSON.
type side struct {
	data   string
	isText bool
	absent bool
}

func sideOf(v any) side {
	switch t := v.(type) {
	case nil:
		return side{absent: true}
	case string:
		return side{data: t, isText: true}
	}
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprint(v))
	}
	return side{data: string(b)}
}

// large reports whether the side is beyond what a record keeps as it is.
func (s side) large() bool {
	if s.isText {
		return len(s.data) > inlineText
	}
	return len(s.data) > inlineValue
}

// summary returns what stands for the side in a record (marker, or a
// default naming size and hash when marker is ""), its size and its hash;
// nil for an absent side.
func (s side) summary(marker string) (any, *int, string) {
	if s.absent {
		return nil, nil, ""
	}
	sum := sha256.Sum256([]byte(s.data))
	h := hex.EncodeToString(sum[:])
	n := len(s.data)
	if marker == "" {
		marker = fmt.Sprintf("(%d bytes, sha256:%s…)", n, h[:12])
	}
	return marker, &n, h
}

// hasSecretRef reports whether v holds a secret reference at any depth.
func hasSecretRef(v any) bool {
	if _, ok := adapters.IsSecretRef(v); ok {
		return true
	}
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			if hasSecretRef(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasSecretRef(e) {
				return true
			}
		}
	}
	return false
}

// sensitivity is what the adapter of a resource declares of its
// attributes: hashOnly (adapters.Sensitive) are recorded by size and hash,
// output (adapters.SensitiveDiffs) are marked as sensitive outputs.
type sensitivity struct {
	hashOnly, output func(string) bool
}

// sensitivityOf tells what h, the adapter of resource rid, declares (nil:
// nothing). An adapter that panics there has every attribute taken for
// sensitive, in both senses: the record then holds no value, and not
// even a hash for readers below author.
func (e *Executor) sensitivityOf(rid string, h adapters.Handler) (s sensitivity) {
	none := func(string) bool { return false }
	defer func() {
		if p := recover(); p != nil {
			if e.Log != nil {
				e.Log.Error("adapter panicked", "resource_id", rid, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
			all := func(string) bool { return true }
			s = sensitivity{all, all}
		}
	}()
	s = sensitivity{none, none}
	if d, ok := h.(adapters.Sensitive); ok {
		s.hashOnly = setOf(d.SensitiveAttributes())
	}
	if d, ok := h.(adapters.SensitiveDiffs); ok {
		s.output = setOf(d.SensitiveDiffAttributes())
	}
	return s
}

// setOf is membership in names.
func setOf(names []string) func(string) bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return func(name string) bool { return m[name] }
}
