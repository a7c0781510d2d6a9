// Package prometheus_test checks deploy/prometheus's rules with the real
// promtool: their syntax, their unit tests (rules_test.yml), and the
// metrics they read, on live scrapes of a server and an executor.
package prometheus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/intendhq/intend/executor"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// promtool returns the promtool binary. Missing, it fails the test with
// what to install, as a missing PostgreSQL or sshd does: no test skips.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is missing: `make tools` installs it (Debian's prometheus package)")
	}
	return p
}

// run runs promtool with args and stdin, failing the test with its output
// when it fails.
func run(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestRules: rules.yml is valid and its unit tests pass.
func TestRules(t *testing.T) {
	t.Parallel()
	if out := run(t, nil, "check", "rules", "rules.yml"); !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool check rules says:\n%s", out)
	}
	run(t, nil, "test", "rules", "rules_test.yml")
}

// TestRulesCatchABrokenRule: the unit tests fail on a rule that does not
// do what they expect, so a passing run means something.
func TestRulesCatchABrokenRule(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile("rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("rules_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		reason, alert, expr, broken string
	}{
		{"the comparison turned", "IntendAgentWithoutExecutor",
			`expr: intend_agent_executors == 0`, `expr: intend_agent_executors > 0`},
		// The usual mistake: absent() of the series is quiet while every
		// replica's scrape fails, for up == 0 is a series.
		{"absent() of the targets, not of the live ones", "IntendServerDown",
			`expr: absent(up{job="intend-server"} == 1)`, `expr: absent(up{job="intend-server"})`},
		{"a sum over every executor, whatever its agents", "IntendExecutorsDown",
			`expr: sum by (executor_environment, executor_agents) (up{job="intend-executor"}) == 0`,
			`expr: sum(up{job="intend-executor"}) == 0`},
	} {
		broken := bytes.Replace(rules, []byte(c.expr), []byte(c.broken), 1)
		if bytes.Equal(broken, rules) {
			t.Fatalf("%s: the rule to break is not in rules.yml", c.reason)
		}
		dir := t.TempDir()
		for name, b := range map[string][]byte{"rules.yml": broken, "rules_test.yml": tests} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(promtool(t), "test", "rules", "rules_test.yml")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), c.alert) {
			t.Errorf("%s: promtool test rules on a broken %s: %v, want a failure naming the alert\n%s", c.reason, c.alert, err, out)
		}
	}
}

// runbooks is where every alert's runbook_url points: a section of
// docs/operations.md, on the repository's default branch.
const runbooks = "https://github.com/intendhq/intend/blob/main/docs/operations.md#"

// TestRunbooks: every alert has a runbook_url into docs/operations.md, and
// the section it names exists there (the anchor GitHub gives a heading).
func TestRunbooks(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(string(doc))
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			url := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, runbooks)
			switch {
			case !ok:
				t.Errorf("%s: runbook_url %q, want one in %s", r.Alert, url, runbooks)
			case !anchors[anchor]:
				t.Errorf("%s: runbook_url %q names no section of docs/operations.md", r.Alert, url)
			case anchor != strings.ToLower(r.Alert):
				t.Errorf("%s: runbook_url %q, want the section of its name (#%s)", r.Alert, url, strings.ToLower(r.Alert))
			}
		}
	}
	if alerts < 13 {
		t.Errorf("found %d alerts in rules.yml: the parse misses them", alerts)
	}
}

// headingAnchors returns the anchors GitHub gives the Markdown headings of
// doc: the text lower-cased, without punctuation, spaces as dashes, a
// repeated anchor suffixed -1, -2, …; code blocks hold no headings.
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	fence := false
	for line := range strings.Lines(doc) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fence || m == nil {
			continue
		}
		slug := strings.ReplaceAll(punctuation.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		a := slug
		for n := 1; out[a]; n++ {
			a = fmt.Sprintf("%s-%d", slug, n)
		}
		out[a] = true
	}
	return out
}

