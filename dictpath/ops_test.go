package dictpath_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/intendhq/intend/dictpath"
)

// decode decodes JSON as the REST layer would, with numbers as float64 or,
// with useNumber, as json.Number.
func decode(t testing.TB, s string, useNumber bool) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	if useNumber {
		dec.UseNumber()
	}
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

// decodings runs f once with float64 numbers and once with json.Number.
func decodings(t *testing.T, f func(t *testing.T, useNumber bool)) {
	t.Run("float64", func(t *testing.T) { t.Parallel(); f(t, false) })
	t.Run("json.Number", func(t *testing.T) { t.Parallel(); f(t, true) })
}

// scribble modifies every dict and list inside v in place, to show that a
// result shares none of them with the input.
func scribble(v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			scribble(x)
		}
		v["\x00scribbled"] = true
	case []any:
		for i, x := range v {
			scribble(x)
			v[i] = "scribbled"
		}
	}
}

// unchanged fails t when doc no longer equals the JSON it was decoded from,
// after scribbling over out.
func unchanged(t *testing.T, doc, out any, src string, useNumber bool) {
	t.Helper()
	if want := decode(t, src, useNumber); !reflect.DeepEqual(doc, want) {
		t.Fatalf("the input was modified:\n got %#v\nwant %#v", doc, want)
	}
	scribble(out)
	if want := decode(t, src, useNumber); !reflect.DeepEqual(doc, want) {
		t.Fatalf("the result shares a dict or list with the input")
	}
}

const inventory = `{
	"name": "svc",
	"port": 80,
	"tags": ["a", "b"],
	"items": [
		{"name": "x", "size": 1},
		{"name": "y", "size": 2, "opt": null},
		{"name": "z", "size": 2},
		"loose",
		{"name": 80, "id": true}
	],
	"dup": [{"k": 1}, {"k": 1}],
	"a.b": {"c[1]": "esc"},
	"": {"": "empty"},
	"nested": {"deep": {"list": [{"id": "1", "v": {"w": 0.1}}]}}
}`

func TestGet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		want string // JSON; "" when absent
		why  string
	}{
		{".", inventory, "the root is the document"},
		{"name", `"svc"`, "a member"},
		{"items[name=x].size", `1`, "a filter"},
		{"items[name=y].opt", `null`, "a null member is present"},
		{`items[opt=\0].name`, `"y"`, `\0 matches null`},
		{"items[name=80].id", `true`, "a number matches its text"},
		{"items[name=8e1].id", `true`, "a number matches an equal number"},
		{"items[name=80.0].id", `true`, "a number matches an equal decimal"},
		{"items[id=true].name", `80`, "a bool matches its text"},
		{"items[size=2,name=z]", `{"name": "z", "size": 2}`, "several filters all match"},
		{"items[size=2]", "", "a filter matching two elements selects nothing"},
		{"items[name=w]", "", "a filter matching no element"},
		{"items[3]", `"loose"`, "an index"},
		{"items[5]", "", "an index past the end"},
		{"tags[0]", `"a"`, "an index into a list of strings"},
		{"tags[k=a]", "", "a filter never matches a string element"},
		{"name.x", "", "a key into a string"},
		{"name[0]", "", "an index into a string"},
		{"items.name", "", "a key into a list"},
		{"nested[k=v]", "", "a filter into a dict"},
		{`a\.b.c\[1\]`, `"esc"`, "escaped keys"},
		{`\0.\0`, `"empty"`, "empty keys"},
		{"nested.deep.list[id=1].v.w", `0.1`, "deep"},
		{"nested.deep.list[v=1]", "", "a dict matches no filter value"},
		{"missing", "", "an absent member"},
		{"missing.x", "", "below an absent member"},
		{"dup[k=1]", "", "identical elements are ambiguous"},
		{"dup[1].k", `1`, "an index tells identical elements apart"},
	}
	decodings(t, func(t *testing.T, useNumber bool) {
		doc := decode(t, inventory, useNumber)
		for _, tt := range tests {
			got, ok := dictpath.Get(doc, dictpath.MustParse(tt.path))
			if tt.want == "" {
				if ok {
					t.Errorf("Get(%s) = %v, want nothing (%s)", tt.path, got, tt.why)
				}
				continue
			}
			if want := decode(t, tt.want, useNumber); !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("Get(%s) = %#v, %v; want %#v (%s)", tt.path, got, ok, want, tt.why)
			}
		}
	})
}

func TestFilterValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value, member string // filter value as written, member as JSON
		float, number bool   // match with float64, with json.Number
		why           string
	}{
		{"80", `80`, true, true, "a number and its text"},
		{"80", `"80"`, true, true, "a string and its text"},
		{"80", `80.0`, true, true, "an equal decimal"},
		{"80", `8e1`, true, true, "an equal exponent form"},
		{"80.0", `80`, true, true, "the filter's decimal"},
		{"80", `"80.0"`, false, false, "strings are compared as text"},
		{"80", `81`, false, false, "another number"},
		{"0.1", `0.1`, true, true, "a float64 by its shortest form"},
		{"5E-1", `0.5`, true, true, "an upper-case exponent"},
		{"1e0000000001", `10`, true, true, "leading zeros in an exponent"},
		{"-0", `0`, true, true, "zero has no sign"},
		{"0", `-0.0`, true, true, "negative zero"},
		{"-1.5", `-1.5`, true, true, "negative numbers"},
		{"1.5", `-1.5`, false, false, "the sign counts"},
		{"12345678901234567891", `12345678901234567891`, false, true, "float64 lost the last digits"},
		{"12345678901234567000", `12345678901234567891`, true, false, "but its shortest form matches"},
		{"0x10", `16`, false, false, "hexadecimal is not JSON"},
		{"+1", `1`, false, false, "a plus sign is not JSON"},
		{"1.", `1`, false, false, "a trailing point is not JSON"},
		{".5", `0.5`, false, false, "a leading point is not JSON"},
		{"true", `true`, true, true, "a bool"},
		{"true", `"true"`, true, true, "a string true"},
		{"false", `true`, false, false, "the other bool"},
		{"True", `true`, false, false, "bools are lower case"},
		{"null", `null`, false, false, `null is written \0`},
		{`\0`, `null`, true, true, "null"},
		{`\0`, `"null"`, false, false, `\0 is not the string null`},
		{`\0`, `""`, false, false, `\0 is not the empty string`},
		{"", `""`, true, true, "the empty string"},
		{"", `null`, false, false, "the empty value is not null"},
		{"1", `[1]`, false, false, "lists match nothing"},
		{"1", `{"a": 1}`, false, false, "dicts match nothing"},
		{"é", `"é"`, true, true, "non-ASCII"},
		{`a\,b`, `"a,b"`, true, true, "an escaped comma"},
	}
	for _, tt := range tests {
		path := dictpath.MustParse("l[k=" + tt.value + "]")
		for _, useNumber := range []bool{false, true} {
			want := tt.float
			if useNumber {
				want = tt.number
			}
			doc := decode(t, `{"l": [{"k": `+tt.member+`}]}`, useNumber)
			if _, got := dictpath.Get(doc, path); got != want {
				t.Errorf("k=%s against %s (json.Number %v): match %v, want %v (%s)", tt.value, tt.member, useNumber, got, want, tt.why)
			}
		}
	}
	// A number too large for float64, as json.Number only.
	doc := map[string]any{"l": []any{map[string]any{"k": json.Number("1e400")}}}
	for _, v := range []string{"1e400", "10e399", "1E+400"} {
		if _, ok := dictpath.Get(doc, dictpath.MustParse("l[k="+v+"]")); !ok {
			t.Errorf("k=%s does not match json.Number 1e400", v)
		}
	}
	// Exponents beyond what canonical forms handle compare as text.
	doc = map[string]any{"l": []any{map[string]any{"k": json.Number("1e9999999999")}}}
	if _, ok := dictpath.Get(doc, dictpath.MustParse("l[k=1e9999999999]")); !ok {
		t.Error("a huge exponent does not match its own text")
	}
	if _, ok := dictpath.Get(doc, dictpath.MustParse("l[k=10e9999999998]")); ok {
		t.Error("a huge exponent matched another spelling")
	}
}

