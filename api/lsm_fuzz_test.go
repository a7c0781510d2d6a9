package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzEditBody feeds arbitrary PATCH /lsm/v2 bodies through the decoder
// and applyEdits, as editInstance does, against a fixed set of
// attributes. Neither panics; a refusal is a 4xx problem whose fields
// point into the body; the attributes edited are never changed in place;
// what applyEdits accepts is a dict that encodes as JSON again.
func FuzzEditBody(f *testing.F) {
	for _, seed := range []string{
		`{"current_version": 3, "edit": [{"operation": "replace", "target": "memory", "value": 8}]}`,
		`{"current_version": 3, "edit": [{"edit_id": "a", "operation": "merge", "target": "net", "value": {"dns": null, "mtu": 9000}}]}`,
		`{"current_version": 3, "edit": [{"operation": "remove", "target": "disks[name=data]"}]}`,
		`{"current_version": 3, "edit": [{"operation": "replace", "target": "disks[name=new].size", "value": 5}, {"operation": "remove", "target": "tags[0]"}]}`,
		`{"current_version": 3, "edit": [{"operation": "replace", "target": ".", "value": [1]}]}`,
		`{"current_version": 3, "edit": [{"operation": "merge", "target": "disks[*]", "value": {}}]}`,
		`{"edit": [{"operation": "nope", "target": "a\\.b"}]}`,
		`{"current_version": "3"}`,
		`[]`,
	} {
		f.Add([]byte(seed))
	}
	attrs := func() map[string]any {
		return map[string]any{
			"name":   "web",
			"memory": json.Number("4"),
			"net":    map[string]any{"dns": "10.0.0.1", "mtu": json.Number("1500")},
			"disks":  []any{map[string]any{"name": "root", "size": json.Number("20")}, map[string]any{"name": "data", "size": json.Number("100")}},
			"tags":   []any{"a", "b"},
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req editInstanceRequest
		if err := decodeJSON(body, &req); err != nil {
			wantProblem(t, err, "")
			return
		}
		in, pristine := attrs(), attrs()
		out, err := applyEdits(in, req.Edit)
		if !reflect.DeepEqual(in, pristine) {
			t.Fatalf("applyEdits changed its input: %v", in)
		}
		if err != nil {
			wantProblem(t, err, "/edit")
			return
		}
		if out == nil {
			t.Fatal("applyEdits accepted the edits and returned no attributes")
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("the edited attributes do not encode: %v (%v)", err, out)
		}
	})
}

// wantProblem fails unless err is a 4xx *Problem whose fields all start
// with prefix.
func wantProblem(t *testing.T, err error, prefix string) {
	t.Helper()
	var p *Problem
	if !errors.As(err, &p) || p.Status < 400 || p.Status >= 500 {
		t.Fatalf("error %v (%T) is not a 4xx problem", err, err)
	}
	for _, fe := range p.Errors {
		if !strings.HasPrefix(fe.Field, prefix) {
			t.Fatalf("field %q of %+v is not under %q", fe.Field, p, prefix)
		}
	}
}
