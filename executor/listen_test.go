package executor_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/temporalconn"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server/servertest"
)

var listenLog = regexp.MustCompile(`msg="serving /metrics and /healthz" listen=(\S+)`)

// get fetches url and returns its status and body.
func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestListen: an executor with --listen (here INTEND_EXECUTOR_LISTEN)
// serves its metrics, batch metrics included once it ran a batch, and a
// /healthz that answers 200 while it serves, without credentials; a bad
// address fails it at start.
func TestListen(t *testing.T) {
	_, hostPort, namespace := testenv.Temporal(t)
	c, url := startServer(t, hostPort, temporalconn.Security{})
	env := newEnv(t, c, map[string]any{"autostart_agents": []string{}})
	token := servertest.ExecutorToken(t, c, env, "remote")
	args := []string{"--environment", env, "--agent", "remote", "--server", url,
		"--temporal-address", hostPort, "--temporal-namespace", namespace}

	out, err := runExecutor(t, map[string]string{"INTEND_TOKEN": token}, append(args, "--listen", "no-port")...)
	if err == nil || !strings.Contains(err.Error(), "--listen no-port") {
		t.Errorf("--listen no-port: %v, want an error naming the setting\n%s", err, out)
	}

	ex := startExecutor(t, map[string]string{"INTEND_TOKEN": token, "INTEND_EXECUTOR_LISTEN": "127.0.0.1:0"},
		append(args, "--name", "exec-listen")...)
	var base string
	wait.For(t, "the executor to say where it listens", 30*time.Second, func() error {
		m := listenLog.FindStringSubmatch(ex.Out.String())
		if m == nil {
			return fmt.Errorf("not in its output:\n%s", ex.Out)
		}
		base = "http://" + m[1]
		return nil
	})
	waitExecutor(t, c, env, "exec-listen", ex.Out)
	if code, body := get(t, http.MethodGet, base+"/healthz"); code != http.StatusOK || !strings.Contains(body, `"ok"`) {
		t.Errorf("GET /healthz of a serving executor = %d %s, want 200 ok", code, body)
	}

	deployFile(t, c, env, "remote", "scraped\n", "scraped\n")
	code, body := get(t, http.MethodGet, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d\n%s", code, body)
	}
	for _, want := range []string{
		`intend_executor_batch_duration_seconds_count{agent="remote",environment="` + env + `"} 1`,
		`intend_executor_batch_resources_count{environment="` + env + `"} 1`,
		`intend_resource_actions_total{action="deploy",environment="` + env + `",result="deployed"} 1`,
		`intend_build_info{goversion="go`,
		`version="exec-test"} 1`,
		"temporal_",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the executor's /metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
	if code, _ := get(t, http.MethodPost, base+"/metrics"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics = %d, want 405", code)
	}
	if code, _ := get(t, http.MethodGet, base+"/api/v1/environments"); code != http.StatusNotFound {
		t.Errorf("GET /api/v1/environments on the executor's listener = %d, want 404: it serves two paths only", code)
	}
	if err := ex.Stop(); err != nil {
		t.Fatalf("executor: %v\n%s", err, ex.Out)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/healthz", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("GET /healthz after the executor stopped = %d, want no listener", resp.StatusCode)
	}
}
