package lsm

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzCheck decodes lifecycles from JSON, as the catalog stores them, and
// checks them. Check never panics; a lifecycle it accepts answers every
// event of every state without panicking, every event it allows leads to
// a transfer, and following auto transfers that do not validate from any
// state stops (the point of the auto-loop rule).
func FuzzCheck(f *testing.F) {
	simple, err := json.Marshal(Simple())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(simple)
	small, _ := json.Marshal(tiny())
	f.Add(small)
	f.Add([]byte(`{"name":"x","start":"a","states":{"a":{"name":"a","model_state":"candidate"}},"transfers":[{"source":"a","target":"a","trigger":"auto"}]}`))
	f.Add([]byte(`{"name":"x","start":"a","states":{"a":{"name":"a","model_state":"active","export":true},"b":{"name":"b","model_state":"inactive","terminal":true}},"transfers":[{"source":"a","target":"b","error":"a","trigger":"resource","target_operation":["promote"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var l Lifecycle
		if json.Unmarshal(data, &l) != nil {
			return
		}
		err := l.Check()
		if err != nil {
			var ce *CheckError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("Check returned %v", err)
			}
			return
		}
		for name := range l.States {
			for _, ev := range l.Allowed(name) {
				tr, err := l.Next(name, ev)
				if err != nil || tr.Source != name || tr.Trigger != ev.Trigger {
					t.Fatalf("%s allows %s, but Next gives %+v, %v", name, ev, tr, err)
				}
				ApplyAll(tr.TargetOperation, Sets{Candidate: map[string]any{"a": 1.0}})
				ApplyAll(tr.ErrorOperation, Sets{Active: map[string]any{"a": 1.0}})
			}
			for _, trig := range triggers {
				_, _ = l.Next(name, Event{Trigger: trig, Target: name})
			}
			state := name
			for steps := 0; ; steps++ {
				tr, ok := l.AutoFrom(state)
				if !ok || tr.Validate {
					break
				}
				if steps > len(l.States) {
					t.Fatalf("auto transfers loop from %s", name)
				}
				state = tr.Target
			}
		}
	})
}