func TestFind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		want []string // concrete paths
		why  string
	}{
		{".", []string{"."}, "the root"},
		{"*", []string{`\0`, `a\.b`, "dup", "items", "name", "nested", "port", "tags"}, "members sorted by key"},
		{"*.*", []string{`\0.\0`, `a\.b.c\[1\]`, "nested.deep"}, "members of members"},
		{"items[*].name", []string{"items[0].name", "items[1].name", "items[2].name", "items[4].name"}, "elements without the member are skipped"},
		{"items[name=*]", []string{"items[0]", "items[1]", "items[2]", "items[4]"}, "elements that have the member"},
		{"items[opt=*]", []string{"items[1]"}, "a null member is present"},
		{"items[size=2]", []string{"items[1]", "items[2]"}, "a filter may match several elements"},
		{"items[size=2,name=z]", []string{"items[2]"}, "filters combined"},
		{"*[k=1]", []string{"dup[0]", "dup[1]"}, "a filter in every member"},
		{"*[0]", []string{"dup[0]", "items[0]", "tags[0]"}, "an index in every member holding a list"},
		{"tags[*]", []string{"tags[0]", "tags[1]"}, "every element"},
		{"nested.*.list[*].v.w", []string{"nested.deep.list[0].v.w"}, "deep"},
		{"name.*", nil, "no members in a string"},
		{"missing.*", nil, "no member"},
		{"items[*].size.*", nil, "no members in numbers"},
		{"items[3]", []string{"items[3]"}, "an exact path"},
	}
	decodings(t, func(t *testing.T, useNumber bool) {
		doc := decode(t, inventory, useNumber)
		for _, tt := range tests {
			w, err := dictpath.ParseWild(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			matches := dictpath.Find(doc, w)
			var got []string
			for _, m := range matches {
				got = append(got, m.Path.String())
				if v, ok := dictpath.Get(doc, m.Path); !ok || !reflect.DeepEqual(v, m.Value) {
					t.Errorf("Find(%s): Get(%s) = %v, %v; want %v", tt.path, m.Path, v, ok, m.Value)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Find(%s) = %q, want %q (%s)", tt.path, got, tt.want, tt.why)
			}
		}
	})
}

// editCase is one Replace, Merge or Remove on a document.
type editCase struct {
	doc   string
	path  string
	value string // JSON, for Replace and Merge
	want  string // JSON of the result, when there is no error
	err   error  // the kind of *PathError
	at    string // its At
	why   string
}

func runEdits(t *testing.T, op string, tests []editCase) {
	decodings(t, func(t *testing.T, useNumber bool) {
		for _, tt := range tests {
			doc := decode(t, tt.doc, useNumber)
			p := dictpath.MustParse(tt.path)
			var out any
			var err error
			switch op {
			case "replace":
				out, err = dictpath.Replace(doc, p, decode(t, tt.value, useNumber))
			case "merge":
				out, err = dictpath.Merge(doc, p, decode(t, tt.value, useNumber))
			case "remove":
				out, err = dictpath.Remove(doc, p)
			}
			if tt.err != nil {
				var pe *dictpath.PathError
				if !errors.As(err, &pe) || !errors.Is(err, tt.err) || pe.At.String() != tt.at || pe.Op != op || !pe.Path.Equal(p) {
					t.Errorf("%s %s in %s: (%v, %#v), want a *PathError wrapping %v at %s (%s)", op, tt.path, tt.doc, out, err, tt.err, tt.at, tt.why)
				} else if out != nil {
					t.Errorf("%s %s: a result %v with an error", op, tt.path, out)
				}
				unchanged(t, doc, nil, tt.doc, useNumber)
				continue
			}
			if err != nil {
				t.Errorf("%s %s in %s: %v (%s)", op, tt.path, tt.doc, err, tt.why)
				continue
			}
			if want := decode(t, tt.want, useNumber); !reflect.DeepEqual(out, want) {
				t.Errorf("%s %s in %s = %#v, want %#v (%s)", op, tt.path, tt.doc, out, want, tt.why)
			}
			unchanged(t, doc, out, tt.doc, useNumber)
		}
	})
}

func TestReplace(t *testing.T) {
	t.Parallel()
	const items = `{"items": [{"name": "x", "size": 1}, {"name": "y"}, "loose"], "s": "str", "n": null}`
	runEdits(t, "replace", []editCase{
		{doc: `{"a": 1}`, path: "a", value: `2`, want: `{"a": 2}`, why: "an existing member"},
		{doc: `{}`, path: "a.b.c", value: `1`, want: `{"a": {"b": {"c": 1}}}`, why: "absent dicts are created"},
		{doc: `{"a": {"x": 1}}`, path: "a.b", value: `[1, {"c": null}]`, want: `{"a": {"x": 1, "b": [1, {"c": null}]}}`, why: "a value with lists and null"},
		{doc: `{"a": 1}`, path: ".", value: `[1]`, want: `[1]`, why: "the root"},
		{doc: `"str"`, path: ".", value: `{}`, want: `{}`, why: "the root of any type"},
		{doc: `{"a": 1}`, path: "a", value: `null`, want: `{"a": null}`, why: "null is a value, not a removal"},
		{doc: items, path: "items[name=x].size", value: `5`, want: `{"items": [{"name": "x", "size": 5}, {"name": "y"}, "loose"], "s": "str", "n": null}`, why: "through a filter"},
		{doc: items, path: "items[name=w].size", value: `3`, want: `{"items": [{"name": "x", "size": 1}, {"name": "y"}, "loose", {"name": "w", "size": 3}], "s": "str", "n": null}`, why: "a filter matching nothing appends its members"},
		{doc: `{}`, path: "items[name=w].size", value: `3`, want: `{"items": [{"name": "w", "size": 3}]}`, why: "an absent list is created"},
		{doc: `{}`, path: "ports[port=80].proto", value: `"tcp"`, want: `{"ports": [{"port": "80", "proto": "tcp"}]}`, why: "created members are strings"},
		{doc: `{}`, path: `opts[v=\0].x`, value: `1`, want: `{"opts": [{"v": null, "x": 1}]}`, why: "a null filter creates null"},
		{doc: `{}`, path: `l[b=2,a=1,\0=].c`, value: `1`, want: `{"l": [{"a": "1", "b": "2", "": "", "c": 1}]}`, why: "every filter's member is created"},
		{doc: `{"l": [{"k": "a,b.c"}]}`, path: `l[k=a\,b.c].x`, value: `1`, want: `{"l": [{"k": "a,b.c", "x": 1}]}`, why: "escapes in a filter value"},
		{doc: `{"ports": [{"port": 80}]}`, path: "ports[port=80].proto", value: `"udp"`, want: `{"ports": [{"port": 80, "proto": "udp"}]}`, why: "a number member is found by its text"},
		{doc: items, path: "items[name=x]", value: `{"name": "x", "size": 9}`, want: `{"items": [{"name": "x", "size": 9}, {"name": "y"}, "loose"], "s": "str", "n": null}`, why: "a whole element"},
		{doc: items, path: "items[name=w]", value: `{"name": "w", "size": 9}`, want: `{"items": [{"name": "x", "size": 1}, {"name": "y"}, "loose", {"name": "w", "size": 9}], "s": "str", "n": null}`, why: "a whole new element is appended"},
		{doc: `{}`, path: "ports[port=80]", value: `{"port": 80}`, want: `{"ports": [{"port": 80}]}`, why: "a typed element is created whole"},
		{doc: items, path: "items[name=x].name", value: `"q"`, want: `{"items": [{"name": "q", "size": 1}, {"name": "y"}, "loose"], "s": "str", "n": null}`, why: "renaming through the filtered member"},
		{doc: items, path: "items[1].size", value: `7`, want: `{"items": [{"name": "x", "size": 1}, {"name": "y", "size": 7}, "loose"], "s": "str", "n": null}`, why: "through an index"},
		{doc: items, path: "items[2]", value: `"tight"`, want: `{"items": [{"name": "x", "size": 1}, {"name": "y"}, "tight"], "s": "str", "n": null}`, why: "an element by index"},
		{doc: `{"a.b": {"c[1]": 1}}`, path: `a\.b.c\[1\]`, value: `2`, want: `{"a.b": {"c[1]": 2}}`, why: "escaped keys"},
		{doc: `{}`, path: `\0.\0`, value: `1`, want: `{"": {"": 1}}`, why: "empty keys"},
		{doc: `{"n": 1.5}`, path: "n", value: `12345678901234567891`, want: `{"n": 12345678901234567891}`, why: "numbers are kept as decoded"},

		{doc: items, path: "items[name=x]", value: `{"size": 9}`, err: dictpath.ErrValue, at: "items[name=x]", why: "a whole element must keep matching its filter"},
		{doc: items, path: "items[name=w]", value: `"w"`, err: dictpath.ErrValue, at: "items[name=w]", why: "a new element must match its filter"},
		{doc: items, path: "items[9]", value: `1`, err: dictpath.ErrIndex, at: "items", why: "an index past the end"},
		{doc: items, path: "items[3]", value: `1`, err: dictpath.ErrIndex, at: "items", why: "the index just past the end"},
		{doc: `{}`, path: "items[0].a", value: `1`, err: dictpath.ErrIndex, at: "items", why: "an index into an absent list"},
		{doc: `{"d": [{"k": 1}, {"k": "1"}]}`, path: "d[k=1].x", value: `1`, err: dictpath.ErrAmbiguous, at: "d", why: "a filter matching two elements"},
		{doc: items, path: "s.x", value: `1`, err: dictpath.ErrType, at: "s", why: "a key into a string"},
		{doc: items, path: "n.x", value: `1`, err: dictpath.ErrType, at: "n", why: "a key into null"},
		{doc: items, path: "items.x", value: `1`, err: dictpath.ErrType, at: "items", why: "a key into a list"},
		{doc: items, path: "items[2].x", value: `1`, err: dictpath.ErrType, at: "items[2]", why: "a key into a string element"},
		{doc: items, path: "s[0]", value: `1`, err: dictpath.ErrType, at: "s", why: "an index into a string"},
		{doc: `{"d": {"k": 1}}`, path: "d[k=1]", value: `{"k": 1}`, err: dictpath.ErrType, at: "d", why: "a filter into a dict"},
		{doc: `[]`, path: "a", value: `1`, err: dictpath.ErrType, at: ".", why: "a key into a list root"},
		{doc: `{"ports": [{"port": 80}]}`, path: "ports[port=80].port.x", value: `1`, err: dictpath.ErrType, at: "ports[port=80].port", why: "a key into a filtered member"},
		{doc: `{}`, path: "ports[port=80].port.x", value: `1`, err: dictpath.ErrType, at: "ports[port=80].port", why: "a key into a created member"},
	})
}

func TestMerge(t *testing.T) {
	t.Parallel()
	const doc = `{"a": {"b": {"c": 1, "d": [1, 2]}, "e": "x"}, "s": "str", "n": null, "l": [{"k": "v", "x": 1}]}`
	runEdits(t, "merge", []editCase{
		{doc: doc, path: ".", value: `{"s": null, "t": 1}`, want: `{"a": {"b": {"c": 1, "d": [1, 2]}, "e": "x"}, "n": null, "l": [{"k": "v", "x": 1}], "t": 1}`, why: "the root; null removes a member"},
		{doc: doc, path: "a", value: `{"b": {"c": null, "f": 2}, "e": {"g": 3, "h": null}}`, want: `{"a": {"b": {"d": [1, 2], "f": 2}, "e": {"g": 3}}, "s": "str", "n": null, "l": [{"k": "v", "x": 1}]}`, why: "dicts merge recursively and replace what is not a dict"},
		{doc: doc, path: "a.b", value: `{"d": [3]}`, want: `{"a": {"b": {"c": 1, "d": [3]}, "e": "x"}, "s": "str", "n": null, "l": [{"k": "v", "x": 1}]}`, why: "lists are replaced whole"},
		{doc: doc, path: "a.b", value: `{}`, want: doc, why: "an empty patch"},
		{doc: doc, path: "a.z", value: `{"y": {"x": null}, "w": null}`, want: `{"a": {"b": {"c": 1, "d": [1, 2]}, "e": "x", "z": {"y": {}}}, "s": "str", "n": null, "l": [{"k": "v", "x": 1}]}`, why: "an absent target is created, as RFC 7386 does"},
		{doc: doc, path: "l[k=v]", value: `{"x": null, "y": 2}`, want: `{"a": {"b": {"c": 1, "d": [1, 2]}, "e": "x"}, "s": "str", "n": null, "l": [{"k": "v", "y": 2}]}`, why: "into a filtered element"},
		{doc: doc, path: "l[k=w]", value: `{"y": 2}`, want: `{"a": {"b": {"c": 1, "d": [1, 2]}, "e": "x"}, "s": "str", "n": null, "l": [{"k": "v", "x": 1}, {"k": "w", "y": 2}]}`, why: "a new element starts with the filter's members"},
		{doc: doc, path: "l[k=v]", value: `{"k": "u"}`, want: `{"a": {"b": {"c": 1, "d": [1, 2]}, "e": "x"}, "s": "str", "n": null, "l": [{"k": "u", "x": 1}]}`, why: "a patch may rename the element"},
		{doc: doc, path: "l[0]", value: `{"x": 2}`, want: `{"a": {"b": {"c": 1, "d": [1, 2]}, "e": "x"}, "s": "str", "n": null, "l": [{"k": "v", "x": 2}]}`, why: "into an element by index"},

		{doc: doc, path: "a", value: `[1]`, err: dictpath.ErrValue, at: "a", why: "the patch is a dict"},
		{doc: doc, path: "a", value: `null`, err: dictpath.ErrValue, at: "a", why: "a null patch is not a removal"},
		{doc: doc, path: "s", value: `{}`, err: dictpath.ErrType, at: "s", why: "the target is a dict"},
		{doc: doc, path: "n", value: `{}`, err: dictpath.ErrType, at: "n", why: "a null target is not absent"},
		{doc: doc, path: "a.b.d", value: `{}`, err: dictpath.ErrType, at: "a.b.d", why: "a list target"},
		{doc: doc, path: "l[1]", value: `{}`, err: dictpath.ErrIndex, at: "l", why: "an index past the end"},
		{doc: `"str"`, path: ".", value: `{}`, err: dictpath.ErrType, at: ".", why: "a root that is not a dict"},
	})
}

func TestRemove(t *testing.T) {
	t.Parallel()
	const doc = `{"a": {"b": 1, "c": 2}, "s": "str", "n": null, "l": [{"k": "v"}, {"k": "w"}, {"k": "w"}, 3]}`
	runEdits(t, "remove", []editCase{
		{doc: doc, path: "a.b", want: `{"a": {"c": 2}, "s": "str", "n": null, "l": [{"k": "v"}, {"k": "w"}, {"k": "w"}, 3]}`, why: "a member"},
		{doc: doc, path: "a", want: `{"s": "str", "n": null, "l": [{"k": "v"}, {"k": "w"}, {"k": "w"}, 3]}`, why: "a whole dict"},
		{doc: doc, path: "n", want: `{"a": {"b": 1, "c": 2}, "s": "str", "l": [{"k": "v"}, {"k": "w"}, {"k": "w"}, 3]}`, why: "a null member"},
		{doc: doc, path: "l[k=v]", want: `{"a": {"b": 1, "c": 2}, "s": "str", "n": null, "l": [{"k": "w"}, {"k": "w"}, 3]}`, why: "an element by filter"},
		{doc: doc, path: "l[3]", want: `{"a": {"b": 1, "c": 2}, "s": "str", "n": null, "l": [{"k": "v"}, {"k": "w"}, {"k": "w"}]}`, why: "an element by index"},
		{doc: doc, path: "l[0].k", want: `{"a": {"b": 1, "c": 2}, "s": "str", "n": null, "l": [{}, {"k": "w"}, {"k": "w"}, 3]}`, why: "a member of an element"},
		{doc: doc, path: "a.x", want: doc, why: "an absent member"},
		{doc: doc, path: "x.y.z", want: doc, why: "below an absent member"},
		{doc: doc, path: "x[k=v].y", want: doc, why: "in an absent list"},
		{doc: doc, path: "l[k=u]", want: doc, why: "a filter matching nothing"},
		{doc: doc, path: "l[4]", want: doc, why: "an index past the end"},
		{doc: doc, path: "l[k=u].y", want: doc, why: "below a filter matching nothing"},

		{doc: doc, path: ".", err: dictpath.ErrRoot, at: ".", why: "the root"},
		{doc: doc, path: "l[k=w]", err: dictpath.ErrAmbiguous, at: "l", why: "a filter matching two elements"},
		{doc: doc, path: "s.x", err: dictpath.ErrType, at: "s", why: "through a string"},
		{doc: doc, path: "n.x", err: dictpath.ErrType, at: "n", why: "through null"},
		{doc: doc, path: "a[0]", err: dictpath.ErrType, at: "a", why: "an index into a dict"},
		{doc: doc, path: "l.k", err: dictpath.ErrType, at: "l", why: "a key into a list"},
		{doc: doc, path: "l[3].x", err: dictpath.ErrType, at: "l[3]", why: "a key into a number element"},
		{doc: `[1]`, path: "a", err: dictpath.ErrType, at: ".", why: "a key into a list root"},
	})
}

func TestPathErrorText(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"items": map[string]any{}}
	_, err := dictpath.Replace(doc, dictpath.MustParse("items[name=x].size"), 1.0)
	want := "dictpath: replace items[name=x].size: at items: found a dict, want a list"
	if err == nil || err.Error() != want {
		t.Errorf("Replace error = %v, want %s", err, want)
	}
}

