package activities

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/sdk/testsuite"

	"github.com/intendhq/intend/internal/store/storetest"
	"github.com/intendhq/intend/internal/telemetry"
	"github.com/intendhq/intend/workflows"
)

// TestFinishDeployObservesEachRunOnce: a retried FinishDeploy (its first
// answer lost) does not count the run twice in the duration histogram.
func TestFinishDeployObservesEachRunOnce(t *testing.T) {
	t.Parallel()
	st, e, run, _ := storetest.Released(t, storetest.Things(3))
	tel, err := telemetry.New()
	if err != nil {
		t.Fatal(err)
	}
	o := &Orchestration{Store: st, Metrics: tel}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(o.FinishDeploy)
	for i := 0; i < 2; i++ {
		if _, err := env.ExecuteActivity(o.FinishDeploy, workflows.FinishInput{
			EnvironmentID: e.ID, Run: run, Status: "done", Deployed: 3}); err != nil {
			t.Fatal(err)
		}
	}
	m := &dto.Metric{}
	h, err := tel.DeployRunDuration.GetMetricWithLabelValues(e.Name, "deploy", "done")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.(interface{ Write(*dto.Metric) error }).Write(m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetHistogram().GetSampleCount(); n != 1 {
		t.Errorf("run observed %d times, want once", n)
	}
	r, err := st.GetRun(t.Context(), e.ID, run)
	if err != nil || r.Status != "done" || r.Deployed != 3 {
		t.Errorf("run = %+v, %v", r, err)
	}
}
