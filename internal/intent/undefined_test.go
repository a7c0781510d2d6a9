package intent_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/intent"
)

// undefinedRes returns a resource object of an export marked undefined:
// an fs::File that has only its id attribute (its content is not known
// yet).
func undefinedRes(path string, requires ...string) string {
	return strings.TrimSuffix(res(path, requires...), "}") + `,"undefined":true}`
}

func TestDecodeUndefined(t *testing.T) {
	t.Parallel()
	a, b := file("/a"), file("/b")
	v, err := intent.DecodeBytes([]byte(export(
		undefinedRes("/a"),
		res("/b", a),
		strings.TrimSuffix(res("/c"), "}")+`,"undefined":false}`,
	)))
	if err != nil {
		t.Fatalf("DecodeBytes() = %v; an undefined resource with only its id attribute is valid", err)
	}
	id := resource.MustParse
	want := []intent.Resource{
		{ID: id(a), Attributes: map[string]any{"path": "/a"}, Undefined: true},
		{ID: id(b), Attributes: map[string]any{"path": "/b"}, Requires: []resource.ID{id(a)}},
		{ID: id(file("/c")), Attributes: map[string]any{"path": "/c"}},
	}
	if !reflect.DeepEqual(v.Resources, want) {
		t.Errorf("DecodeBytes() =\n%#v\nwant (undefined kept; false and absent are the same)\n%#v", v.Resources, want)
	}
	if err := v.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}

	p, _, err := intent.DecodePartial([]byte(export(inSet(undefinedRes("/a"), "web"))))
	if err != nil || len(p.Resources) != 1 || !p.Resources[0].Undefined {
		t.Errorf("DecodePartial() = %#v, %v; want the undefined flag kept", p, err)
	}
}

func TestUndefinedProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		in     string
		want   []intent.FieldProblem
		reason string
	}{
		{
			name: "purged and undefined",
			in:   export(res("/a"), strings.TrimSuffix(undefinedRes("/b"), "}")+`,"purged":true}`),
			want: []intent.FieldProblem{{"/resources/1/undefined",
				"a purged resource cannot be undefined: removing it needs no value that is not known yet"}},
			reason: "removing a resource needs none of its attributes",
		},
		{
			name: "undefined without its id attribute",
			in:   export(`{"id": "fs::File[localhost,path=/a]", "attributes": {}, "undefined": true}`),
			want: []intent.FieldProblem{{"/resources/0/attributes/path",
				`is missing: the id "fs::File[localhost,path=/a]" names attribute "path"`}},
			reason: "attributes may be incomplete, but the id's attribute is always known",
		},
		{
			name:   "duplicate undefined",
			in:     export(`{"id": "fs::File[localhost,path=/a]", "attributes": {"path": "/a"}, "undefined": true, "undefined": false}`),
			want:   []intent.FieldProblem{{"/resources/0/undefined", "duplicate key"}},
			reason: "as strict as the other flags",
		},
		{
			name:   "undefined null",
			in:     export(`{"id": "fs::File[localhost,path=/a]", "attributes": {"path": "/a"}, "undefined": null}`),
			want:   []intent.FieldProblem{{"/resources/0/undefined", "must be a boolean, not null"}},
			reason: "types are checked, not coerced",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, decode := range []struct {
				name string
				fn   func([]byte) error
			}{
				{"DecodeBytes", func(b []byte) error { _, err := intent.DecodeBytes(b); return err }},
				{"DecodePartial", func(b []byte) error { _, _, err := intent.DecodePartial(b); return err }},
			} {
				var ve *intent.ValidationError
				if err := decode.fn([]byte(tt.in)); !errors.As(err, &ve) || !reflect.DeepEqual(ve.Problems, tt.want) {
					t.Errorf("%s() = %v;\nwant problems %q (%s)", decode.name, err, tt.want, tt.reason)
				}
			}
		})
	}

	// Validate checks a Version built in Go the same way.
	v := intent.Version{Resources: []intent.Resource{{ID: resource.MustParse(file("/a")),
		Attributes: map[string]any{"path": "/a"}, Purged: true, Undefined: true}}}
	var ve *intent.ValidationError
	if err := v.Validate(); !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != "/resources/0/undefined" {
		t.Errorf("Validate() = %v; want one problem at /resources/0/undefined", err)
	}
}

