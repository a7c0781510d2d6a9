// Package grafana_test checks deploy/grafana's dashboard: it has the shape
// Grafana imports, and every metric its queries read is one that a live
// server or executor exports, or one that deploy/prometheus/rules.yml
// records.
package grafana_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/executor"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	GridPos    *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

// load reads intend.json.
func load(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("intend.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("intend.json: %v", err)
	}
	return d
}

// all returns every panel, those of collapsed rows included.
func all(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, all(p.Panels)...)
	}
	return out
}

// TestDashboardShape: intend.json is a dashboard Grafana imports as it is:
// a uid and title, a Prometheus datasource variable every query goes
// through, the environment variable, unique panel ids and a place on the
// grid for each panel.
func TestDashboardShape(t *testing.T) {
	t.Parallel()
	d := load(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want a uid, a title, schemaVersion >= 36", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		var q any
		_ = json.Unmarshal(v.Query, &q)
		if m, ok := q.(map[string]any); ok {
			q = m["query"]
		}
		vars[v.Name] = v.Type + " " + fmt.Sprint(q)
	}
	if vars["datasource"] != "datasource prometheus" {
		t.Errorf("templating datasource = %q, want a datasource variable of type prometheus", vars["datasource"])
	}
	if vars["environment"] != "query label_values(intend_resources, environment)" {
		t.Errorf("templating environment = %q, want a query on label_values(intend_resources, environment)", vars["environment"])
	}
	ids := map[int]string{}
	queries := 0
	for _, p := range all(d.Panels) {
		if p.ID == 0 {
			t.Errorf("panel %q has no id", p.Title)
		} else if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Title == "" || p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %d (%q) needs a title and a gridPos", p.ID, p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if !strings.Contains(string(p.Datasource), `"${datasource}"`) {
			t.Errorf("panel %q reads datasource %s, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			queries++
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: target %q has no expr, or no refId or a repeated one", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
		}
	}
	if queries < 20 {
		t.Errorf("%d queries: the dashboard is not all there", queries)
	}
}

// PromQL words that are not metric names: aggregations, binary and set
// operators, modifiers (functions are told apart by the "(" after them).
var keywords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`sum avg min max count stddev stdvar topk bottomk quantile count_values group limitk limit_ratio
		and or unless bool by without on ignoring group_left group_right offset atan2 inf nan start end`) {
		keywords[w] = true
	}
}

// grouping keywords take a parenthesised list of label names.
var grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// metricNames returns the metric names a PromQL expression selects, in
// order of appearance. It reads the expression as PromQL's lexer does,
// enough to skip what is not a name: strings, label matchers {…}, ranges
// and subqueries […], Grafana variables ($x, ${x}), numbers and durations,
// label lists of by/without/on/ignoring/group_left/group_right, function
// names (an identifier before "(") and keywords. A selector by __name__
// is an error: the names it matches are not written out.
func metricNames(expr string) ([]string, error) {
	var names []string
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
	}
	// stringEnd returns the index just past the string literal that
	// starts at i.
	stringEnd := func(i int) (int, error) {
		q := expr[i]
		for j := i + 1; j < len(expr); j++ {
			switch {
			case expr[j] == '\\' && q != '`':
				j++
			case expr[j] == q:
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d", i)
	}
	// skip returns the index just past the bracket that closes the one at
	// i, ignoring brackets in strings.
	skip := func(i int, open, close byte) (int, error) {
		depth := 0
		for j := i; j < len(expr); {
			switch expr[j] {
			case '"', '\'', '`':
				end, err := stringEnd(j)
				if err != nil {
					return 0, err
				}
				j = end
				continue
			case open:
				depth++
			case close:
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
			j++
		}
		return 0, fmt.Errorf("unclosed %c at %d", open, i)
	}
	depth := 0 // of parentheses
	for i := 0; i < len(expr); {
		c := expr[i]
		var err error
		switch {
		case c == '"' || c == '\'' || c == '`':
			i, err = stringEnd(i)
		case c == '{':
			end, e := skip(i, '{', '}')
			if e != nil {
				return nil, e
			}
			if strings.Contains(expr[i:end], "__name__") {
				return nil, fmt.Errorf("a selector by __name__ (%s): write the metric name out", expr[i:end])
			}
			i = end
		case c == '[':
			i, err = skip(i, '[', ']')
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				i, err = skip(i, '{', '}')
			}
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			word := expr[i:j]
			i = j
			for j < len(expr) && (expr[j] == ' ' || expr[j] == '\t' || expr[j] == '\n') {
				j++
			}
			next := byte(0)
			if j < len(expr) {
				next = expr[j]
			}
			switch lw := strings.ToLower(word); {
			case grouping[lw] && next == '(':
				i, err = skip(j, '(', ')')
			case lw == "offset":
				for i = j; i < len(expr) && (isIdent(expr[i], false) || expr[i] == '-'); i++ {
				}
			case keywords[lw], next == '(':
			default:
				names = append(names, word)
			}
		case c == '(' || c == ')':
			if c == '(' {
				depth++
			} else if depth--; depth < 0 {
				return nil, fmt.Errorf("unopened ) at %d", i)
			}
			i++
		default:
			i++
		}
		if err != nil {
			return nil, err
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%d unclosed (", depth)
	}
	return names, nil
}

// TestMetricNames: the extractor finds the names, and only them.
func TestMetricNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr, want, why string
	}{
		{`intend_resources`, "intend_resources", "a bare selector"},
		{`sum by (environment, result) (intend_resources{environment=~"$environment", result!="deployed"})`, "intend_resources",
			"aggregation and grouping labels are not names, nor what the matchers hold"},
		{`histogram_quantile(0.95, sum by (le) (rate(intend_http_request_duration_seconds_bucket{route="/x{y}"}[$__rate_interval])))`,
			"intend_http_request_duration_seconds_bucket", "functions, numbers, braces in strings and a Grafana range"},
		{`time() - max(intend_last_successful_deploy_timestamp_seconds{environment=~"${environment}"}) > 0`,
			"intend_last_successful_deploy_timestamp_seconds", "time() is a function"},
		{`a_total / on (environment) group_left (agent) b offset 5m unless c`, "a_total b c", "binary operators, modifiers, offset"},
		{`sum without (le)(rate(x_count[5m] @ end()))`, "x_count", "without, @ end()"},
		{`environment:intend_resources_failed:sum > bool 0`, "environment:intend_resources_failed:sum", "a recording rule name"},
		{`label_replace(up, "dst", "$1", "src", "(.*)")`, "up", "strings with $ and parentheses"},
		{`sum(rate(x[5m:1m])) or vector(0) and Inf`, "x", "subquery, vector(), Inf"},
		{`count(sum by (state) (intend_lsm_instances) > 1e3)`, "intend_lsm_instances", "exponent numbers"},
		{"`raw` + y", "y", "raw strings"},
	} {
		got, err := metricNames(tc.expr)
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("%s: metricNames(%q) = %q, %v; want %q", tc.why, tc.expr, got, err, tc.want)
		}
	}
	for _, bad := range []string{`{__name__=~"intend_.*"}`, `x{a="b}`, `sum(x[5m]`, `x)`} {
		if got, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%q) = %q, want an error", bad, got)
		}
	}
}

