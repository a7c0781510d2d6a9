package lsm

import (
	"reflect"
	"testing"
)

func attrs(name string, memory float64) map[string]any {
	return map[string]any{"name": name, "memory": memory, "disks": []any{map[string]any{"size": 10.0}}}
}

func TestApply(t *testing.T) {
	t.Parallel()
	c, a, r := attrs("c", 1), attrs("a", 2), attrs("r", 3)
	full := Sets{Candidate: c, Active: a, Rollback: r}
	cases := []struct {
		op   Operation
		in   Sets
		want Sets
	}{
		{ClearCandidate, full, Sets{Active: a, Rollback: r}},
		{ClearActive, full, Sets{Candidate: c, Rollback: r}},
		{ClearRollback, full, Sets{Candidate: c, Active: a}},
		{Promote, full, Sets{Active: c, Rollback: a}},
		{Promote, Sets{Candidate: c}, Sets{Active: c}},
		{Promote, Sets{Active: a}, Sets{Rollback: a}},
		{Rollback, full, Sets{Active: r, Candidate: a}},
		{Rollback, Sets{Active: a}, Sets{Candidate: a}},
		{ClearCandidate, Sets{}, Sets{}},
	}
	for _, tc := range cases {
		before := Sets{Candidate: copyDict(tc.in.Candidate), Active: copyDict(tc.in.Active), Rollback: copyDict(tc.in.Rollback)}
		got := Apply(tc.op, tc.in)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s on %v = %v, want %v", tc.op, tc.in, got, tc.want)
		}
		// The result shares nothing with the input.
		for _, m := range []map[string]any{got.Candidate, got.Active, got.Rollback} {
			if m != nil {
				m["name"] = "changed"
				m["disks"].([]any)[0].(map[string]any)["size"] = 99.0
			}
		}
		if !reflect.DeepEqual(tc.in, before) {
			t.Errorf("%s changed its input: %v, was %v", tc.op, tc.in, before)
		}
	}
}

func TestApplyAll(t *testing.T) {
	t.Parallel()
	c, a := attrs("c", 1), attrs("a", 2)
	got := ApplyAll([]Operation{Promote, ClearRollback}, Sets{Candidate: c, Active: a})
	if want := (Sets{Active: c}); !reflect.DeepEqual(got, want) {
		t.Errorf("promote, clear rollback = %v, want %v", got, want)
	}
	got.Active["name"] = "changed"
	if c["name"] != "c" {
		t.Error("ApplyAll shares maps with its input")
	}
	in := Sets{Candidate: c}
	if got := ApplyAll(nil, in); !reflect.DeepEqual(got, in) {
		t.Errorf("no operations = %v, want %v", got, in)
	}
}

func TestApplyUnknownPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("an unknown operation did not panic")
		}
	}()
	Apply("demote", Sets{})
}