func TestHashUndefined(t *testing.T) {
	t.Parallel()
	defined := intent.Resource{ID: resource.MustParse("fs::File[h,path=/a]"), Attributes: map[string]any{"path": "/a"}}
	undefined := defined
	undefined.Undefined = true
	const doc = `{"attributes":{"path":"/a"},"id":"fs::File[h,path=/a]","purged":false,"receive_events":false,` +
		`"report_only":false,"requires":[],"resource_set":null,"send_event":false`
	tests := []struct {
		r      intent.Resource
		doc    string
		reason string
	}{
		{defined, doc + `}`, "without the flag the encoding is the one stored before it existed"},
		{undefined, doc + `,"undefined":true}`, "the flag is the last member, only when set"},
	}
	for _, tt := range tests {
		want := sha256.Sum256([]byte(tt.doc))
		if got := tt.r.Hash(); got != want {
			t.Errorf("%s: Hash() = %x; want %s, the sha256 of\n%s", tt.reason, got, hex.EncodeToString(want[:]), tt.doc)
		}
	}
	if defined.Hash() == undefined.Hash() {
		t.Error("an undefined resource hashes like its defined form: a recompile that defines it would change nothing")
	}
}

func TestMergePartialUndefined(t *testing.T) {
	t.Parallel()
	id := resource.MustParse
	shared := intent.Resource{ID: id(file("/s")), Attributes: map[string]any{"path": "/s"}}
	a := intent.Resource{ID: id(file("/a")), Attributes: map[string]any{"path": "/a", "content": "x"},
		Requires: []resource.ID{id(file("/s"))}, ResourceSet: "web"}
	base := []intent.StoredResource{
		{ID: shared.ID, Hash: shared.Hash()},
		{ID: a.ID, ResourceSet: "web", Requires: a.Requires, Hash: a.Hash()},
	}

	// A set's resource becomes undefined: the set is replaced, and the
	// flag comes through the merge.
	undefA := a
	undefA.Attributes = map[string]any{"path": "/a"}
	undefA.Undefined = true
	m, err := intent.MergePartial(base, intent.Version{Resources: []intent.Resource{undefA}}, nil)
	if err != nil {
		t.Fatalf("MergePartial() = %v", err)
	}
	if len(m.Resources) != 1 || !m.Resources[0].Undefined || m.Resources[0].Hash() == a.Hash() {
		t.Errorf("MergePartial().Resources = %#v; want /a undefined, with a new hash", m.Resources)
	}
	if len(m.Kept) != 1 || m.Kept[0].ID != shared.ID {
		t.Errorf("MergePartial().Kept = %#v; want the shared resource", m.Kept)
	}

	// A shared resource that differs only by the flag is another intent:
	// shared resources change only in a full export.
	undefShared := shared
	undefShared.Undefined = true
	_, err = intent.MergePartial(base, intent.Version{Resources: []intent.Resource{undefShared}}, nil)
	var ve *intent.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != "/resources/0" ||
		!strings.Contains(ve.Problems[0].Detail, "differs from the stored one") {
		t.Errorf("MergePartial(shared resource made undefined) = %v; want it refused at /resources/0", err)
	}

	// Purged and undefined is refused in a merge too.
	bad := undefA
	bad.Purged = true
	if _, err := intent.MergePartial(base, intent.Version{Resources: []intent.Resource{bad}}, nil); !errors.As(err, &ve) ||
		ve.Problems[0].Path != "/resources/0/undefined" {
		t.Errorf("MergePartial(purged and undefined) = %v; want a problem at /resources/0/undefined", err)
	}
}
