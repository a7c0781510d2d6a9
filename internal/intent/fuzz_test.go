package intent_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/intent"
)

// wireResource is a resource object of an export as encoding/json sees it.
type wireResource struct {
	ID            string         `json:"id"`
	Attributes    map[string]any `json:"attributes"`
	Requires      []string       `json:"requires,omitempty"`
	Purged        bool           `json:"purged"`
	SendEvent     bool           `json:"send_event"`
	ReceiveEvents bool           `json:"receive_events"`
	ReportOnly    bool           `json:"report_only"`
	Undefined     bool           `json:"undefined,omitempty"`
	ResourceSet   string         `json:"resource_set,omitempty"`
}

// encode writes v as an export with encoding/json.
func encode(t *testing.T, v intent.Version) []byte {
	t.Helper()
	var wire struct {
		Resources []wireResource `json:"resources"`
	}
	wire.Resources = []wireResource{}
	for _, r := range v.Resources {
		w := wireResource{ID: r.ID.String(), Attributes: r.Attributes, Purged: r.Purged,
			SendEvent: r.SendEvent, ReceiveEvents: r.ReceiveEvents, ReportOnly: r.ReportOnly, Undefined: r.Undefined,
			ResourceSet: r.ResourceSet}
		for _, q := range r.Requires {
			w.Requires = append(w.Requires, q.String())
		}
		wire.Resources = append(wire.Resources, w)
	}
	b, err := json.Marshal(wire)
	if err != nil {
		t.Fatalf("encode %v: %v", v, err)
	}
	return b
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(export(res("/a"), res("/b", file("/a")))))
	f.Add([]byte(export(res("/a", file("/b")), res("/b", file("/a")))))
	f.Add([]byte(`{"resources": [{"id": "net::Port[h,port=80]", "attributes": {"port": 80, "x": [1.5e3, null, {"k": "\u00e9\ud83d\ude00"}]},
		"purged": true, "send_event": true, "receive_events": false, "report_only": true}]}`))
	f.Add([]byte(`{"resources": [{"id": "net::Port[h,port=80]", "attributes": {"port": 80}, "undefined": true},
		{"id": "net::Port[h,port=81]", "attributes": {"port": 81}, "requires": ["net::Port[h,port=80]"], "undefined": false},
		{"id": "net::Port[h,port=82]", "attributes": {"port": 82}, "purged": true, "undefined": true}]}`))
	f.Add([]byte(`{"resources": [{"id": "x", "attributes": {}, "requires": [1, "y"], "colour": 1}], "z": 1}`))
	f.Add([]byte(`{"resources": [{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a", "path": "/a"}}]}`))
	f.Add([]byte(`{"resources": [`))
	f.Add([]byte(export(inSet(res("/a", file("/b")), "x"), res("/b"), inSet(res("/c", file("/a")), "y"))))
	f.Add([]byte(`{"resources": [` + inSet(res("/a", file("/s")), "x") + `], "removed_resource_sets": ["y", "x", ""]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkPartial(t, data)
		v, err := intent.DecodeBytes(data)
		if err != nil {
			var ve *intent.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("DecodeBytes() error %T %v is not a *ValidationError", err, err)
			}
			if len(ve.Problems) == 0 || len(ve.Problems) > intent.MaxProblems {
				t.Fatalf("DecodeBytes() gave %d problems", len(ve.Problems))
			}
			_, again := intent.DecodeBytes(data)
			if !reflect.DeepEqual(err, again) {
				t.Fatalf("DecodeBytes() is not deterministic:\n%v\n%v", err, again)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("DecodeBytes accepted invalid JSON %q", data)
		}
		if err := v.Validate(); err != nil {
			t.Fatalf("a decoded version does not validate: %v", err)
		}
		if !slices.IsSortedFunc(v.Resources, func(a, b intent.Resource) int { return strings.Compare(a.ID.String(), b.ID.String()) }) {
			t.Fatalf("resources are not sorted")
		}

		// encoding/json reads the same attributes (DecodeBytes refuses the
		// duplicate keys on which they would differ).
		var wire struct {
			Resources []wireResource `json:"resources"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&wire); err != nil {
			t.Fatalf("encoding/json refuses what DecodeBytes accepted: %v", err)
		}
		byID := map[string]map[string]any{}
		for _, w := range wire.Resources {
			byID[w.ID] = w.Attributes
		}
		for _, r := range v.Resources {
			if want := byID[r.ID.String()]; !reflect.DeepEqual(r.Attributes, want) {
				t.Fatalf("attributes of %s = %#v; encoding/json reads %#v", r.ID, r.Attributes, want)
			}
		}

		// Re-encoding changes the spelling but not the intent.
		v2, err := intent.DecodeBytes(encode(t, v))
		if err != nil {
			t.Fatalf("re-encoded version does not decode: %v", err)
		}
		if !reflect.DeepEqual(v, v2) {
			t.Fatalf("re-encoded version decodes differently:\n%#v\n%#v", v, v2)
		}
		for i := range v.Resources {
			if v.Resources[i].Hash() != v2.Resources[i].Hash() {
				t.Fatalf("hash of %s changed on re-encoding", v.Resources[i].ID)
			}
		}
	})
}

