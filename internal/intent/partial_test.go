package intent_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/intent"
)

func TestDecodePartial(t *testing.T) {
	t.Parallel()
	a, b, c, s := file("/a"), file("/b"), file("/c"), file("/s")
	in := `{"removed_resource_sets": ["old", "gone"], "resources": [` +
		inSet(res("/c", s), "web") + "," + inSet(res("/a", c, s, c), "web") + "," + res("/b") + `]}`
	v, removed, err := intent.DecodePartial([]byte(in))
	if err != nil {
		t.Fatalf("DecodePartial() = %v", err)
	}
	id := resource.MustParse
	want := intent.Version{Resources: []intent.Resource{
		{ID: id(c), Attributes: map[string]any{"path": "/c"}, Requires: []resource.ID{id(s)}, ResourceSet: "web"},
		{ID: id(a), Attributes: map[string]any{"path": "/a"}, Requires: []resource.ID{id(c), id(s), id(c)}, ResourceSet: "web"},
		{ID: id(b), Attributes: map[string]any{"path": "/b"}, Requires: nil},
	}}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("DecodePartial() =\n%#v\nwant (export order, requires as written, requires outside the export allowed)\n%#v", v, want)
	}
	if want := []string{"old", "gone"}; !slices.Equal(removed, want) {
		t.Errorf("removed = %q; want %q, in export order", removed, want)
	}

	// Without removed_resource_sets, removed is nil; a full export is a
	// partial export that removes nothing.
	_, removed, err = intent.DecodePartial([]byte(export(res("/a"))))
	if err != nil || removed != nil {
		t.Errorf("DecodePartial(full export) = %q, %v; want nil removed sets", removed, err)
	}
}

func TestDecodePartialProblems(t *testing.T) {
	t.Parallel()
	a, b, c := file("/a"), file("/b"), file("/c")
	tests := []problemCase{
		{
			name: "top-level members",
			in:   `{"removed_resource_sets": [], "removed_resource_sets": [], "colour": 1}`,
			want: []intent.FieldProblem{
				{"/colour", "unknown field"},
				{"/removed_resource_sets", "duplicate key"},
				{"/resources", "is missing"},
			},
			reason: "as strict as a full export",
		},
		{
			name: "removed sets",
			in:   `{"resources": [], "removed_resource_sets": ["a", "", 3, null]}`,
			want: []intent.FieldProblem{
				{"/removed_resource_sets/1", "must not be empty: the shared set cannot be removed"},
				{"/removed_resource_sets/2", "must be a string, not a number"},
				{"/removed_resource_sets/3", "must be a string, not null"},
			},
			reason: "set names are non-empty strings",
		},
		{
			name:   "removed sets not an array",
			in:     `{"resources": [], "removed_resource_sets": "a"}`,
			want:   []intent.FieldProblem{{"/removed_resource_sets", "must be an array, not a string"}},
			reason: "a list even for one set",
		},
		{
			name: "set both updated and removed",
			in:   `{"resources": [` + res("/a") + "," + inSet(res("/b"), "x") + `], "removed_resource_sets": ["y", "x"]}`,
			want: []intent.FieldProblem{
				{"/removed_resource_sets/1", `resource set "x" is both updated (/resources/1 is one of its resources) and removed`},
			},
			reason: "the export alone shows the contradiction",
		},
		{
			name: "what the export alone shows",
			in: export(inSet(res("/a", b, file("/zz")), "x"), inSet(res("/b"), "y"), res("/c", a), inSet(res("/a"), "x"),
				inSet(res("/d", file("/e")), "z"), inSet(res("/e", file("/d")), "z")),
			want: []intent.FieldProblem{
				{"/resources/0/requires/0", acrossSets(a, "x", b, "y")},
				{"/resources/2/requires/0", sharedRequiresSet(c, a, "x")},
				{"/resources/3/id", fmt.Sprintf("duplicate id %q, also at /resources/0", a)},
				{"/resources/4/requires", fmt.Sprintf("requires cycle: %s → %s → %s", file("/d"), file("/e"), file("/d"))},
			},
			reason: "set rules, duplicates and cycles among its own resources; /zz may be stored",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, removed, err := intent.DecodePartial([]byte(tt.in))
			var ve *intent.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("DecodePartial() = %v, %q, %v; want a *ValidationError (%s)", v, removed, err, tt.reason)
			}
			if !slices.Equal(ve.Problems, tt.want) {
				t.Errorf("problems (%s):\n got %q\nwant %q", tt.reason, ve.Problems, tt.want)
			}
			if len(v.Resources) != 0 || removed != nil {
				t.Errorf("DecodePartial returned resources or sets with an error")
			}
		})
	}
}

