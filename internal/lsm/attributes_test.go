package lsm

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var vmSpecs = []AttributeSpec{
	{Name: "name", Modifier: ReadWrite, Required: true},
	{Name: "memory", Modifier: ReadWriteAlways, Default: json.RawMessage("2")},
	{Name: "size", Modifier: ReadWriteAlways, Required: true},
	{Name: "zone", Modifier: ReadWrite},
	{Name: "address", Modifier: ReadOnly},
	{Name: "serial", Modifier: ReadOnly, Required: true},
}

func TestParseModifier(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"r", "rw", "rw+"} {
		if m, err := ParseModifier(s); err != nil || string(m) != s {
			t.Errorf("ParseModifier(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "R", "w", "rw+ ", "rwx", "readonly"} {
		if _, err := ParseModifier(s); err == nil {
			t.Errorf("ParseModifier(%q) accepted", s)
		}
	}
}

func TestCheckCreate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		why   string
		attrs map[string]any
		want  []AttributeProblem
	}{
		{"required ones only", map[string]any{"name": "a", "size": "s"}, nil},
		{"every writable one", map[string]any{"name": "a", "size": "s", "memory": 4.0, "zone": "z"}, nil},
		{"a read-only one", map[string]any{"name": "a", "size": "s", "address": "10.0.0.1"},
			[]AttributeProblem{{Attribute: "address", Reason: ReasonReadOnly, Modifier: ReadOnly}}},
		{"an unknown one", map[string]any{"name": "a", "size": "s", "colour": "red"},
			[]AttributeProblem{{Attribute: "colour", Reason: ReasonUnknown}}},
		{"a required one missing", map[string]any{"name": "a"},
			[]AttributeProblem{{Attribute: "size", Reason: ReasonMissing, Modifier: ReadWriteAlways}}},
		{"a required one given as null counts as given", map[string]any{"name": "a", "size": nil}, nil},
		{"everything wrong, sorted", map[string]any{"zz": 1.0, "serial": "x", "address": "y"},
			[]AttributeProblem{
				{Attribute: "address", Reason: ReasonReadOnly, Modifier: ReadOnly},
				{Attribute: "name", Reason: ReasonMissing, Modifier: ReadWrite},
				{Attribute: "serial", Reason: ReasonReadOnly, Modifier: ReadOnly},
				{Attribute: "size", Reason: ReasonMissing, Modifier: ReadWriteAlways},
				{Attribute: "zz", Reason: ReasonUnknown},
			}},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			t.Parallel()
			checkAttributeError(t, CheckCreate(vmSpecs, c.attrs), c.want)
		})
	}
}

func TestCheckUpdate(t *testing.T) {
	t.Parallel()
	current := map[string]any{"name": "a", "size": "s", "memory": json.Number("2"), "address": "10.0.0.1", "serial": "X1",
		"tags": []any{"x"}}
	with := func(k string, v any) map[string]any {
		out := copyDict(current)
		out[k] = v
		return out
	}
	without := func(k string) map[string]any {
		out := copyDict(current)
		delete(out, k)
		return out
	}
	cases := []struct {
		why  string
		next map[string]any
		want []AttributeProblem
	}{
		{"nothing changes", copyDict(current), nil},
		{"numbers equal by value across decoders", with("memory", 2.0), nil},
		{"an rw+ one changes", with("memory", 4.0), nil},
		{"an rw+ one without a requirement is removed", without("memory"), nil},
		{"an rw one changes", with("name", "b"),
			[]AttributeProblem{{Attribute: "name", Reason: ReasonNotUpdatable, Modifier: ReadWrite}}},
		{"an rw one is added", with("zone", "z"),
			[]AttributeProblem{{Attribute: "zone", Reason: ReasonNotUpdatable, Modifier: ReadWrite}}},
		{"an r one changes", with("address", "10.0.0.2"),
			[]AttributeProblem{{Attribute: "address", Reason: ReasonReadOnly, Modifier: ReadOnly}}},
		{"an r one is removed", without("serial"),
			[]AttributeProblem{{Attribute: "serial", Reason: ReasonReadOnly, Modifier: ReadOnly}}},
		{"a required rw+ one is removed", without("size"),
			[]AttributeProblem{{Attribute: "size", Reason: ReasonMissing, Modifier: ReadWriteAlways}}},
		{"an unknown one is added", with("colour", "red"),
			[]AttributeProblem{{Attribute: "colour", Reason: ReasonUnknown}}},
		{"an unknown one already there and unchanged", with("tags", []any{"x"}), nil},
		{"an unknown one already there changes", with("tags", []any{"y"}),
			[]AttributeProblem{{Attribute: "tags", Reason: ReasonUnknown}}},
		{"several, sorted", func() map[string]any {
			m := with("name", "b")
			m["address"] = nil
			m["memory"] = 8.0
			return m
		}(), []AttributeProblem{
			{Attribute: "address", Reason: ReasonReadOnly, Modifier: ReadOnly},
			{Attribute: "name", Reason: ReasonNotUpdatable, Modifier: ReadWrite},
		}},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			t.Parallel()
			checkAttributeError(t, CheckUpdate(vmSpecs, current, c.next), c.want)
		})
	}
}