// TestReplaceCopiesValue checks that the value given to Replace and Merge is
// not shared with the result.
func TestReplaceCopiesValue(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"replace", "merge"} {
		value := map[string]any{"l": []any{map[string]any{"k": "v"}}}
		var out any
		var err error
		if op == "replace" {
			out, err = dictpath.Replace(map[string]any{}, dictpath.MustParse("a"), value)
		} else {
			out, err = dictpath.Merge(map[string]any{}, dictpath.MustParse("a"), value)
		}
		if err != nil {
			t.Fatal(err)
		}
		scribble(value)
		want := map[string]any{"a": map[string]any{"l": []any{map[string]any{"k": "v"}}}}
		if !reflect.DeepEqual(out, want) {
			t.Errorf("%s: the result changed with the value: %v", op, out)
		}
	}
}

// TestNilContainers checks that dicts and lists built in Go as nil are
// treated as empty and never written to.
func TestNilContainers(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"m": map[string]any(nil), "l": []any(nil)}
	out, err := dictpath.Replace(doc, dictpath.MustParse("m.a"), "x")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := dictpath.Get(out, dictpath.MustParse("m.a")); got != "x" {
		t.Errorf("Replace into a nil dict: %v", out)
	}
	out, err = dictpath.Replace(doc, dictpath.MustParse("l[k=v].a"), "x")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := dictpath.Get(out, dictpath.MustParse("l[k=v].a")); got != "x" {
		t.Errorf("Replace into a nil list: %v", out)
	}
	out, err = dictpath.Merge(doc, dictpath.MustParse("m"), map[string]any{"a": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := dictpath.Get(out, dictpath.MustParse("m.a")); got != "x" {
		t.Errorf("Merge into a nil dict: %v", out)
	}
	if _, err := dictpath.Remove(doc, dictpath.MustParse("m.a")); err != nil {
		t.Errorf("Remove from a nil dict: %v", err)
	}
}

// TestPatchSequence applies a PATCH-like list of edits, keeping every
// intermediate document as a rollback would.
func TestPatchSequence(t *testing.T) {
	t.Parallel()
	var doc any = decode(t, `{"name": "svc", "ports": [{"port": 80, "proto": "tcp"}]}`, true)
	var history []any
	edits := []struct {
		op, path, value string
	}{
		{"replace", "ports[port=443].proto", `"tcp"`},
		{"merge", "ports[port=80]", `{"proto": null, "tls": false}`},
		{"replace", "owner.team", `"net"`},
		{"remove", "name", ``},
		{"remove", "ports[port=443]", ``},
	}
	for _, e := range edits {
		history = append(history, doc)
		var err error
		p := dictpath.MustParse(e.path)
		switch e.op {
		case "replace":
			doc, err = dictpath.Replace(doc, p, decode(t, e.value, true))
		case "merge":
			doc, err = dictpath.Merge(doc, p, decode(t, e.value, true))
		case "remove":
			doc, err = dictpath.Remove(doc, p)
		}
		if err != nil {
			t.Fatalf("%s %s: %v", e.op, e.path, err)
		}
	}
	got, _ := json.Marshal(doc)
	if want := `{"owner":{"team":"net"},"ports":[{"port":80,"tls":false}]}`; string(got) != want {
		t.Errorf("after the edits: %s, want %s", got, want)
	}
	want := []string{
		`{"name":"svc","ports":[{"port":80,"proto":"tcp"}]}`,
		`{"name":"svc","ports":[{"port":80,"proto":"tcp"},{"port":"443","proto":"tcp"}]}`,
		`{"name":"svc","ports":[{"port":80,"tls":false},{"port":"443","proto":"tcp"}]}`,
		`{"name":"svc","owner":{"team":"net"},"ports":[{"port":80,"tls":false},{"port":"443","proto":"tcp"}]}`,
		`{"owner":{"team":"net"},"ports":[{"port":80,"tls":false},{"port":"443","proto":"tcp"}]}`,
	}
	for i, d := range history {
		if got, _ := json.Marshal(d); string(got) != want[i] {
			t.Errorf("document %d changed to %s, want %s", i, got, want[i])
		}
	}
}
