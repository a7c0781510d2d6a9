package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// scrape returns the text of a server's metrics listener.
func scrape(t *testing.T, s *server.Server) string {
	t.Helper()
	resp, err := http.Get("http://" + s.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", s.MetricsAddr(), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v\n%s", s.MetricsAddr(), resp.StatusCode, err, b)
	}
	return string(b)
}

// exports reports whether a scrape holds the database-derived gauges, and
// checks that it says so in intend_metrics_lock_held.
func exports(t *testing.T, text string) bool {
	t.Helper()
	gauges := strings.Contains(text, "\nintend_resources{")
	held := strings.Contains(text, "\nintend_metrics_lock_held 1")
	if gauges != held || !held && !strings.Contains(text, "\nintend_metrics_lock_held 0") {
		t.Errorf("intend_resources present %v, but intend_metrics_lock_held says otherwise:\n%s", gauges, text)
	}
	return gauges
}

// TestClusterMetricsOneReplica: two servers on one database; exactly one
// exports the database-derived gauges (so sum() counts the cluster once),
// with build info and the environment's zero-filled series, and the other
// takes over when it stops.
func TestClusterMetricsOneReplica(t *testing.T) {
	db := testenv.Database(t)
	cfg := server.Config{DatabaseURL: db, MetricsListen: "127.0.0.1:0", MetricsLockEvery: 100 * time.Millisecond,
		Version: "lock-test"}
	c, a, _ := servertest.StartServer(t, cfg)
	_, b, _ := servertest.StartServer(t, cfg)
	env := servertest.NewEnvironment(t, c, "metrics", map[string]any{"autostart_agents": []string{}})
	// A released resource makes its agent known; no executor serves it.
	servertest.Release(t, c, env, []byte(`{"resources": [{"id": "fs::File[web,path=/nonexistent/x]",
		"attributes": {"path": "/nonexistent/x", "content": "x"}}]}`))

	var holder, other *server.Server
	wait.For(t, "a replica to take the metrics lock", 20*time.Second, func() error {
		ea, eb := exports(t, scrape(t, a)), exports(t, scrape(t, b))
		switch {
		case ea && eb:
			t.Fatal("both replicas export the cluster's gauges")
		case ea:
			holder, other = a, b
		case eb:
			holder, other = b, a
		}
		return wait.Unless(holder != nil, "neither replica exports the cluster's gauges")
	})
	text := scrape(t, holder)
	for _, want := range []string{
		`intend_build_info{goversion="go`,
		`version="lock-test"} 1`,
		`intend_resources{compliance="compliant",environment="` + env + `",result="deployed"} 0`,
		`intend_last_successful_deploy_timestamp_seconds{environment="` + env + `"} 0`,
		`intend_deploy_run_oldest_open_timestamp_seconds{environment="` + env + `"} `,
		`intend_resources{compliance="has_update",environment="` + env + `",result="new"} 1`,
		`intend_compiles_total{environment="` + env + `",result="failed"} 0`,
		`intend_agent_executors{agent="web",environment="` + env + `"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the holder's /metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("holder's /metrics:\n%s", text)
	}
	if exports(t, scrape(t, other)) {
		t.Fatal("the other replica exports too")
	}

	holder.Shutdown(context.Background())
	wait.For(t, "the other replica to take over after the holder stopped", 20*time.Second, func() error {
		return wait.Unless(exports(t, scrape(t, other)), "the other replica does not export the cluster's gauges")
	})
}