// stored returns the stored form of a decoded resource object.
// decodePartial decodes a partial export that must decode.
func decodePartial(t *testing.T, doc string) intent.Version {
	t.Helper()
	v, _, err := intent.DecodePartial([]byte(doc))
	if err != nil {
		t.Fatalf("DecodePartial(%s): %v", doc, err)
	}
	return v
}

func stored(t *testing.T, obj string) intent.StoredResource {
	t.Helper()
	v, _, err := intent.DecodePartial([]byte(`{"resources": [` + obj + `]}`))
	if err != nil {
		t.Fatalf("stored(%s): %v", obj, err)
	}
	v.Normalize()
	r := v.Resources[0]
	return intent.StoredResource{ID: r.ID, ResourceSet: r.ResourceSet, Requires: r.Requires, Hash: r.Hash()}
}

// purged marks the resource object obj purged: another intent.
func purged(obj string) string { return strings.TrimSuffix(obj, "}") + `,"purged":true}` }

func TestMergePartial(t *testing.T) {
	t.Parallel()
	a1, a2, a3, b1, c1, s1, s2 := file("/a1"), file("/a2"), file("/a3"), file("/b1"), file("/c1"), file("/s1"), file("/s2")
	base := []intent.StoredResource{
		stored(t, inSet(res("/a1", s1), "a")),
		stored(t, inSet(res("/a2", a1), "a")),
		stored(t, inSet(res("/b1", s1), "b")),
		stored(t, inSet(res("/c1", s1), "c")),
		stored(t, res("/s1")),
	}
	ids := func(m intent.Merge) (rs, kept []string) {
		for _, r := range m.Resources {
			rs = append(rs, r.ID.String())
		}
		for _, r := range m.Kept {
			kept = append(kept, r.ID.String())
		}
		return rs, kept
	}
	tests := []struct {
		name      string
		base      []intent.StoredResource
		partial   string
		removed   []string
		resources []string // ids of Merge.Resources
		kept      []string // ids of Merge.Kept
		reason    string
	}{
		{
			name:      "into nothing",
			partial:   export(inSet(res("/a1", s1), "a"), res("/s1")),
			resources: []string{a1, s1},
			reason:    "with no stored version, the partial export is the version",
		},
		{
			name: "replace, remove, add",
			base: base,
			partial: export(inSet(purged(res("/a1", s1)), "a"), inSet(res("/a3", s2, a1), "a"),
				res("/s2"), res("/s1")),
			removed:   []string{"b", "never-existed"},
			resources: []string{a1, a3, s1, s2},
			kept:      []string{c1},
			reason: "set a is replaced wholly (a1 changed, a2 gone, a3 new), b removed, an unknown set removed " +
				"harmlessly, s2 added, s1 repeated unchanged, c untouched",
		},
		{
			name:      "shared only",
			base:      base,
			partial:   export(res("/s2", s1)),
			resources: []string{s2},
			kept:      []string{a1, a2, b1, c1, s1},
			reason:    "adding a shared resource keeps every set",
		},
		{
			name:    "remove only",
			base:    base,
			partial: export(),
			removed: []string{"a", "a", "c"},
			kept:    []string{b1, s1},
			reason:  "a set named twice is removed once",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			partial := decodePartial(t, tt.partial)
			before := fmt.Sprintf("%#v", partial)
			m, err := intent.MergePartial(tt.base, partial, tt.removed)
			if err != nil {
				t.Fatalf("MergePartial() = %v (%s)", err, tt.reason)
			}
			rs, kept := ids(m)
			if !slices.Equal(rs, tt.resources) || !slices.Equal(kept, tt.kept) {
				t.Errorf("MergePartial() resources %q, kept %q; want %q, %q (%s)", rs, kept, tt.resources, tt.kept, tt.reason)
			}
			if after := fmt.Sprintf("%#v", partial); after != before {
				t.Errorf("MergePartial changed the partial export:\n%s\n%s", before, after)
			}
			// The merged version is a valid version.
			var v intent.Version
			v.Resources = append(v.Resources, m.Resources...)
			for _, k := range m.Kept {
				v.Resources = append(v.Resources, intent.Resource{ID: k.ID, Attributes: map[string]any{"path": k.ID.Value},
					Requires: k.Requires, ResourceSet: k.ResourceSet})
			}
			v.Normalize()
			if err := v.Validate(); err != nil {
				t.Errorf("the merged version does not validate: %v", err)
			}
		})
	}
}