var (
	heading     = regexp.MustCompile(`^#{1,6} +(.+?) *#*$`)
	punctuation = regexp.MustCompile(`[^\p{L}\p{N}\p{M} _-]`)
)

var listenLog = regexp.MustCompile(`msg="serving /metrics and /healthz" listen=(\S+)`)

// TestCheckMetrics: promtool check metrics finds no problem in live
// scrapes of a server (its metrics listener) and of an executor (--listen)
// that have deployed a resource, and every metric the rules read is in
// one of them.
func TestCheckMetrics(t *testing.T) {
	promtool(t)
	c, srv, _ := servertest.StartServer(t, server.Config{MetricsListen: "127.0.0.1:0", Version: "promtool-test",
		ReconcileEvery: time.Second, SchedulerPoll: time.Second})
	_, hostPort, namespace := testenv.Temporal(t)
	env := servertest.NewEnvironment(t, c, "prom", map[string]any{"autostart_agents": []string{}})
	token := servertest.ExecutorToken(t, c, env, "remote")
	ex := servertest.StartFunc(t, func(ctx context.Context, out io.Writer) error {
		cmd := executor.Command(executor.WithBuiltins(), executor.WithVersion("promtool-test"),
			executor.WithGetenv(func(k string) string { return map[string]string{"INTEND_TOKEN": token}[k] }))
		cmd.SetArgs([]string{"--environment", env, "--agent", "remote", "--server", srv.URL(), "--listen", "127.0.0.1:0",
			"--temporal-address", hostPort, "--temporal-namespace", namespace})
		cmd.SetOut(out)
		cmd.SetErr(out)
		return cmd.ExecuteContext(ctx)
	})
	var execAddr string
	for deadline := time.Now().Add(30 * time.Second); execAddr == "" && time.Now().Before(deadline); {
		if m := listenLog.FindStringSubmatch(ex.Out.String()); m != nil {
			execAddr = m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	if execAddr == "" {
		t.Fatalf("the executor never said where it listens\n%s", ex.Out)
	}

	target := filepath.Join(t.TempDir(), "f.txt")
	body, _ := json.Marshal(map[string]any{"resources": []map[string]any{{
		"id": "fs::File[remote,path=" + target + "]", "attributes": map[string]any{"path": target, "content": "x"},
	}}})
	reqID := servertest.Release(t, c, env, body)
	if run, err := c.WaitRequest(context.Background(), env, reqID, 60*time.Second, nil); err != nil || run.Deployed != 1 {
		t.Fatalf("run = %+v, %v\n%s", run, err, ex.Out)
	}

	rules, err := os.ReadFile("rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var scraped strings.Builder
	for name, addr := range map[string]string{"server": srv.MetricsAddr(), "executor": execAddr} {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		text, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("scrape the %s: %d %v", name, resp.StatusCode, err)
		}
		scraped.Write(text)
		if out := run(t, text, "check", "metrics"); strings.TrimSpace(out) != "" {
			t.Errorf("promtool check metrics on the %s's scrape says:\n%s", name, out)
		}
	}
	// Every metric the rules' expressions read is in a scrape, but those
	// that appear only with their first event.
	later := map[string]string{
		"temporal_activity_execution_failed_total":             "counted from the first failed activity",
		"intend_lsm_transient_oldest_change_timestamp_seconds": "one series per transient state of a registered entity",
		"intend_lsm_transfers_total":                           "counted from the first transfer of a service instance",
	}
	read := 0
	for _, expr := range regexp.MustCompile(`(?m)^\s+expr: (.*)$`).FindAllStringSubmatch(string(rules), -1) {
		for _, m := range regexp.MustCompile(`(^|[^:a-z_])((?:intend|temporal)_[a-z_]+)`).FindAllStringSubmatch(expr[1], -1) {
			read++
			if _, ok := later[m[2]]; !ok && !strings.Contains(scraped.String(), "\n"+m[2]) {
				t.Errorf("rules.yml reads %s, which neither scrape has", m[2])
			}
		}
	}
	if read < 10 {
		t.Errorf("found %d metrics read by rules.yml's expressions: the pattern misses them", read)
	}
}
