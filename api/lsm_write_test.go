package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// TestLSMApplyEdits: the v2 PATCH's edits, applied in order to a copy of
// the current set; a faulty edit is a problem naming its place.
func TestLSMApplyEdits(t *testing.T) {
	t.Parallel()
	current := func() map[string]any {
		return map[string]any{"name": "web", "memory": 2.0,
			"disks": []any{map[string]any{"name": "root", "size": 10.0}}}
	}
	edit := func(op, target, value string) instanceEdit {
		e := instanceEdit{Operation: op, Target: target}
		if value != "" {
			e.Value = json.RawMessage(value)
		}
		return e
	}
	cases := []struct {
		why   string
		edits []instanceEdit
		want  map[string]any
		field string // of the problem's first error; "" when none is wanted
	}{
		{"a replace of a top-level attribute", []instanceEdit{edit("replace", "memory", "4")},
			map[string]any{"name": "web", "memory": json.Number("4"),
				"disks": []any{map[string]any{"name": "root", "size": 10.0}}}, ""},
		{"edits apply in order: a merge into a list element by filter, then a remove",
			[]instanceEdit{edit("merge", "disks[name=root]", `{"size": 20}`), edit("remove", "memory", "")},
			map[string]any{"name": "web", "disks": []any{map[string]any{"name": "root", "size": json.Number("20")}}}, ""},
		{"a replace may set null", []instanceEdit{edit("replace", "memory", "null")},
			map[string]any{"name": "web", "memory": nil,
				"disks": []any{map[string]any{"name": "root", "size": 10.0}}}, ""},
		{"a path into a number", []instanceEdit{edit("replace", "memory", "4"), edit("replace", "memory.gib", "4")},
			nil, "/edit/1/target"},
		{"a path that does not parse", []instanceEdit{edit("replace", "disks[", "4")}, nil, "/edit/0/target"},
		{"replace without a value", []instanceEdit{edit("replace", "memory", "")}, nil, "/edit/0/value"},
		{"remove with a value", []instanceEdit{edit("remove", "memory", "1")}, nil, "/edit/0/value"},
		{"an unknown operation", []instanceEdit{edit("add", "memory", "1")}, nil, "/edit/0/operation"},
		{"a merge of a non-dict", []instanceEdit{edit("merge", "disks[name=root]", "3")}, nil, "/edit/0/target"},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			t.Parallel()
			in := current()
			got, err := applyEdits(in, c.edits)
			if !reflect.DeepEqual(in, current()) {
				t.Errorf("the current set was modified: %v", in)
			}
			if c.field == "" {
				if err != nil || !reflect.DeepEqual(got, c.want) {
					t.Errorf("got %#v, %v; want %#v", got, err, c.want)
				}
				return
			}
			var p *Problem
			if !errors.As(err, &p) || p.Status != 422 || len(p.Errors) == 0 || p.Errors[0].Field != c.field {
				t.Errorf("got %#v, %v; want a 422 at %s", got, err, c.field)
			}
		})
	}
}

// TestLSMKeyedUUID: a create's id derived from its key is a UUID, the
// same for the same key and another for another key or environment.
func TestLSMKeyedUUID(t *testing.T) {
	t.Parallel()
	a := keyedUUID("env1", "vm", "k")
	if !isUUID(a) || a != keyedUUID("env1", "vm", "k") || a == keyedUUID("env1", "vm", "k2") ||
		a == keyedUUID("env2", "vm", "k") {
		t.Errorf("keyed %s", a)
	}
	if r1, r2 := newUUID(), newUUID(); !isUUID(r1) || r1 == r2 || r1[14] != '4' {
		t.Errorf("random %s, %s", r1, r2)
	}
	if !isUUID(a) || a[14] != '8' {
		t.Errorf("keyed %s", a)
	}
}
