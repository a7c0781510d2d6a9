package bounded

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/lsm"
)

// TestResultTravels: every field of a compiler.Result a compile sets comes
// back from a worker (Plugins is intend export's, set after the compile):
// a field added to Result and forgotten here would be lost by every
// bounded compile (the pools were, at first).
func TestResultTravels(t *testing.T) {
	t.Parallel()
	in := &compiler.Result{Instances: 1, Undefined: 1, Took: 3, DeclaresFacts: true,
		Services:         []lsm.Entity{{Name: "vm"}},
		PreviousServices: []lsm.Entity{{Name: "vm", Version: 1}},
		Pools:            []lsm.Pool{{Name: "vlan", Kind: lsm.PoolVLAN, From: 1, To: 2}},
		Parameters:       map[string]map[string]json.RawMessage{"vm": {"a": json.RawMessage(`{}`)}},
		Resources:        []compiler.Resource{{ID: "fs::File[h,path=/a]", Origin: "resources.a"}},
	}
	in.Project.Name = "p"
	b, err := json.Marshal(toWire(in))
	if err != nil {
		t.Fatal(err)
	}
	var w result
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	out := w.toResult()
	v, got := reflect.ValueOf(*in), reflect.ValueOf(*out)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if name == "Plugins" {
			continue
		}
		if v.Field(i).IsZero() {
			t.Errorf("the test sets no %s", name)
		}
		if !reflect.DeepEqual(v.Field(i).Interface(), got.Field(i).Interface()) {
			t.Errorf("%s: %v came back as %v", name, v.Field(i).Interface(), got.Field(i).Interface())
		}
	}
}
