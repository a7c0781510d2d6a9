package adapters_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
)

// TestAppendLog: a line logged elsewhere joins the attempt's log masked
// of its secrets, its sensitive outputs sorted and limited to its
// attributes.
func TestAppendLog(t *testing.T) {
	hc := adapters.NewContext(adapters.WithSecrets(&adapters.Secrets{LookupEnv: func(string) (string, bool) { return "hunter2", true }}))
	defer hc.Close()
	if _, err := hc.ResolveSecrets(adapters.Resource{Attributes: map[string]any{"pw": map[string]any{"secret": "env:INTEND_SECRET_PW"}}}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	hc.AppendLog(adapters.LogLine{Time: at, Level: "INFO", Message: "pw hunter2",
		Attrs:            map[string]any{"out": "hunter2!", "n": 1, "list": []any{"a hunter2"}},
		SensitiveOutputs: []string{"out", "missing", "out"}})
	got := hc.Logs()
	want := []adapters.LogLine{{Time: at.UTC(), Level: "INFO", Message: "pw " + adapters.Masked,
		Attrs:            map[string]any{"out": adapters.Masked + "!", "n": 1, "list": []any{"a " + adapters.Masked}},
		SensitiveOutputs: []string{"out"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Logs() = %#v\nwant %#v", got, want)
	}
}

// plainHandler observes what it is given and is no Differ.
type plainHandler struct{ obs adapters.Observation }

func (h plainHandler) Observe(context.Context, *adapters.Context, adapters.Resource) (adapters.Observation, error) {
	return h.obs, nil
}
func (plainHandler) Create(context.Context, *adapters.Context, adapters.Resource) error { return nil }
func (plainHandler) Update(context.Context, *adapters.Context, adapters.Resource, adapters.Diff) error {
	return nil
}
func (plainHandler) Delete(context.Context, *adapters.Context, adapters.Resource) error { return nil }

// TestEngineDiff: EngineDiff is the diff Run computes for a handler that
// is not a Differ, for a create and an update.
func TestEngineDiff(t *testing.T) {
	desired := adapters.Resource{ID: resource.MustParse("t::T[a,name=x]"),
		Attributes: map[string]any{"name": "x", "mode": "0644", "n": 1}}
	for _, obs := range []adapters.Observation{
		{},
		{Exists: true, Attributes: map[string]any{"name": "x", "mode": "0600", "n": 1.0}},
	} {
		hc := adapters.NewContext()
		out, err := adapters.Run(context.Background(), plainHandler{obs}, hc, desired, true)
		hc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := adapters.EngineDiff(desired, obs); !reflect.DeepEqual(got, out.Diff) {
			t.Errorf("exists=%t: EngineDiff = %v, Run's diff = %v", obs.Exists, got, out.Diff)
		}
	}
}