func TestMergePartialRefusals(t *testing.T) {
	t.Parallel()
	a1, c1, s1, zz := file("/a1"), file("/c1"), file("/s1"), file("/zz")
	base := []intent.StoredResource{
		stored(t, inSet(res("/a1", s1), "a")),
		stored(t, inSet(res("/c1", s1), "c")),
		stored(t, res("/s1")),
	}
	tests := []struct {
		name    string
		base    []intent.StoredResource
		partial string
		removed []string
		want    []intent.FieldProblem
		reason  string
	}{
		{
			name:    "shared resource differs",
			base:    base,
			partial: export(purged(res("/s1"))),
			want: []intent.FieldProblem{{"/resources/0", fmt.Sprintf(
				"shared resource %q differs from the stored one; shared resources change only in a full export", s1)}},
			reason: "other sets may rely on it",
		},
		{
			name:    "resource changes set",
			base:    base,
			partial: export(inSet(res("/s1"), "a"), inSet(res("/a1"), "b"), res("/c1")),
			want: []intent.FieldProblem{
				{"/resources/0/resource_set", fmt.Sprintf("resource %q is in the shared set in the stored version and in "+
					`resource set "a" here: a resource changes set only in a full export`, s1)},
				{"/resources/1/resource_set", fmt.Sprintf(`resource %q is in resource set "a" in the stored version and in `+
					`resource set "b" here: a resource changes set only in a full export`, a1)},
				{"/resources/2/resource_set", fmt.Sprintf(`resource %q is in resource set "c" in the stored version and in `+
					`the shared set here: a resource changes set only in a full export`, c1)},
			},
			reason: "each names the id and both sets",
		},
		{
			name:    "set both updated and removed",
			base:    base,
			partial: export(inSet(res("/a1", s1), "a")),
			removed: []string{"a"},
			want: []intent.FieldProblem{{"/removed_resource_sets/0",
				`resource set "a" is both updated (/resources/0 is one of its resources) and removed`}},
			reason: "the contradiction is refused, not resolved either way",
		},
		{
			name:    "requires across sets and outside",
			base:    base,
			partial: export(inSet(res("/a1", s1, zz, c1, s1), "a"), res("/s2", c1)),
			want: []intent.FieldProblem{
				{"/resources/0/requires/1", fmt.Sprintf("%q is not in this version", zz)},
				{"/resources/0/requires/2", acrossSets(a1, "a", c1, "c")},
				{"/resources/1/requires/0", sharedRequiresSet(file("/s2"), c1, "c")},
			},
			reason: "checked against the stored resources (DecodePartial could not); indexes are the export's, although the requires are unsorted with a duplicate",
		},
		{
			name:    "requires into a removed set",
			base:    base,
			partial: export(res("/s2", c1)),
			removed: []string{"c"},
			want:    []intent.FieldProblem{{"/resources/0/requires/0", fmt.Sprintf("%q is not in this version", c1)}},
			reason:  "the merged version is checked as a whole",
		},
		{
			name:    "inconsistent stored version",
			base:    []intent.StoredResource{stored(t, res("/s1")), {ID: resource.MustParse(file("/s3")), Requires: []resource.ID{resource.MustParse(zz)}}},
			partial: export(),
			want:    []intent.FieldProblem{{"", fmt.Sprintf("stored resource %q: %q is not in this version", file("/s3"), zz)}},
			reason:  "a stored resource has no place in the export: it is named in the detail",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			partial := decodePartial(t, tt.partial)
			m, err := intent.MergePartial(tt.base, partial, tt.removed)
			var ve *intent.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("MergePartial() = %+v, %v; want a *ValidationError (%s)", m, err, tt.reason)
			}
			if !slices.Equal(ve.Problems, tt.want) {
				t.Errorf("problems (%s):\n got %q\nwant %q", tt.reason, ve.Problems, tt.want)
			}
		})
	}
}

func TestMergePartialChecksHandBuiltExports(t *testing.T) {
	t.Parallel()
	s1, zz := file("/s1"), file("/zz")
	base := []intent.StoredResource{stored(t, res("/s1"))}
	partial := intent.Version{Resources: []intent.Resource{
		{ResourceSet: "x"},
		{ID: resource.MustParse(file("/b")), Attributes: map[string]any{}},
		{ID: resource.MustParse(file("/a")), Attributes: map[string]any{"path": "/a"},
			Requires: []resource.ID{resource.MustParse(zz), resource.MustParse(s1)}},
	}}
	want := []intent.FieldProblem{
		{"/resources/0/id", `resource id "[,=]": type is empty`},
		{"/resources/1/attributes/path", fmt.Sprintf(`is missing: the id %q names attribute "path"`, file("/b"))},
		{"/resources/2/requires/0", fmt.Sprintf("%q is not in this version", zz)},
	}
	_, err := intent.MergePartial(base, partial, nil)
	var ve *intent.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("MergePartial() = %v; want a *ValidationError", err)
	}
	if !slices.Equal(ve.Problems, want) {
		t.Errorf("problems (a partial export not from DecodePartial is checked whole, in its own order):\n got %q\nwant %q",
			ve.Problems, want)
	}
}