// FuzzMetricNames: the extractor neither panics nor loops on any input.
func FuzzMetricNames(f *testing.F) {
	for _, p := range all(loadF(f).Panels) {
		for _, tg := range p.Targets {
			f.Add(tg.Expr)
		}
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := metricNames(expr)
		if err == nil {
			for _, n := range names {
				if !strings.Contains(expr, n) {
					t.Errorf("metricNames(%q) returned %q, which is not in it", expr, n)
				}
			}
		}
	})
}

func loadF(f *testing.F) dashboard {
	b, err := os.ReadFile("intend.json")
	if err != nil {
		f.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		f.Fatal(err)
	}
	return d
}

// exported returns the series names a Prometheus text scrape makes
// queryable: each sample's name, and for each declared (# TYPE) metric
// the names it has even before a first sample, so a histogram that has
// observed nothing yet still counts. A histogram's bare name is not one of
// them: a query on it finds nothing.
func exported(scrape string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(scrape, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			switch f[3] {
			case "histogram":
				names[f[2]+"_bucket"], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
			case "summary":
				names[f[2]], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
			default:
				names[f[2]] = true
			}
		} else if line != "" && line[0] != '#' {
			names[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
		}
	}
	return names
}

// recorded returns the names rules.yml's recording rules record.
func recorded(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "prometheus", "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*-?\s*record:\s*(\S+)\s*$`).FindAllStringSubmatch(string(b), -1) {
		names[m[1]] = true
	}
	if len(names) < 5 {
		t.Fatalf("found %d recording rules in rules.yml: the pattern misses them", len(names))
	}
	return names
}

// later are the metrics the dashboard reads that a fresh server and
// executor do not export yet, with when they appear. Each must be read
// by the dashboard (no stale entries).
var later = map[string]string{
	"temporal_request_failure_total": "counted from the first failed Temporal request (sdk-go's temporal_request_failure counter)",
}

// unknown returns, sorted, "panel: name" for each name a query reads that
// is neither exported nor recorded nor expected later; a name with a ":"
// must be recorded (a recording rule's), any other exported.
func unknown(d dashboard, exported, recorded map[string]bool) (bad []string, read map[string]bool, err error) {
	read = map[string]bool{}
	for _, p := range all(d.Panels) {
		for _, tg := range p.Targets {
			names, err := metricNames(tg.Expr)
			if err != nil {
				return nil, nil, fmt.Errorf("panel %q, query %s: %w", p.Title, tg.RefID, err)
			}
			for _, n := range names {
				read[n] = true
				ok := recorded[n]
				if !strings.Contains(n, ":") {
					_, soon := later[n]
					ok = exported[n] || soon
				}
				if !ok {
					bad = append(bad, p.Title+": "+n)
				}
			}
		}
	}
	sort.Strings(bad)
	return slices.Compact(bad), read, nil
}

