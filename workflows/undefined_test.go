package workflows

import "testing"

// TestDeployCountsUndefinedAsSkipped: the resources the plan recorded
// itself (undefined ones and their dependents) count as skipped, once: a
// run continued as new carries them already.
func TestDeployCountsUndefinedAsSkipped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		carry       *DeployResult
		wantSkipped int
		reason      string
	}{
		{"first run", nil, 3, "the plan's undefined resources are skipped"},
		{"continued", &DeployResult{Skipped: 5}, 5, "the carried counts hold them already"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake([]BatchRef{{Seq: 1, Agent: "a", Level: 0, Count: 1, First: "c"}})
			f.plan.Total, f.plan.Undefined = 4, 3
			res, err := run(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1, Version: 7, Carry: tt.carry})
			if err != nil {
				t.Fatal(err)
			}
			if res.Total != 4 || res.Deployed != 1+deployedOf(tt.carry) || res.Skipped != tt.wantSkipped {
				t.Errorf("result = %+v; want total 4 and %d skipped (%s)", res, tt.wantSkipped, tt.reason)
			}
			if f.finished == nil || f.finished.Skipped != tt.wantSkipped {
				t.Errorf("finish = %+v; want %d skipped (%s)", f.finished, tt.wantSkipped, tt.reason)
			}
			if len(f.started) != 1 {
				t.Errorf("dispatched %d batches; want 1: held resources go to no executor", len(f.started))
			}
		})
	}
}

func deployedOf(r *DeployResult) int {
	if r == nil {
		return 0
	}
	return r.Deployed
}
