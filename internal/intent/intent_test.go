package intent_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/intent"
)

// file returns the id of an fs::File on localhost.
func file(path string) string { return "fs::File[localhost,path=" + path + "]" }

// res returns a resource object of an export: an fs::File with the given
// path and requires.
func res(path string, requires ...string) string {
	req, _ := json.Marshal(requires)
	if requires == nil {
		req = []byte("[]")
	}
	return fmt.Sprintf(`{"id":%q,"attributes":{"path":%q},"requires":%s}`, file(path), path, req)
}

// inSet adds "resource_set": set to the resource object obj.
func inSet(obj, set string) string {
	return strings.TrimSuffix(obj, "}") + fmt.Sprintf(`,"resource_set":%q}`, set)
}

// export wraps resource objects into an export.
// acrossSets is the problem of id, of resource set set, requiring req of
// resource set reqSet.
func acrossSets(id, set, req, reqSet string) string {
	return fmt.Sprintf(`%q of resource set %q must not require %q of resource set %q: `+
		"a resource may require only resources of its own set or shared ones", id, set, req, reqSet)
}

// sharedRequiresSet is the problem of the shared resource id requiring
// req of resource set reqSet.
func sharedRequiresSet(id, req, reqSet string) string {
	return fmt.Sprintf(`shared resource %q must not require %q of resource set %q: `+
		"a shared resource may require only shared resources", id, req, reqSet)
}

func export(resources ...string) string {
	return `{"resources":[` + strings.Join(resources, ",") + `]}`
}

func TestDecodeBytes(t *testing.T) {
	t.Parallel()
	in := `
	{ "resources" : [
		{"requires": ["fs::File[localhost,path=/tmp/c]", "fs::File[localhost,path=/tmp/b]", "fs::File[localhost,path=/tmp/c]"],
		 "attributes": {"path": "/tmp/a", "content": "h\u0069", "mode": 420, "nested": {"b": [1.50, true, null], "a": {}}},
		 "id": "fs::File[localhost,path=/tmp/a]",
		 "purged": false, "send_event": true, "receive_events": true, "report_only": true, "resource_set": "web"},
		{"id": "fs::File[localhost,path=/tmp/c]", "attributes": {"path": "/tmp/c"}, "purged": true, "resource_set": "web"},
		{"id": "net::Port[router,port=8080]", "attributes": {"port": 8080}},
		{"id": "fs::File[localhost,path=/tmp/b]", "attributes": {"path": "/tmp/b"}, "requires": []}
	]}`
	v, err := intent.DecodeBytes([]byte(in))
	if err != nil {
		t.Fatalf("DecodeBytes() = %v", err)
	}
	want := intent.Version{Resources: []intent.Resource{
		{
			ID: resource.MustParse(file("/tmp/a")),
			Attributes: map[string]any{
				"path": "/tmp/a", "content": "hi", "mode": json.Number("420"),
				"nested": map[string]any{"b": []any{json.Number("1.50"), true, nil}, "a": map[string]any{}},
			},
			Requires:      []resource.ID{resource.MustParse(file("/tmp/b")), resource.MustParse(file("/tmp/c"))},
			SendEvent:     true,
			ReceiveEvents: true,
			ReportOnly:    true,
			ResourceSet:   "web",
		},
		{ID: resource.MustParse(file("/tmp/b")), Attributes: map[string]any{"path": "/tmp/b"}},
		{ID: resource.MustParse(file("/tmp/c")), Attributes: map[string]any{"path": "/tmp/c"}, Purged: true, ResourceSet: "web"},
		{ID: resource.MustParse("net::Port[router,port=8080]"), Attributes: map[string]any{"port": json.Number("8080")}},
	}}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("DecodeBytes() =\n%#v\nwant (sorted by id, requires sorted and deduplicated, numbers as text, sets kept)\n%#v", v, want)
	}
	if err := v.Validate(); err != nil {
		t.Errorf("Validate() of a decoded version = %v", err)
	}
	if got, want := v.Resources[0].Agent(), "localhost"; got != want {
		t.Errorf("Agent() = %q; want %q", got, want)
	}
	if got, want := v.Agents(), []string{"localhost", "router"}; !slices.Equal(got, want) {
		t.Errorf("Agents() = %q; want %q", got, want)
	}

	// Decode is DecodeBytes on a reader.
	v2, err := intent.Decode(strings.NewReader(in))
	if err != nil || !reflect.DeepEqual(v2, v) {
		t.Errorf("Decode() = %v, %v; want the same as DecodeBytes", v2, err)
	}
}

