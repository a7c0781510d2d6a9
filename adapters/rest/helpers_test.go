package rest_test

import (
	"context"
	"maps"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/adapters/rest"
)

// testAgent is the agent of every object of these tests.
const testAgent = "rest-test"

// object returns the rest::Object named name (the id's value) with attrs,
// "name" added.
func object(name string, attrs map[string]any) adapters.Resource {
	a := maps.Clone(attrs)
	a["name"] = name
	return adapters.Resource{
		ID:         resource.ID{Type: rest.ObjectType, Agent: testAgent, Attribute: "name", Value: name},
		Attributes: a,
	}
}

// purged returns r purged.
func purged(r adapters.Resource) adapters.Resource {
	r.Purged = true
	return r
}

// apply runs one attempt on r through adapters.Run, the engine the
// executor uses, with env: secret references resolved from the process
// environment (INTEND_SECRET_ variables), as an executor does. It returns
// the outcome, the attempt's context (its log lines and facts) and the
// error.
func apply(t testing.TB, r adapters.Resource, dryRun bool) (adapters.Outcome, *adapters.Context, error) {
	t.Helper()
	hc := adapters.NewContext(adapters.WithSecrets(&adapters.Secrets{}))
	t.Cleanup(hc.Close)
	out, err := adapters.Run(context.Background(), rest.Object{}, hc, r, dryRun)
	return out, hc, err
}

// mustApply is apply that fails the test on an error and checks the
// operation the engine decided.
func mustApply(t testing.TB, r adapters.Resource, dryRun bool, want adapters.Operation) (adapters.Outcome, *adapters.Context) {
	t.Helper()
	out, hc, err := apply(t, r, dryRun)
	if err != nil {
		t.Fatalf("%s (dry-run %v): %v\nlog: %v", r.ID, dryRun, err, hc.Logs())
	}
	if out.Action != want {
		t.Fatalf("%s (dry-run %v): decided %s, want %s (diff %v)\nlog: %v", r.ID, dryRun, out.Action, want, out.Diff, hc.Logs())
	}
	return out, hc
}