// checkPartial checks DecodePartial and MergePartial on data: refusals are
// deterministic *ValidationErrors; a partial export merged into nothing is
// refused exactly when it is not a valid full export (apart from its
// removed sets) and otherwise gives what DecodeBytes gives.
func checkPartial(t *testing.T, data []byte) {
	p, removed, err := intent.DecodePartial(data)
	if err != nil {
		var ve *intent.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("DecodePartial() error %T %v is not a *ValidationError", err, err)
		}
		if _, _, again := intent.DecodePartial(data); !reflect.DeepEqual(err, again) {
			t.Fatalf("DecodePartial() is not deterministic:\n%v\n%v", err, again)
		}
		return
	}
	if !json.Valid(data) {
		t.Fatalf("DecodePartial accepted invalid JSON %q", data)
	}
	// Without its removed sets, the partial export is a full one.
	var wire map[string]json.RawMessage
	if err := json.Unmarshal(data, &wire); err != nil {
		t.Fatal(err)
	}
	v, fullErr := intent.DecodeBytes([]byte(`{"resources":` + string(wire["resources"]) + `}`))
	m, err := intent.MergePartial(nil, p, removed)
	if err != nil {
		var ve *intent.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("MergePartial() error %T %v is not a *ValidationError", err, err)
		}
		for _, pr := range ve.Problems {
			if !strings.HasPrefix(pr.Path, "/resources/") || !strings.Contains(pr.Detail, "is not in this version") {
				t.Fatalf("MergePartial() into nothing reports %q: %s; want only requires outside the export", pr.Path, pr.Detail)
			}
		}
		if fullErr == nil {
			t.Fatalf("MergePartial() into nothing refuses what DecodeBytes accepts: %v", err)
		}
		return
	}
	if len(m.Kept) != 0 {
		t.Fatalf("MergePartial() into nothing kept %d resources", len(m.Kept))
	}
	if fullErr != nil {
		t.Fatalf("merged into nothing, the partial export is valid, but DecodeBytes refuses it: %v", fullErr)
	}
	if !reflect.DeepEqual(v.Resources, m.Resources) && len(v.Resources)+len(m.Resources) > 0 {
		t.Fatalf("MergePartial() into nothing =\n%#v\nDecodeBytes() =\n%#v", m.Resources, v.Resources)
	}
}

// FuzzAttributeValue compares the decoding of one attribute value with
// encoding/json's, and checks that the canonical encoding is stable.
func FuzzAttributeValue(f *testing.F) {
	for _, s := range []string{
		`1`, `-0.0e+5`, `"a\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00"`, `[]`, `{}`, `[1, [2, {"a": null}]]`,
		`{"b": 1, "a": 2}`, `{"a": 1, "a": 2}`, `1e309`, `[-1E+400, 1e-400]`, `"\ud800"`, `"` + "\xff" + `"`, `01`, `1.`, `tru`, `"\u00"`,
		strings.Repeat("[", 1001) + strings.Repeat("]", 1001),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		doc := `{"resources": [{"id": "a::B[h,n=1]", "attributes": {"n": 1, "x": ` + s + `}}]}`
		v, err := intent.DecodeBytes([]byte(doc))
		valid := json.Valid([]byte(s))
		if err != nil {
			if !valid {
				return
			}
			// encoding/json is laxer: it accepts duplicate keys, invalid
			// UTF-8 and unpaired surrogates, nests 10000 deep, and keeps
			// numbers beyond float64 as json.Number.
			msg := err.Error()
			for _, strict := range []string{"duplicate key", "invalid UTF-8", "unpaired surrogate", "nested deeper",
				"beyond the range of a 64-bit float"} {
				if strings.Contains(msg, strict) {
					return
				}
			}
			t.Fatalf("DecodeBytes refused valid JSON %q: %v", s, err)
		}
		if !valid {
			// s may close the attributes object itself, e.g. `1, "y": 2`.
			return
		}
		var want any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("encoding/json: %v", err)
		}
		r := v.Resources[0]
		if got := r.Attributes["x"]; !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeBytes read %#v; encoding/json reads %#v", got, want)
		}

		canon := r.CanonicalAttributes()
		if !json.Valid(canon) {
			t.Fatalf("CanonicalAttributes() = %q is not JSON", canon)
		}
		r2 := r
		dec = json.NewDecoder(bytes.NewReader(canon))
		dec.UseNumber()
		if err := dec.Decode(&r2.Attributes); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r2.Attributes, r.Attributes) {
			t.Fatalf("canonical form %s reads back as %#v; want %#v", canon, r2.Attributes, r.Attributes)
		}
		if again := r2.CanonicalAttributes(); !bytes.Equal(again, canon) {
			t.Fatalf("canonical form is not stable: %s then %s", canon, again)
		}
	})
}