// TestUnknownCatchesAMisspelling: a misspelled name, a histogram read by
// its bare name and an unrecorded rule name are reported, so a passing
// TestDashboardMetricsExported means something.
func TestUnknownCatchesAMisspelling(t *testing.T) {
	t.Parallel()
	d := dashboard{Panels: []panel{{Title: "p", Targets: []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	}{{"A", `sum(rate(intend_http_requets_total[5m])) + intend_resources`},
		{"B", `intend_http_request_duration_seconds + environment:intend_resources:sum + environment:nope:sum`}}}}}
	ex := exported("# TYPE intend_http_requests_total counter\nintend_http_requests_total{code=\"200\"} 1\n" +
		"# TYPE intend_http_request_duration_seconds histogram\n# TYPE intend_resources gauge\n")
	bad, _, err := unknown(d, ex, map[string]bool{"environment:intend_resources:sum": true})
	want := []string{"p: environment:nope:sum", "p: intend_http_request_duration_seconds", "p: intend_http_requets_total"}
	if err != nil || !slices.Equal(bad, want) {
		t.Errorf("unknown = %q, %v; want %q", bad, err, want)
	}
}

// entityModel registers one service entity with lsm.simple's lifecycle.
const entityModel = `package main

import "intend.dev/std/lsm"

#VM: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		// The VM's name.
		name: =~"^[a-z]+$" @lsm(rw)
	}
	output: {}
}

services: vm: #VM
`

// modelArchive archives a project whose main.cue is mainCUE.
func modelArchive(t *testing.T, mainCUE string) project.Packed {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{"intend.yaml": "name: grafana\n", "main.cue": mainCUE} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	packed, err := project.Archive(dir)
	if err != nil {
		t.Fatal(err)
	}
	return packed
}

var listenLog = regexp.MustCompile(`msg="serving /metrics and /healthz" listen=(\S+)`)

// TestDashboardMetricsExported: every metric a query of intend.json reads
// is in a live scrape of a server (its metrics listener) or of an executor
// (--listen) that have deployed a resource, or is recorded by
// deploy/prometheus/rules.yml. The server and executor start as in
// deploy/prometheus/prometheus_test.go.
func TestDashboardMetricsExported(t *testing.T) {
	d := load(t)
	c, srv, _ := servertest.StartServer(t, server.Config{MetricsListen: "127.0.0.1:0", Version: "grafana-test",
		ReconcileEvery: time.Second, SchedulerPoll: time.Second})
	_, hostPort, namespace := testenv.Temporal(t)
	env := servertest.NewEnvironment(t, c, "grafana", map[string]any{"autostart_agents": []string{}})
	token := servertest.ExecutorToken(t, c, env, "remote")
	ex := servertest.StartFunc(t, func(ctx context.Context, out io.Writer) error {
		cmd := executor.Command(executor.WithBuiltins(), executor.WithVersion("grafana-test"),
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

	// A service entity, so that the LSM gauges have series: they have one
	// per state (transient state) of every registered entity.
	if err := c.Do(context.Background(), http.MethodPut, client.EnvPath(env, "model"),
		client.Raw{ContentType: "application/gzip", Body: modelArchive(t, entityModel).Archive}, nil); err != nil {
		t.Fatalf("upload a model with a service entity: %v", err)
	}
	// An instance of it taken to up, so that the transfer counter and the
	// time in a state, which appear with the first transfer, have series.
	lsmc := c.WithHeader(api.EnvironmentHeader, env)
	var inst struct{ ID, State string }
	if err := lsmc.Do(context.Background(), http.MethodPost, "/lsm/v1/service_inventory/vm",
		map[string]any{"attributes": map[string]any{"name": "web"}}, &inst); err != nil {
		t.Fatalf("create a service instance: %v", err)
	}
	for deadline := time.Now().Add(60 * time.Second); inst.State != "up"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the service instance is %s, not up, after 60 s", inst.State)
		}
		if err := lsmc.Do(context.Background(), http.MethodGet, "/lsm/v1/service_inventory/vm/"+inst.ID, nil, &inst); err != nil {
			t.Fatal(err)
		}
	}

	names := map[string]bool{}
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
		for n := range exported(string(text)) {
			names[n] = true
		}
	}
	bad, read, err := unknown(d, names, recorded(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("intend.json, panel %s: neither exported by a server or an executor nor recorded by rules.yml", b)
	}
	if len(bad) > 0 {
		var temporal []string
		for n := range names {
			if strings.HasPrefix(n, "temporal_") {
				temporal = append(temporal, n)
			}
		}
		sort.Strings(temporal)
		t.Logf("the temporal_ series exported: %s", strings.Join(temporal, " "))
	}
	for n := range later {
		if !read[n] {
			t.Errorf("later lists %s, which the dashboard does not read", n)
		}
	}
	if len(read) < 15 {
		t.Errorf("the queries read %d metrics: the extractor misses them", len(read))
	}
}