func TestDecodeEmptyVersion(t *testing.T) {
	t.Parallel()
	v, err := intent.DecodeBytes([]byte(`{"resources": []}`))
	if err != nil || len(v.Resources) != 0 {
		t.Fatalf("DecodeBytes() = %v, %v; want an empty version", v, err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

func TestDecodeReadError(t *testing.T) {
	t.Parallel()
	_, err := intent.Decode(errReader{})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Decode() = %v; want the read error", err)
	}
	var ve *intent.ValidationError
	if errors.As(err, &ve) {
		t.Errorf("a read error is not a ValidationError: %v", err)
	}
}

// problemCase is an input that decodes with problems: want, for reason.
type problemCase struct {
	name   string
	in     string
	want   []intent.FieldProblem
	reason string
}

func TestDecodeProblems(t *testing.T) {
	t.Parallel()
	a, b, c := file("/a"), file("/b"), file("/c")
	tests := []problemCase{
		{
			name:   "empty input",
			in:     "",
			want:   []intent.FieldProblem{{"", "invalid JSON at byte 0: unexpected end of input"}},
			reason: "nothing to decode",
		},
		{
			name:   "white space only",
			in:     " \n",
			want:   []intent.FieldProblem{{"", "invalid JSON at byte 2: unexpected end of input"}},
			reason: "nothing to decode",
		},
		{
			name:   "not an object",
			in:     `[]`,
			want:   []intent.FieldProblem{{"", "must be an object, not an array"}},
			reason: "the document is an object",
		},
		{
			name:   "trailing data",
			in:     `{"resources": []} {}`,
			want:   []intent.FieldProblem{{"", "invalid JSON at byte 18: unexpected data after the top-level value"}},
			reason: "one document per export",
		},
		{
			name:   "trailing NUL",
			in:     "{\"resources\": []}\x00",
			want:   []intent.FieldProblem{{"", "invalid JSON at byte 17: unexpected data after the top-level value"}},
			reason: "a NUL byte is data, not the end",
		},
		{
			name:   "missing resources",
			in:     `{}`,
			want:   []intent.FieldProblem{{"/resources", "is missing"}},
			reason: "an empty version is written as an empty array",
		},
		{
			name:   "resources null",
			in:     `{"resources": null}`,
			want:   []intent.FieldProblem{{"/resources", "must be an array, not null"}},
			reason: "null is not an empty array",
		},
		{
			name: "unknown and duplicate top-level members",
			in:   `{"resources": [], "colour": "blue", "resources": [], "a/b~": 1}`,
			want: []intent.FieldProblem{
				{"/a~1b~0", "unknown field"},
				{"/colour", "unknown field"},
				{"/resources", "duplicate key"},
			},
			reason: "strict: a typo must not be ignored; pointers escape / and ~",
		},
		{
			name: "numbers beyond float64",
			in: `{"resources": [{"id": "a::B[h,n=1]", "attributes": {"n": 1, "x": [1e-400, 1.7976931348623157e308, 1e309],
				"y": {"z": -1` + strings.Repeat("0", 400) + `}}}]}`,
			want: []intent.FieldProblem{
				{"/resources/0/attributes/x/2", "is a number beyond the range of a 64-bit float (±1.8e308)"},
				{"/resources/0/attributes/y/z", "is a number beyond the range of a 64-bit float (±1.8e308)"},
			},
			reason: "kept as text, they would fail every reader of the attribute; tiny ones round to zero",
		},
		{
			name:   "resource not an object",
			in:     export(res("/a"), `"fs::File[localhost,path=/b]"`),
			want:   []intent.FieldProblem{{"/resources/1", "must be an object, not a string"}},
			reason: "each resource is an object",
		},
		{
			name: "unknown, duplicate and missing resource members",
			in:   `{"resources": [{"colour": 1, "purged": true, "purged": false}]}`,
			want: []intent.FieldProblem{
				{"/resources/0/attributes", "is missing"},
				{"/resources/0/colour", "unknown field"},
				{"/resources/0/id", "is missing"},
				{"/resources/0/purged", "duplicate key"},
			},
			reason: "every problem of the resource is reported",
		},
		{
			name: "wrong member types",
			in: `{"resources": [{"id": 5, "attributes": null, "requires": "x", "purged": 0,
				"send_event": "true", "receive_events": null, "report_only": [], "resource_set": null, "undefined": "yes"}]}`,
			want: []intent.FieldProblem{
				{"/resources/0/attributes", "must be an object, not null"},
				{"/resources/0/id", "must be a string, not a number"},
				{"/resources/0/purged", "must be a boolean, not a number"},
				{"/resources/0/receive_events", "must be a boolean, not null"},
				{"/resources/0/report_only", "must be a boolean, not an array"},
				{"/resources/0/requires", "must be an array, not a string"},
				{"/resources/0/resource_set", "must be a string, not null"},
				{"/resources/0/send_event", "must be a boolean, not a string"},
				{"/resources/0/undefined", "must be a boolean, not a string"},
			},
			reason: "types are checked, not coerced; the shared set is written by leaving resource_set out",
		},
		{
			name: "empty and duplicate resource_set",
			in: export(`{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a"}, "resource_set": ""}`,
				`{"id": "fs::File[h,path=/b]", "attributes": {"path": "/b"}, "resource_set": "x", "resource_set": "x"}`),
			want: []intent.FieldProblem{
				{"/resources/0/resource_set", "must not be empty: leave resource_set out for the shared set"},
				{"/resources/1/resource_set", "duplicate key"},
			},
			reason: `"" would be a second spelling of the shared set`,
		},
		{
			name: "resource set rules",
			in: export(inSet(res("/a", b, c), "x"), inSet(res("/b"), "y"), res("/c"), res("/d", a), inSet(res("/e", file("/f")), "x"),
				inSet(res("/f"), "x")),
			want: []intent.FieldProblem{
				{"/resources/0/requires/0", acrossSets(a, "x", b, "y")},
				{"/resources/3/requires/0", sharedRequiresSet(file("/d"), a, "x")},
			},
			reason: "a set may require itself and the shared set (/a → /c, /e → /f); both ids and sets are named",
		},
		{
			name:   "removed_resource_sets in a full export",
			in:     `{"resources": [], "removed_resource_sets": ["x"]}`,
			want:   []intent.FieldProblem{{"/removed_resource_sets", "unknown field"}},
			reason: "only a partial export removes sets",
		},
		{
			name:   "attributes array",
			in:     `{"resources": [{"id": "fs::File[localhost,path=/a]", "attributes": []}]}`,
			want:   []intent.FieldProblem{{"/resources/0/attributes", "must be an object, not an array"}},
			reason: "attributes are an object; the missing identity attribute is not reported twice",
		},
		{
			name: "bad ids",
			in: export(
				`{"id": "fs::File[localhost,path=]", "attributes": {}}`,
				`{"id": "fs::File[localhost,path=/b],v=3", "attributes": {"path": "/b"}}`,
			),
			want: []intent.FieldProblem{
				{"/resources/0/id", `resource id "fs::File[localhost,path=]": value is empty`},
				{"/resources/1/id", `"fs::File[localhost,path=/b],v=3" must not carry a version`},
			},
			reason: "unparsable ids and ids with a version are refused",
		},
		{
			name:   "duplicate ids",
			in:     export(res("/a"), res("/b"), res("/a")),
			want:   []intent.FieldProblem{{"/resources/2/id", fmt.Sprintf("duplicate id %q, also at /resources/0", a)}},
			reason: "both indexes are named",
		},
		{
			name: "identity attribute",
			in: export(
				`{"id": "fs::File[h,path=/a]", "attributes": {"content": "x"}}`,
				`{"id": "fs::File[h,path=/b]", "attributes": {"path": "/c"}}`,
				`{"id": "net::Port[h,port=08]", "attributes": {"port": 8}}`,
				`{"id": "net::Port[h,port=9]", "attributes": {"port": true}}`,
				`{"id": "net::Port[h,port=1.0]", "attributes": {"port": 1.0}}`,
				`{"id": "net::Port[h,port=2]", "attributes": {"port": "2"}}`,
			),
			want: []intent.FieldProblem{
				{"/resources/0/attributes/path", `is missing: the id "fs::File[h,path=/a]" names attribute "path"`},
				{"/resources/1/attributes/path", `"/c" does not equal the id's value "/b"`},
				{"/resources/2/attributes/port", `number 8 does not equal the id's value "08"`},
				{"/resources/3/attributes/port", `must be a string or number equal to the id's value "9", not a boolean`},
			},
			reason: "the id attribute must be there with the id's value; numbers compare by their text, strings as strings",
		},
		{
			name: "bad requires",
			in: export(
				`{"id": "fs::File[localhost,path=/a]", "attributes": {"path": "/a"}, "requires": [
					"nope", 7, "fs::File[localhost,path=/b],v=2", "fs::File[localhost,path=/a]", "fs::File[localhost,path=/zz]", "fs::File[localhost,path=/b]"]}`,
				res("/b"),
			),
			want: []intent.FieldProblem{
				{"/resources/0/requires/0", `resource id "nope": id must end with "]" or "],v=<version>"`},
				{"/resources/0/requires/1", "must be a string, not a number"},
				{"/resources/0/requires/2", `"fs::File[localhost,path=/b],v=2" must not carry a version`},
				{"/resources/0/requires/3", "points to the resource itself"},
				{"/resources/0/requires/4", `"fs::File[localhost,path=/zz]" is not in this version`},
			},
			reason: "indexes of requires entries match the export even after a bad one",
		},
		{
			name:   "requires cycle",
			in:     export(res("/c", a), res("/b", c), res("/a", b)),
			want:   []intent.FieldProblem{{"/resources/2/requires", fmt.Sprintf("requires cycle: %s → %s → %s → %s", a, b, c, a)}},
			reason: "the cycle is named in order, starting at its smallest id",
		},
		{
			name: "two cycles",
			in:   export(res("/a", b), res("/b", a), res("/c", file("/d")), res("/d", c), res("/e", a, c)),
			want: []intent.FieldProblem{
				{"/resources/0/requires", fmt.Sprintf("requires cycle: %s → %s → %s", a, b, a)},
				{"/resources/2/requires", fmt.Sprintf("requires cycle: %s → %s → %s", c, file("/d"), c)},
			},
			reason: "every cycle is reported, not only the first",
		},
		{
			name:   "duplicate attribute key",
			in:     export(`{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a", "x": {"y": 1, "y": 2}}}`),
			want:   []intent.FieldProblem{{"/resources/0/attributes/x/y", "duplicate key"}},
			reason: "encoding/json would silently keep the last one",
		},
		{
			name:   "invalid UTF-8",
			in:     export(`{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a", "x": "` + "\xff" + `"}}`),
			want:   []intent.FieldProblem{{"/resources/0/attributes/x", "invalid JSON at byte 79: invalid UTF-8 in string"}},
			reason: "JSON text is UTF-8",
		},
		{
			name:   "lone surrogate",
			in:     export(`{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a", "x": "\ud800"}}`),
			want:   []intent.FieldProblem{{"/resources/0/attributes/x", `invalid JSON at byte 79: unpaired surrogate in \u escape`}},
			reason: "an unpaired surrogate is not a character",
		},
		{
			name:   "bad escape",
			in:     export(`{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a", "x": "\x"}}`),
			want:   []intent.FieldProblem{{"/resources/0/attributes/x", `invalid JSON at byte 79: invalid escape "\\x"`}},
			reason: "only the escapes of RFC 8259",
		},
		{
			name:   "control character in string",
			in:     export(`{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a", "x": "a` + "\n" + `"}}`),
			want:   []intent.FieldProblem{{"/resources/0/attributes/x", "invalid JSON at byte 80: control character in string"}},
			reason: "control characters must be escaped",
		},
		{
			name:   "bad number",
			in:     export(`{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a", "x": 01}}`),
			want:   []intent.FieldProblem{{"/resources/0/attributes", "invalid JSON at byte 79: expected ',' or '}' after an object member"}},
			reason: "no leading zeros in JSON numbers",
		},
		{
			name: "problems before a syntax error are kept",
			in:   `{"resources": [{"colour": 1}, {"id": tru}]}`,
			want: []intent.FieldProblem{
				{"/resources/0/attributes", "is missing"},
				{"/resources/0/colour", "unknown field"},
				{"/resources/0/id", "is missing"},
				{"/resources/1/id", `invalid JSON at byte 37: invalid literal, expected "true"`},
			},
			reason: "decoding stops at malformed JSON but does not forget what it found",
		},
		{
			name:   "deep nesting",
			in:     export(`{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a", "x": ` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}}`),
			want:   []intent.FieldProblem{{"/resources/0/attributes/x" + strings.Repeat("/0", 999), "invalid JSON at byte 1077: nested deeper than 1000 levels"}},
			reason: "bounded recursion",
		},
		{
			name: "sorted by path with numeric indexes",
			in: export(res("/0"), res("/1"), res("/2", "x"), res("/3"), res("/4"), res("/5"), res("/6"), res("/7"), res("/8"),
				res("/9"), res("/10", "y")),
			want: []intent.FieldProblem{
				{"/resources/2/requires/0", `resource id "x": id must end with "]" or "],v=<version>"`},
				{"/resources/10/requires/0", `resource id "y": id must end with "]" or "],v=<version>"`},
			},
			reason: "/resources/2 sorts before /resources/10",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := intent.DecodeBytes([]byte(tt.in))
			var ve *intent.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("DecodeBytes() = %v, %v; want a *ValidationError (%s)", v, err, tt.reason)
			}
			if !slices.Equal(ve.Problems, tt.want) {
				t.Errorf("problems (%s):\n got %q\nwant %q", tt.reason, ve.Problems, tt.want)
			}
			if len(v.Resources) != 0 {
				t.Errorf("DecodeBytes returned resources with an error")
			}
		})
	}
}

func TestValidationErrorMessage(t *testing.T) {
	t.Parallel()
	p := func(i int) intent.FieldProblem {
		return intent.FieldProblem{Path: fmt.Sprintf("/resources/%d/id", i), Detail: "bad"}
	}
	tests := []struct {
		err    intent.ValidationError
		want   string
		reason string
	}{
		{intent.ValidationError{Problems: []intent.FieldProblem{{"", "invalid JSON at byte 0: unexpected end of input"}}},
			"1 problem: (document): invalid JSON at byte 0: unexpected end of input", "singular, and the root has a readable name"},
		{intent.ValidationError{Problems: []intent.FieldProblem{p(3), p(4)}},
			"2 problems: /resources/3/id: bad; /resources/4/id: bad", "all problems when few"},
		{intent.ValidationError{Problems: []intent.FieldProblem{p(0), p(1), p(2), p(3), p(4), p(5), p(6)}, Omitted: 3},
			"10 problems: /resources/0/id: bad; /resources/1/id: bad; /resources/2/id: bad; /resources/3/id: bad; /resources/4/id: bad; and 5 more",
			"a summary when many; omitted problems are counted"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q; want %q (%s)", got, tt.want, tt.reason)
		}
	}
}

func TestProblemCap(t *testing.T) {
	t.Parallel()
	var rs []string
	for i := range 150 {
		rs = append(rs, fmt.Sprintf(`{"id": "bad%d", "attributes": {}}`, i))
	}
	_, err := intent.DecodeBytes([]byte(export(rs...)))
	var ve *intent.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("DecodeBytes() = %v; want a *ValidationError", err)
	}
	if len(ve.Problems) != intent.MaxProblems || ve.Omitted != 50 {
		t.Errorf("got %d problems and %d omitted; want %d and 50", len(ve.Problems), ve.Omitted, intent.MaxProblems)
	}
	if last := ve.Problems[len(ve.Problems)-1].Path; last != "/resources/99/id" {
		t.Errorf("last problem kept is at %s; want /resources/99/id (the first 100 by path)", last)
	}
	if !strings.HasPrefix(err.Error(), "150 problems: ") {
		t.Errorf("Error() = %q; want it to count all 150", err)
	}
}

func TestVersionValidate(t *testing.T) {
	t.Parallel()
	mk := func(path string, requires ...string) intent.Resource {
		r := intent.Resource{ID: resource.MustParse(file(path)), Attributes: map[string]any{"path": path}}
		for _, q := range requires {
			r.Requires = append(r.Requires, resource.MustParse(q))
		}
		return r
	}
	with := func(r intent.Resource, f func(*intent.Resource)) intent.Resource { f(&r); return r }
	tests := []struct {
		name   string
		rs     []intent.Resource
		want   []intent.FieldProblem
		reason string
	}{
		{"valid", []intent.Resource{mk("/a"), mk("/b", file("/a")), mk("/c", file("/a"), file("/b"))}, nil, "a normalised acyclic version"},
		{"empty", nil, nil, "an empty version is valid"},
		{
			name: "Go-typed attribute values",
			rs: []intent.Resource{with(mk("/a"), func(r *intent.Resource) {
				r.Attributes["n"] = 3
				r.Attributes["f"] = 1.5
				r.Attributes["l"] = []any{uint8(1), nil, map[string]any{"k": false}}
			})},
			reason: "hand-built versions may use Go numbers",
		},
		{
			name: "bad attribute values",
			rs: []intent.Resource{with(mk("/a"), func(r *intent.Resource) {
				r.Attributes["nan"] = math.NaN()
				r.Attributes["num"] = json.Number("1x")
				r.Attributes["typ"] = []string{"a"}
				r.Attributes["deep"] = map[string]any{"l": []any{1, "\xff"}}
			})},
			want: []intent.FieldProblem{
				{"/resources/0/attributes/deep/l/1", "string is not valid UTF-8"},
				{"/resources/0/attributes/nan", "NaN is not a JSON number"},
				{"/resources/0/attributes/num", `"1x" is not a JSON number`},
				{"/resources/0/attributes/typ", "unsupported type []string"},
			},
			reason: "only values that have a JSON form",
		},
		{
			name: "bad ids",
			rs: []intent.Resource{
				{},
				with(mk("/b"), func(r *intent.Resource) { r.ID.Version = 4 }),
				with(mk("/c"), func(r *intent.Resource) {
					r.Requires = []resource.ID{{Type: "x"}, resource.MustParse(file("/b")).WithVersion(1)}
				}),
			},
			want: []intent.FieldProblem{
				{"/resources/0/id", `resource id "[,=]": type is empty`},
				{"/resources/1/id", `"fs::File[localhost,path=/b],v=4" must not carry a version`},
				{"/resources/2/requires/0", `resource id "x[,=]": type "x" must be <namespace>::<Name>`},
				{"/resources/2/requires/1", `"fs::File[localhost,path=/b],v=1" must not carry a version`},
			},
			reason: "ids and requires are validated, as the decoder would",
		},
		{
			name: "not normalised",
			rs:   []intent.Resource{mk("/b"), mk("/a"), mk("/c", file("/b"), file("/a"), file("/a"))},
			want: []intent.FieldProblem{
				{"/resources/1/id", fmt.Sprintf("%q must sort before %q at /resources/0: the version is not normalised", file("/a"), file("/b"))},
				{"/resources/2/requires/1", fmt.Sprintf("%q must sort after %q: the requires are not normalised", file("/a"), file("/b"))},
				{"/resources/2/requires/2", fmt.Sprintf("%q must sort after %q: the requires are not normalised", file("/a"), file("/a"))},
			},
			reason: "Version documents its order; Normalize establishes it",
		},
		{
			name:   "nil attributes",
			rs:     []intent.Resource{with(mk("/a"), func(r *intent.Resource) { r.Attributes = nil })},
			want:   []intent.FieldProblem{{"/resources/0/attributes/path", fmt.Sprintf("is missing: the id %q names attribute \"path\"", file("/a"))}},
			reason: "the identity attribute is required",
		},
		{
			name: "resource sets",
			rs: []intent.Resource{
				with(mk("/a", file("/b"), file("/c")), func(r *intent.Resource) { r.ResourceSet = "x" }),
				mk("/b"),
				with(mk("/c"), func(r *intent.Resource) { r.ResourceSet = "y" }),
				mk("/d", file("/c")),
				with(mk("/e"), func(r *intent.Resource) { r.ResourceSet = "\xff" }),
			},
			want: []intent.FieldProblem{
				{"/resources/0/requires/1", acrossSets(file("/a"), "x", file("/c"), "y")},
				{"/resources/3/requires/0", sharedRequiresSet(file("/d"), file("/c"), "y")},
				{"/resources/4/resource_set", "string is not valid UTF-8"},
			},
			reason: "the set rules hold for hand-built versions too",
		},
		{
			name:   "cycle",
			rs:     []intent.Resource{mk("/a", file("/b")), mk("/b", file("/a"))},
			want:   []intent.FieldProblem{{"/resources/0/requires", fmt.Sprintf("requires cycle: %s → %s → %s", file("/a"), file("/b"), file("/a"))}},
			reason: "the same graph checks as the decoder",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := intent.Version{Resources: tt.rs}.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil (%s)", err, tt.reason)
				}
				return
			}
			var ve *intent.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v; want a *ValidationError (%s)", err, tt.reason)
			}
			if !slices.Equal(ve.Problems, tt.want) {
				t.Errorf("problems (%s):\n got %q\nwant %q", tt.reason, ve.Problems, tt.want)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	a, b, c := resource.MustParse(file("/a")), resource.MustParse(file("/b")), resource.MustParse(file("/c"))
	v := intent.Version{Resources: []intent.Resource{
		{ID: c, Attributes: map[string]any{"path": "/c"}, Requires: []resource.ID{b, a, b}},
		{ID: a, Attributes: map[string]any{"path": "/a"}},
		{ID: b, Attributes: map[string]any{"path": "/b"}},
	}}
	v.Normalize()
	var got []string
	for _, r := range v.Resources {
		got = append(got, r.ID.Value)
	}
	if want := []string{"/a", "/b", "/c"}; !slices.Equal(got, want) {
		t.Errorf("resources after Normalize = %q; want %q", got, want)
	}
	if req := v.Resources[2].Requires; !slices.Equal(req, []resource.ID{a, b}) {
		t.Errorf("requires after Normalize = %v; want sorted and deduplicated", req)
	}
	if err := v.Validate(); err != nil {
		t.Errorf("Validate() after Normalize = %v", err)
	}
}

func TestCycleIsDeterministic(t *testing.T) {
	t.Parallel()
	// The same graph in every order of the export: a→b→c→a plus a→c.
	a, b, c := file("/a"), file("/b"), file("/c")
	objs := []string{res("/a", c, b), res("/b", c), res("/c", a)}
	want := fmt.Sprintf("requires cycle: %s → %s → %s", a, c, a)
	for _, perm := range [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		var rs []string
		for _, i := range perm {
			rs = append(rs, objs[i])
		}
		_, err := intent.DecodeBytes([]byte(export(rs...)))
		var ve *intent.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Detail != want {
			t.Errorf("order %v: %v; want one problem %q (the shortest cycle from the smallest id)", perm, err, want)
		}
	}
}

// chain returns an export of n fs::Files where each requires the one
// before, and the first requires first (or nothing when first is "").
func chain(n int, first string) []byte {
	var b strings.Builder
	b.WriteString(`{"resources": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		req := first
		if i > 0 {
			req = file(fmt.Sprintf("/tmp/f%06d", i-1))
		}
		reqs := "[]"
		if req != "" {
			reqs = `["` + req + `"]`
		}
		fmt.Fprintf(&b, `{"id": "fs::File[localhost,path=/tmp/f%06d]", "attributes": {"path": "/tmp/f%06d", "content": "hello %d", "mode": "0644"}, "requires": %s, "purged": false}`,
			i, i, i, reqs)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func TestLongChain(t *testing.T) {
	t.Parallel()
	const n = 100_000
	start := time.Now()
	v, err := intent.DecodeBytes(chain(n, ""))
	if err != nil {
		t.Fatalf("DecodeBytes(chain of %d) = %v", n, err)
	}
	if len(v.Resources) != n {
		t.Fatalf("got %d resources; want %d", len(v.Resources), n)
	}
	t.Logf("decoded and validated %d chained resources in %v", n, time.Since(start))

	// Closing the chain into one cycle of 100k resources: found without
	// recursion, and named without a 100k-id message.
	_, err = intent.DecodeBytes(chain(n, file(fmt.Sprintf("/tmp/f%06d", n-1))))
	var ve *intent.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 {
		t.Fatalf("DecodeBytes(cycle of %d) = %v; want one problem", n, err)
	}
	want := "requires cycle: " + file("/tmp/f000000") + " → " + file("/tmp/f099999") + " → " + file("/tmp/f099998")
	if d := ve.Problems[0].Detail; !strings.HasPrefix(d, want) || !strings.Contains(d, "… 99981 more …") || len(d) > 2000 {
		t.Errorf("cycle problem = %.300q…; want it to start %q and elide the middle", d, want)
	}
}

func TestHashIgnoresSpelling(t *testing.T) {
	t.Parallel()
	docs := []string{
		`{"resources": [{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a", "m": {"x": 1, "y": [1, "é"]}},
			"requires": ["fs::File[h,path=/c]", "fs::File[h,path=/b]"], "purged": false}, ` + res2 + `]}`,
		"{\"resources\":[" + res2 + ",{\"requires\":[\"fs::File[h,path=/b]\",\"fs::File[h,path=/c]\",\"fs::File[h,path=/b]\"],\n" +
			"\t\"attributes\":{\"m\":{\"y\":[1,\"\\u00e9\"],\"x\":1},\"path\":\"\\/a\"},\"id\":\"fs::File[h,path=/a]\"}]}",
	}
	var hashes [][32]byte
	var attrs []string
	for _, doc := range docs {
		v, err := intent.DecodeBytes([]byte(doc))
		if err != nil {
			t.Fatalf("DecodeBytes(%s) = %v", doc, err)
		}
		hashes = append(hashes, v.Resources[0].Hash())
		attrs = append(attrs, string(v.Resources[0].CanonicalAttributes()))
	}
	if hashes[0] != hashes[1] {
		t.Errorf("hashes differ for the same intent spelled differently: %x, %x", hashes[0], hashes[1])
	}
	if want := `{"m":{"x":1,"y":[1,"é"]},"path":"/a"}`; attrs[0] != want || attrs[1] != want {
		t.Errorf("CanonicalAttributes() = %s, %s; want %s", attrs[0], attrs[1], want)
	}
}

// res2 is the other resources that TestHashIgnoresSpelling needs.
const res2 = `{"id": "fs::File[h,path=/b]", "attributes": {"path": "/b"}}, {"id": "fs::File[h,path=/c]", "attributes": {"path": "/c"}}`

func TestHashSeesEveryChange(t *testing.T) {
	t.Parallel()
	base := func() intent.Resource {
		return intent.Resource{
			ID:         resource.MustParse("fs::File[h,path=/a]"),
			Attributes: map[string]any{"path": "/a", "mode": json.Number("420"), "l": []any{"x"}},
			Requires:   []resource.ID{resource.MustParse("fs::File[h,path=/b]")},
		}
	}
	h0 := base().Hash()
	tests := []struct {
		change func(*intent.Resource)
		reason string
	}{
		{func(r *intent.Resource) { r.ID.Agent = "h2" }, "another agent"},
		{func(r *intent.Resource) { r.Attributes["mode"] = json.Number("420.0") }, "numbers compare by text"},
		{func(r *intent.Resource) { r.Attributes["mode"] = "420" }, "a string is not a number"},
		{func(r *intent.Resource) { r.Attributes["extra"] = nil }, "an added null attribute"},
		{func(r *intent.Resource) { r.Attributes["l"] = []any{"x", "x"} }, "a longer list"},
		{func(r *intent.Resource) { r.Attributes["l"] = []any{} }, "an empty list"},
		{func(r *intent.Resource) { r.Requires = nil }, "no requires"},
		{func(r *intent.Resource) { r.Requires[0] = resource.MustParse("fs::File[h,path=/c]") }, "another require"},
		{func(r *intent.Resource) { r.Purged = true }, "purged"},
		{func(r *intent.Resource) { r.SendEvent = true }, "send_event"},
		{func(r *intent.Resource) { r.ReceiveEvents = true }, "receive_events"},
		{func(r *intent.Resource) { r.ReportOnly = true }, "report_only"},
		{func(r *intent.Resource) { r.Undefined = true }, "undefined: a value not known yet makes another intent"},
		{func(r *intent.Resource) { r.Unmanaged = true }, "unmanaged"},
		{func(r *intent.Resource) { r.ResourceSet = "web" }, "a resource set"},
		{func(r *intent.Resource) { r.ResourceSet = "null" }, `a set named "null" is not the shared set`},
	}
	seen := map[[32]byte]string{h0: "base"}
	for _, tt := range tests {
		r := base()
		tt.change(&r)
		h := r.Hash()
		if prev, dup := seen[h]; dup {
			t.Errorf("%s: hash %x equals the hash of %s", tt.reason, h, prev)
		}
		seen[h] = tt.reason
	}
}

func TestHashIsStable(t *testing.T) {
	t.Parallel()
	// Stored hashes must keep matching: this pins the canonical encoding.
	r := intent.Resource{
		ID: resource.MustParse("fs::File[h,path=/a]"),
		Attributes: map[string]any{
			"path": "/a", "content": "line\n\"q\" \\ \x01 ☃", "mode": json.Number("420"),
			"n": 7, "f": 0.5, "z": []any{nil, true, map[string]any{"b": 1, "a": 2}},
		},
		Requires:  []resource.ID{resource.MustParse("fs::File[h,path=/c]"), resource.MustParse("fs::File[h,path=/b]")},
		SendEvent: true,
	}
	wantAttrs := `{"content":"line\n\"q\" \\ \u0001 ☃","f":0.5,"mode":420,"n":7,"path":"/a","z":[null,true,{"a":2,"b":1}]}`
	if got := string(r.CanonicalAttributes()); got != wantAttrs {
		t.Errorf("CanonicalAttributes() =\n%s\nwant\n%s", got, wantAttrs)
	}
	tests := []struct {
		set     string
		wantSet string // the canonical resource_set member
		want    string // sha256 of the canonical document
		reason  string
	}{
		{"", `null`, "d5d4c902f90190d80926db33c80505fdba2434af6a509f09e612ac2a7e4e3ab8", "the shared set is null"},
		{`web "1"`, `"web \"1\""`, "bae9be7bad164c6d682775db85c6949bedd543056ef2ca775e9d8f0925d873ca", "a set is a canonical string"},
	}
	for _, tt := range tests {
		r := r
		r.ResourceSet = tt.set
		wantDoc := `{"attributes":` + wantAttrs + `,"id":"fs::File[h,path=/a]","purged":false,"receive_events":false,` +
			`"report_only":false,"requires":["fs::File[h,path=/b]","fs::File[h,path=/c]"],"resource_set":` + tt.wantSet +
			`,"send_event":true}`
		if got := sha256.Sum256([]byte(wantDoc)); hex.EncodeToString(got[:]) != tt.want {
			t.Fatalf("%s: test is inconsistent: sha256(wantDoc) = %x", tt.reason, got)
		}
		if got := r.Hash(); hex.EncodeToString(got[:]) != tt.want {
			t.Errorf("%s: Hash() = %x; want %s, the sha256 of\n%s\n(the canonical encoding changed: stored intent hashes would all mismatch)",
				tt.reason, got, tt.want, wantDoc)
		}
	}
}

func BenchmarkDecodeValidate(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		doc := chain(n, "")
		b.Run(fmt.Sprintf("resources=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if _, err := intent.DecodeBytes(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	v, err := intent.DecodeBytes(chain(100_000, ""))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHash(b *testing.B) {
	v, err := intent.DecodeBytes(chain(2, ""))
	if err != nil {
		b.Fatal(err)
	}
	r := v.Resources[1]
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Hash()
	}
}

// TestDecodeUnmanaged: "unmanaged": true decodes to Unmanaged; false or
// absent is managed, and hashes differently.
func TestDecodeUnmanaged(t *testing.T) {
	t.Parallel()
	v, err := intent.DecodeBytes([]byte(`{"resources":[
		{"id":"fs::File[h,path=/a]","attributes":{"path":"/a"},"unmanaged":true},
		{"id":"fs::File[h,path=/b]","attributes":{"path":"/b"},"unmanaged":false},
		{"id":"fs::File[h,path=/c]","attributes":{"path":"/c"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !v.Resources[0].Unmanaged || v.Resources[1].Unmanaged || v.Resources[2].Unmanaged {
		t.Fatalf("unmanaged = %v %v %v, want true false false", v.Resources[0].Unmanaged, v.Resources[1].Unmanaged, v.Resources[2].Unmanaged)
	}
	b := v.Resources[1]
	b.Unmanaged = true
	if b.Hash() == v.Resources[1].Hash() {
		t.Error("unmanaged hashes like managed")
	}
}
