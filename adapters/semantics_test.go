package adapters_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
)

// reporter is a recorder whose create/update/delete report whether they
// changed the target (nil: they say nothing).
type reporter struct {
	recorder
	changed *bool
}

func (r *reporter) report(hc *adapters.Context) {
	if r.changed != nil {
		hc.SetChanged(*r.changed)
	}
}

func (r *reporter) Create(ctx context.Context, hc *adapters.Context, d adapters.Resource) error {
	r.report(hc)
	return r.recorder.Create(ctx, hc, d)
}

func (r *reporter) Update(ctx context.Context, hc *adapters.Context, d adapters.Resource, diff adapters.Diff) error {
	r.report(hc)
	return r.recorder.Update(ctx, hc, d, diff)
}

func (r *reporter) Delete(ctx context.Context, hc *adapters.Context, d adapters.Resource) error {
	r.report(hc)
	return r.recorder.Delete(ctx, hc, d)
}

// TestRunHonoursSetChanged: after a create, update or delete the adapter's
// own word on whether it changed the target wins over the engine's (an
// exec-like adapter that acted and found the same state); an adapter that
// says nothing leaves the engine's decision, and a dry-run never acts, so
// nothing is reported.
func TestRunHonoursSetChanged(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		name     string
		target   map[string]any
		purged   bool
		changed  *bool
		dryRun   bool
		want     bool
		wantOp   adapters.Operation
		reported bool
	}{
		{"update said unchanged", map[string]any{"name": "app", "login": false}, false, &no, false, false, adapters.OpUpdate, true},
		{"create said unchanged", nil, false, &no, false, false, adapters.OpCreate, true},
		{"delete said unchanged", map[string]any{"name": "app"}, true, &no, false, false, adapters.OpDelete, true},
		{"update said changed", map[string]any{"name": "app", "login": false}, false, &yes, false, true, adapters.OpUpdate, true},
		{"update said nothing: the engine decides", map[string]any{"name": "app", "login": false}, false, nil, false, true, adapters.OpUpdate, false},
		{"dry-run: no operation ran, the engine decides", map[string]any{"name": "app", "login": false}, false, &no, true, true, adapters.OpUpdate, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &reporter{recorder: recorder{target: tc.target}, changed: tc.changed}
			hc := adapters.NewContext()
			d := role(map[string]any{"name": "app", "login": true})
			d.Purged = tc.purged
			out, err := adapters.Run(context.Background(), h, hc, d, tc.dryRun)
			if err != nil {
				t.Fatal(err)
			}
			if out.Changed != tc.want || out.Action != tc.wantOp {
				t.Errorf("outcome = %+v, want changed %v by %s", out, tc.want, tc.wantOp)
			}
			if _, reported := hc.Changed(); reported != tc.reported {
				t.Errorf("Changed reported = %v, want %v", reported, tc.reported)
			}
		})
	}
}

// TestSkipped: Skipped classes an error skipped with its delay, which
// RetryAfterOf returns (as for throttled); the message is kept.
func TestSkipped(t *testing.T) {
	err := adapters.Skipped(errors.New("the cluster is being upgraded"), 90*time.Second)
	if c := adapters.ClassOf(err); c != adapters.ClassSkipped {
		t.Errorf("class = %s, want skipped", c)
	}
	if d := adapters.RetryAfterOf(err); d != 90*time.Second {
		t.Errorf("retry after = %s, want 1m30s", d)
	}
	if err.Error() != "skipped: the cluster is being upgraded" {
		t.Errorf("message = %q", err.Error())
	}
	// Through Run: an observe that skips fails the attempt with its class.
	h := &skipper{}
	_, err = adapters.Run(context.Background(), h, adapters.NewContext(), role(map[string]any{"name": "app"}), false)
	if adapters.ClassOf(err) != adapters.ClassSkipped || adapters.RetryAfterOf(err) != time.Minute {
		t.Errorf("Run error = %v (class %s), want skipped after 1m", err, adapters.ClassOf(err))
	}
}

type skipper struct{ recorder }

func (s *skipper) Observe(context.Context, *adapters.Context, adapters.Resource) (adapters.Observation, error) {
	return adapters.Observation{}, adapters.Skipped(errors.New("not yet"), time.Minute)
}