func checkAttributeError(t *testing.T, err error, want []AttributeProblem) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var ae *AttributeError
	if !errors.As(err, &ae) {
		t.Fatalf("want an *AttributeError, got %v", err)
	}
	if !reflect.DeepEqual(ae.Problems, want) {
		t.Errorf("problems %+v, want %+v", ae.Problems, want)
	}
	for _, p := range want {
		if !strings.Contains(err.Error(), p.Attribute) {
			t.Errorf("the message does not name %s: %v", p.Attribute, err)
		}
	}
}

func TestSameJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a, b any
		same bool
	}{
		{1.0, json.Number("1"), true},
		{json.Number("1e2"), 100.0, true},
		{json.Number("0.1"), 0.1, true},
		{1.0, "1", false},
		{nil, nil, true},
		{nil, false, false},
		{map[string]any{"a": []any{1.0}}, map[string]any{"a": []any{json.Number("1.0")}}, true},
		{map[string]any{"a": 1.0}, map[string]any{"b": 1.0}, false},
		{[]any{1.0, 2.0}, []any{2.0, 1.0}, false},
		{[]any{}, map[string]any{}, false},
	}
	for _, c := range cases {
		if got := sameJSON(c.a, c.b); got != c.same {
			t.Errorf("sameJSON(%#v, %#v) = %v", c.a, c.b, got)
		}
	}
}

// TestWithDefaults: absent attributes get their defaults, given ones and
// r attributes are left alone, the input is not changed.
func TestWithDefaults(t *testing.T) {
	t.Parallel()
	specs := []AttributeSpec{
		{Name: "name", Modifier: ReadWrite, Required: true},
		{Name: "memory", Modifier: ReadWriteAlways, Default: json.RawMessage(`2`)},
		{Name: "tags", Modifier: ReadWriteAlways, Default: json.RawMessage(`["a"]`)},
		{Name: "addr", Modifier: ReadOnly, Default: json.RawMessage(`"x"`)},
		{Name: "broken", Modifier: ReadWrite, Default: json.RawMessage(`{`)},
	}
	in := map[string]any{"name": "web", "tags": []any{}}
	got := WithDefaults(specs, in)
	want := map[string]any{"name": "web", "memory": 2.0, "tags": []any{}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WithDefaults = %v, want %v", got, want)
	}
	if len(in) != 2 {
		t.Errorf("the input was changed: %v", in)
	}
}

// TestReadOnlyAttributes: r attributes are taken out of what a compile
// gets, without touching the input, and picked out of an evaluated
// parameter.
func TestReadOnlyAttributes(t *testing.T) {
	t.Parallel()
	specs := []AttributeSpec{
		{Name: "name", Modifier: ReadWrite},
		{Name: "fqdn", Modifier: ReadOnly},
		{Name: "addr", Modifier: ReadOnly},
	}
	in := map[string]any{"name": "web", "fqdn": "old.example"}
	if got := WithoutReadOnly(specs, in); !reflect.DeepEqual(got, map[string]any{"name": "web"}) || len(in) != 2 {
		t.Errorf("WithoutReadOnly = %v (input now %v)", got, in)
	}
	plain := map[string]any{"name": "web"}
	if got := WithoutReadOnly(specs, plain); !reflect.DeepEqual(got, plain) {
		t.Errorf("WithoutReadOnly without r attributes = %v", got)
	}
	param := map[string]any{"name": "web", "fqdn": "web.example", "memory": 2.0}
	if got := ReadOnlyValues(specs, param); !reflect.DeepEqual(got, map[string]any{"fqdn": "web.example"}) {
		t.Errorf("ReadOnlyValues = %v", got)
	}
	if got := ReadOnlyValues(specs, map[string]any{"name": "web"}); got != nil {
		t.Errorf("ReadOnlyValues without r attributes = %v, want nil", got)
	}
}

// A PUT's set is the client's with the create's defaults and the current
// r values; what it leaves out without a default is gone, and CheckUpdate
// judges the result as it judges a PATCH's.
func TestReplaceAttributes(t *testing.T) {
	t.Parallel()
	specs := []AttributeSpec{
		{Name: "name", Modifier: ReadWrite, Required: true},
		{Name: "size", Modifier: ReadWriteAlways, Default: json.RawMessage(`3`)},
		{Name: "note", Modifier: ReadWriteAlways},
		{Name: "id", Modifier: ReadOnly},
		{Name: "mode", Modifier: ReadWrite, Default: json.RawMessage(`"fast"`)},
	}
	current := map[string]any{"name": "a", "size": 5.0, "note": "hi", "id": 42.0, "mode": "fast"}
	next := ReplaceAttributes(specs, current, map[string]any{"name": "a"})
	want := map[string]any{"name": "a", "size": 3.0, "id": 42.0, "mode": "fast"}
	if !reflect.DeepEqual(next, want) {
		t.Errorf("next = %v, want %v", next, want)
	}
	if err := CheckUpdate(specs, current, next); err != nil {
		t.Errorf("CheckUpdate refused the PUT's set: %v", err)
	}
	if current["note"] != "hi" || len(current) != 5 {
		t.Errorf("current changed: %v", current)
	}
	// A changed rw and an r the client sets are refused like a PATCH's.
	next = ReplaceAttributes(specs, current, map[string]any{"name": "b", "id": 7.0})
	var ae *AttributeError
	if err := CheckUpdate(specs, current, next); !errors.As(err, &ae) || len(ae.Problems) != 2 ||
		ae.Problems[0].Reason != ReasonReadOnly || ae.Problems[1].Reason != ReasonNotUpdatable {
		t.Errorf("CheckUpdate = %v, want id read_only and name not_updatable", err)
	}
}
