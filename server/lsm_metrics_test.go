package server_test

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
)

// metricValue returns the value of the sample of a scrape whose name and
// labels are exactly series (labels in the exposition's order, by name),
// or 0 when it has none.
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return f
		}
	}
	return 0
}

// TestLSMTransferMetrics: instances driven from create to up are counted
// in intend_lsm_transfers_total once per transfer, by the replica that
// wrote them, and the time they spent in each state they left is in
// intend_lsm_state_duration_seconds.
func TestLSMTransferMetrics(t *testing.T) {
	c, srv, _ := startValidated(t, server.Config{EmbeddedExecutor: true, MetricsListen: "127.0.0.1:0",
		ReconcileEvery: time.Second, SchedulerPoll: time.Second})
	env := newEnv(t, c, "lsmmetrics", nil)
	if err := uploadModel(t, c, env, lsmFileModel(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	names := []string{"web", "db"}
	for _, name := range names {
		r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
			map[string]any{"attributes": map[string]any{"name": name}})
		if r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
	}
	for _, name := range names {
		waitState(t, c, env, name, "up", "rejected", "failed")
	}

	labels := func(source, target, trigger string) string {
		return `intend_lsm_transfers_total{entity="vm",environment="` + env + `",error="false",source="` + source +
			`",target="` + target + `",trigger="` + trigger + `"}`
	}
	up := labels("creating", "up", "resource")
	// The counter moves once the transfer's transaction has committed,
	// just after the instance reads up.
	var text string
	wait.For(t, "the transfers to up to be counted", 10*time.Second, func() error {
		text = scrape(t, srv)
		got := metricValue(t, text, up)
		return wait.Unless(got >= float64(len(names)), "%s = %v, want %d", up, got, len(names))
	})
	n := float64(len(names))
	for _, c := range []struct {
		series string
		want   float64
	}{
		{labels("", "start", "create"), n},
		{labels("start", "acknowledged", "auto"), n},
		{labels("acknowledged", "creating", "auto"), n},
		{up, n},
		{`intend_lsm_state_duration_seconds_count{entity="vm",environment="` + env + `",state="start"}`, n},
		{`intend_lsm_state_duration_seconds_count{entity="vm",environment="` + env + `",state="acknowledged"}`, n},
		{`intend_lsm_state_duration_seconds_count{entity="vm",environment="` + env + `",state="creating"}`, n},
		{`intend_lsm_state_duration_seconds_bucket{entity="vm",environment="` + env + `",state="creating",le="+Inf"}`, n},
		// nothing left up yet
		{`intend_lsm_state_duration_seconds_count{entity="vm",environment="` + env + `",state="up"}`, 0},
	} {
		if got := metricValue(t, text, c.series); got != c.want {
			t.Errorf("%s = %v, want %v", c.series, got, c.want)
		}
	}
	// The time in creating includes a deploy: more than nothing.
	if sum := metricValue(t, text, `intend_lsm_state_duration_seconds_sum{entity="vm",environment="`+env+`",state="creating"}`); sum <= 0 {
		t.Errorf("time in creating sums to %v s, want more than 0", sum)
	}
	if t.Failed() {
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, "intend_lsm_") && !strings.Contains(line, "_bucket") {
				t.Log(line)
			}
		}
	}
}
