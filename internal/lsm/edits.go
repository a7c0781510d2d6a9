package lsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/intendhq/intend/dictpath"
)

// Edit is one dict-path edit of an update (v2): replace, merge (RFC
// 7386) or remove at Target.
type Edit struct {
	EditID    string          `json:"edit_id"`
	Operation string          `json:"operation"`
	Target    string          `json:"target"`
	Value     json.RawMessage `json:"value"`
}

// EditError is an edit that cannot be applied: Index is its place in the
// list, Field the member at fault ("/target", "/value", "/operation"; ""
// for the whole list), Detail says why. Path is true when the edit is
// well formed but its path does not fit the attributes.
type EditError struct {
	Index  int
	Field  string
	Detail string
	Path   bool
	// Message is a sentence naming the edit (and its edit_id), for a
	// problem's detail.
	Message string
}

func (e *EditError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("edit %d%s: %s", e.Index, e.Field, e.Detail)
}

// ApplyEdits applies edits in order to a copy of attrs (not modified);
// the first faulty edit is an *EditError (Index -1: the edits leave
// something other than a dict).
func ApplyEdits(attrs map[string]any, edits []Edit) (map[string]any, error) {
	var doc any = attrs
	if attrs == nil {
		doc = map[string]any{}
	}
	for i, e := range edits {
		name := "edit " + strconv.Itoa(i)
		if e.EditID != "" {
			name += fmt.Sprintf(" (%q)", e.EditID)
		}
		p, err := dictpath.Parse(e.Target)
		if err != nil {
			return nil, &EditError{Index: i, Field: "/target", Detail: err.Error()}
		}
		var value any
		if e.Value != nil {
			dec := json.NewDecoder(bytes.NewReader(e.Value))
			dec.UseNumber()
			if err := dec.Decode(&value); err != nil {
				return nil, &EditError{Index: i, Field: "/value", Detail: "is not JSON"}
			}
		}
		switch e.Operation {
		case "replace", "merge":
			if e.Value == nil {
				return nil, &EditError{Index: i, Field: "/value", Detail: "required for " + e.Operation}
			}
			if e.Operation == "replace" {
				doc, err = dictpath.Replace(doc, p, value)
			} else {
				doc, err = dictpath.Merge(doc, p, value)
			}
		case "remove":
			if e.Value != nil {
				return nil, &EditError{Index: i, Field: "/value", Detail: "remove takes no value"}
			}
			doc, err = dictpath.Remove(doc, p)
		default:
			return nil, &EditError{Index: i, Field: "/operation", Detail: `must be "replace", "merge" or "remove"`}
		}
		if err != nil {
			var pe *dictpath.PathError
			if errors.As(err, &pe) {
				return nil, &EditError{Index: i, Field: "/target", Detail: pe.Error(), Path: true,
					Message: fmt.Sprintf("%s cannot %s at %q: %s", name, e.Operation, e.Target, pe.Error())}
			}
			return nil, err
		}
	}
	out, ok := doc.(map[string]any)
	if !ok {
		return nil, &EditError{Index: -1, Detail: "the attributes must stay a dict",
			Message: "the edits leave the attributes something other than a dict"}
	}
	return out, nil
}

// MergeAttributes is an update (v1): current with the attributes given
// written over it (a new map).
func MergeAttributes(current, given map[string]any) map[string]any {
	next := make(map[string]any, len(current)+len(given))
	maps.Copy(next, current)
	maps.Copy(next, given)
	return next
}

// RestoreAttributes is the update that takes an instance back to the
// attributes then it had at an earlier version: current with every rw+
// attribute as it was then (one it lacked then is removed: its default
// then is its default now). The others cannot have changed, but for the
// rw+ attributes inside an rw embedded entity: every embedded attribute
// (rw or rw+) takes its value then, without the r attributes inside (the
// model computes those again), and an rw one it lacked then stays as it
// is.
func RestoreAttributes(specs []AttributeSpec, current, then map[string]any) map[string]any {
	next := maps.Clone(current)
	if next == nil {
		next = map[string]any{}
	}
	for _, a := range specs {
		if a.Embedded != nil && a.Modifier != ReadOnly {
			if v, ok := then[a.Name]; ok {
				next[a.Name], _ = embeddedWithoutReadOnly(a.Embedded, v)
				continue
			}
		}
		if a.Modifier != ReadWriteAlways {
			continue
		}
		if v, ok := then[a.Name]; ok {
			next[a.Name] = v
		} else {
			delete(next, a.Name)
		}
	}
	return next
}

// Identity is the value of the identity attribute attr in attrs, as the
// store keeps it: a string as it is, anything else as JSON ("" without
// one).
func Identity(attr string, attrs map[string]any) string {
	if attr == "" {
		return ""
	}
	v, ok := attrs[attr]
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
