// Package helm holds no Go code: its tests check the chart in intend/ with
// the pinned Helm (make helm): helm lint, and helm template parsed and
// inspected for what matters in production.
package helm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// helmBinary finds Helm: $INTEND_HELM (the Makefile exports it), else the
// repository's .tools/bin/helm, else PATH. A missing Helm fails the
// test (make helm builds it), as a missing PostgreSQL does.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("INTEND_HELM"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := filepath.Abs("../../.tools/bin/helm"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	t.Fatal("helm is missing: make helm (go install helm.sh/helm/v3/cmd/helm into .tools/bin)")
	return ""
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	// Helm's own state stays out of the home directory.
	dir := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir, "HELM_CONFIG_HOME="+dir, "HELM_DATA_HOME="+dir)
	err := cmd.Run()
	if err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

type object = map[string]any

// render runs helm template and returns the objects by kind/name.
func render(t *testing.T, args ...string) map[string]object {
	t.Helper()
	out, err := helm(t, append([]string{"template", "rel", "intend"}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, out)
	}
	objs := map[string]object{}
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("helm template output: %v\n%s", err, out)
		}
		if o == nil {
			continue
		}
		key := str(o, "kind") + "/" + str(o, "metadata", "name")
		if _, dup := objs[key]; dup {
			t.Errorf("%s rendered twice", key)
		}
		objs[key] = o
	}
	return objs
}

// at walks o along path (map keys, or ints for list indexes).
func at(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := o.(map[string]any)
			if !ok {
				return nil
			}
			o = m[k]
		case int:
			l, ok := o.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

func str(o any, path ...any) string {
	s, _ := at(o, path...).(string)
	return s
}

func list(o any, path ...any) []any {
	l, _ := at(o, path...).([]any)
	return l
}

func ofKind(objs map[string]object, kind string) map[string]object {
	out := map[string]object{}
	for k, o := range objs {
		if str(o, "kind") == kind {
			out[strings.TrimPrefix(k, kind+"/")] = o
		}
	}
	return out
}

// env returns a container's environment by name.
func env(c any) map[string]any {
	out := map[string]any{}
	for _, e := range list(c, "env") {
		out[str(e, "name")] = e
	}
	return out
}

// containers returns the pod template's containers of a workload.
func containers(o object) []any {
	return list(o, "spec", "template", "spec", "containers")
}

// sensitive are the variables that carry credentials: never a value in a
// manifest, always a reference to a Secret.
var sensitive = []string{"INTEND_DATABASE_URL", "INTEND_TOKEN", "INTEND_BOOTSTRAP_TOKEN", "INTEND_TEMPORAL_API_KEY"}

func TestLint(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"-f", "testdata/full-values.yaml"}} {
		if out, err := helm(t, append([]string{"lint", "--strict", "intend"}, args...)...); err != nil {
			t.Errorf("helm lint --strict %v: %v\n%s", args, err, out)
		}
	}
}

// TestTemplate checks the rendered manifests with the default values and
// with every option set.
func TestTemplate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		args      []string
		executors []string // executor groups, so Deployments
		fullname  string
		https     bool
		monitor   bool
		execPort  int // the executors' --listen port
	}{
		{name: "defaults: servers, Service and migrations only", fullname: "rel-intend", execPort: 9464},
		{name: "every option", args: []string{"-f", "testdata/full-values.yaml"},
			executors: []string{"web", "db"}, fullname: "rel-orchestrator", https: true, monitor: true, execPort: 9500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			objs := render(t, c.args...)
			for _, o := range objs {
				if k := str(o, "kind"); k == "Secret" || k == "ConfigMap" {
					t.Errorf("the chart renders a %s %s: secrets are referenced (existingSecret), never made", k, str(o, "metadata", "name"))
				}
			}

			server, ok := objs["Deployment/"+c.fullname+"-server"]
			if !ok {
				t.Fatalf("no server Deployment %s-server among %v", c.fullname, keys(objs))
			}
			sc := at(containers(server), 0)
			for _, probe := range []string{"livenessProbe", "readinessProbe"} {
				if got := str(sc, probe, "httpGet", "path"); got != "/healthz" {
					t.Errorf("server %s on %q, want /healthz", probe, got)
				}
				scheme := "HTTP"
				if c.https {
					scheme = "HTTPS"
				}
				if got := str(sc, probe, "httpGet", "scheme"); got != scheme {
					t.Errorf("server %s scheme %q, want %s", probe, got, scheme)
				}
			}
			var ports []string
			for _, p := range list(sc, "ports") {
				ports = append(ports, str(p, "name"))
			}
			if !slices.Contains(ports, "metrics") || !slices.Contains(ports, "http") {
				t.Errorf("server ports %v, want http and metrics", ports)
			}
			if _, ok := env(sc)["INTEND_METRICS_LISTEN"]; !ok {
				t.Error("server does not serve /metrics on its own port (INTEND_METRICS_LISTEN)")
			}
			if _, ok := objs["Service/"+c.fullname]; !ok {
				t.Errorf("no Service %s", c.fullname)
			}
			if sm, ok := objs["ServiceMonitor/"+c.fullname]; ok != c.monitor {
				t.Errorf("ServiceMonitor rendered: %v, want %v", ok, c.monitor)
			} else if ok {
				if got := relabelled(at(sm, "spec", "endpoints", 0))["job"]; got != "intend-server" {
					t.Errorf("ServiceMonitor's job %q, want intend-server (rules.yml's)", got)
				}
			}
			checkBudget(t, objs, c.fullname+"-server", server)

			job, ok := objs["Job/"+c.fullname+"-migrate"]
			if !ok {
				t.Fatal("no migration Job")
			}
			hooks := strings.Split(str(job, "metadata", "annotations", "helm.sh/hook"), ",")
			if !slices.Contains(hooks, "pre-install") || !slices.Contains(hooks, "pre-upgrade") {
				t.Errorf("migration Job hooks %v, want pre-install and pre-upgrade", hooks)
			}
			if got := list(at(containers(job), 0), "args"); len(got) != 1 || got[0] != "migrate" {
				t.Errorf("migration Job runs %v, want [migrate]", got)
			}

			var groups []string
			for name, d := range ofKind(objs, "Deployment") {
				if name == c.fullname+"-server" {
					continue
				}
				group, ok := strings.CutPrefix(name, c.fullname+"-executor-")
				if !ok {
					t.Errorf("unexpected Deployment %s", name)
					continue
				}
				groups = append(groups, group)
				ec := at(containers(d), 0)
				e := env(ec)
				if e["INTEND_DATABASE_URL"] != nil {
					t.Errorf("executor %s holds database credentials", group)
				} else if str(e["INTEND_TOKEN"], "valueFrom", "secretKeyRef", "name") == "" {
					t.Errorf("executor %s has no token from a Secret", group)
				} else if str(e["INTEND_AGENTS"], "value") == "" || str(e["INTEND_ENVIRONMENT"], "value") == "" {
					t.Errorf("executor %s has no agents or environment", group)
				}
				checkExecutorListens(t, group, ec, c.execPort)
				checkBudget(t, objs, name, d)
				if pm, ok := objs["PodMonitor/"+name]; ok != c.monitor {
					t.Errorf("executor %s: PodMonitor rendered: %v, want %v", group, ok, c.monitor)
				} else if ok {
					if !equalLabels(at(pm, "spec", "selector", "matchLabels"), at(d, "spec", "template", "metadata", "labels")) {
						t.Errorf("executor %s: the PodMonitor's selector %v does not select the pods", group, at(pm, "spec", "selector"))
					}
					ep := at(pm, "spec", "podMetricsEndpoints", 0)
					if str(ep, "port") != "metrics" || str(ep, "path") != "/metrics" {
						t.Errorf("executor %s: the PodMonitor scrapes %s on %s, want /metrics on metrics", group, str(ep, "path"), str(ep, "port"))
					}
					want := map[string]string{"job": "intend-executor", "executor_group": group,
						"executor_environment": str(e["INTEND_ENVIRONMENT"], "value"), "executor_agents": str(e["INTEND_AGENTS"], "value")}
					if got := relabelled(ep); !maps.Equal(got, want) {
						t.Errorf("executor %s: the PodMonitor's target labels %v, want %v", group, got, want)
					}
				}
			}
			slices.Sort(groups)
			want := slices.Sorted(slices.Values(c.executors))
			if !slices.Equal(groups, want) {
				t.Errorf("executor Deployments %v, want one per group %v", groups, want)
			}

			for key, o := range objs {
				cs := containers(o)
				if len(cs) == 0 {
					continue
				}
				if at(o, "spec", "template", "spec", "securityContext", "runAsNonRoot") != true {
					t.Errorf("%s: pods may run as root", key)
				}
				for _, c := range cs {
					if at(c, "securityContext", "readOnlyRootFilesystem") != true ||
						at(c, "securityContext", "allowPrivilegeEscalation") != false {
						t.Errorf("%s/%s: root filesystem writable or privilege escalation allowed", key, str(c, "name"))
					}
					for name, e := range env(c) {
						if !slices.Contains(sensitive, name) {
							continue
						}
						if at(e, "value") != nil || str(e, "valueFrom", "secretKeyRef", "name") == "" {
							t.Errorf("%s/%s: %s is not a reference to a Secret", key, str(c, "name"), name)
						}
					}
				}
			}
		})
	}
}

// TestExecutorDefaults: without executorServer.url, executors reach this
// release's Service, over https when the server serves TLS.
func TestExecutorDefaults(t *testing.T) {
	t.Parallel()
	objs := render(t, "--set", "server.tls.existingSecret=tls", "--set", "executors[0].name=a",
		"--set", "executors[0].environment=prod", "--set", "executors[0].agents={a1,a2}",
		"--set", "executors[0].tokenSecret.name=tok")
	d, ok := objs["Deployment/rel-intend-executor-a"]
	if !ok {
		t.Fatalf("no executor Deployment among %v", keys(objs))
	}
	e := env(at(containers(d), 0))
	if got := str(e["INTEND_SERVER"], "value"); got != "https://rel-intend:8888" {
		t.Errorf("INTEND_SERVER = %q, want https://rel-intend:8888", got)
	}
	if got := str(e["INTEND_AGENTS"], "value"); got != "a1,a2" {
		t.Errorf("INTEND_AGENTS = %q, want a1,a2", got)
	}
	// The group's replicas poll one task queue, named after the group.
	if got := str(e["INTEND_EXECUTOR_POOL"], "value"); got != "a" {
		t.Errorf("INTEND_EXECUTOR_POOL = %q, want the group's name a", got)
	}
	if got := str(e["INTEND_TOKEN"], "valueFrom", "secretKeyRef", "key"); got != "token" {
		t.Errorf("token key %q, want the default token", got)
	}
	if got := at(d, "spec", "replicas"); got != 1 {
		t.Errorf("replicas %v, want 1", got)
	}
	checkExecutorListens(t, "a", at(containers(d), 0), 9464)
	checkBudget(t, objs, "rel-intend-executor-a", d)
	if got := at(objs["PodDisruptionBudget/rel-intend-executor-a"], "spec", "maxUnavailable"); got != 1 {
		t.Errorf("the executor group's PodDisruptionBudget lets %v go at once, want 1", got)
	}
	if _, ok := objs["PodMonitor/rel-intend-executor-a"]; ok {
		t.Error("a PodMonitor by default (it needs prometheus-operator's CRDs)")
	}
	off := render(t, "--set", "executors[0].name=a", "--set", "executors[0].environment=prod", "--set", "executors[0].agents={a1}",
		"--set", "executors[0].tokenSecret.name=tok", "--set", "executorPod.podDisruptionBudget.enabled=false",
		"--set", "server.podDisruptionBudget.enabled=false")
	if pdbs := ofKind(off, "PodDisruptionBudget"); len(pdbs) != 0 {
		t.Errorf("PodDisruptionBudgets %v with both turned off", keys(pdbs))
	}
}

// checkExecutorListens: an executor serves --listen on a container port
// named metrics, and its liveness and readiness probes ask /healthz there,
// over HTTP (the listener has no TLS).
func checkExecutorListens(t *testing.T, group string, c any, port int) {
	t.Helper()
	if got := str(env(c)["INTEND_EXECUTOR_LISTEN"], "value"); got != fmt.Sprintf("0.0.0.0:%d", port) {
		t.Errorf("executor %s: INTEND_EXECUTOR_LISTEN = %q, want 0.0.0.0:%d", group, got, port)
	}
	var named any
	for _, p := range list(c, "ports") {
		if str(p, "name") == "metrics" {
			named = at(p, "containerPort")
		}
	}
	if named != port {
		t.Errorf("executor %s: container port metrics = %v, want %d", group, named, port)
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		h := at(c, probe, "httpGet")
		if str(h, "path") != "/healthz" || str(h, "port") != "metrics" || (str(h, "scheme") != "" && str(h, "scheme") != "HTTP") {
			t.Errorf("executor %s: %s %v, want GET /healthz on port metrics", group, probe, h)
		}
		if at(c, probe, "periodSeconds") == nil || at(c, probe, "failureThreshold") == nil {
			t.Errorf("executor %s: %s has no timing", group, probe)
		}
	}
}

// checkBudget: a PodDisruptionBudget of the workload's name selects its
// pods.
func checkBudget(t *testing.T, objs map[string]object, name string, workload object) {
	t.Helper()
	pdb, ok := objs["PodDisruptionBudget/"+name]
	if !ok {
		t.Errorf("no PodDisruptionBudget %s", name)
		return
	}
	if !equalLabels(at(pdb, "spec", "selector", "matchLabels"), at(workload, "spec", "template", "metadata", "labels")) {
		t.Errorf("PodDisruptionBudget %s selects %v, not the pods of its Deployment", name, at(pdb, "spec", "selector"))
	}
	if at(pdb, "spec", "maxUnavailable") == nil {
		t.Errorf("PodDisruptionBudget %s has no maxUnavailable", name)
	}
}

// equalLabels: selector's labels are all on the pods' (and there are some).
func equalLabels(selector, pods any) bool {
	sel, _ := selector.(map[string]any)
	have, _ := pods.(map[string]any)
	for k, v := range sel {
		if have[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// relabelled returns the labels a monitor endpoint's relabelings set to a
// fixed value.
func relabelled(endpoint any) map[string]string {
	out := map[string]string{}
	for _, r := range list(endpoint, "relabelings") {
		if at(r, "sourceLabels") == nil {
			out[str(r, "targetLabel")] = str(r, "replacement")
		}
	}
	return out
}

// TestMonitorsMatchRules: the jobs and labels deploy/prometheus/rules.yml
// reads are the ones the chart's monitors give their targets, so its
// IntendServerDown and IntendExecutorsDown see what the chart runs.
func TestMonitorsMatchRules(t *testing.T) {
	t.Parallel()
	objs := render(t, "-f", "testdata/full-values.yaml")
	set := map[string]bool{}
	jobs := map[string]bool{}
	for _, kind := range []string{"ServiceMonitor", "PodMonitor"} {
		for _, m := range ofKind(objs, kind) {
			for _, ep := range append(list(m, "spec", "endpoints"), list(m, "spec", "podMetricsEndpoints")...) {
				for label, value := range relabelled(ep) {
					set[label] = true
					if label == "job" {
						jobs[value] = true
					}
				}
			}
		}
	}
	b, err := os.ReadFile("../prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, m := range regexp.MustCompile(`job="([^"]+)"`).FindAllStringSubmatch(r.Expr, -1) {
				read++
				if !jobs[m[1]] {
					t.Errorf("%s reads job %s, which no monitor of the chart sets (%v)", r.Alert, m[1], jobs)
				}
			}
			if r.Alert != "IntendExecutorsDown" {
				continue
			}
			m := regexp.MustCompile(`by \(([^)]*)\)`).FindStringSubmatch(r.Expr)
			if m == nil {
				t.Fatalf("IntendExecutorsDown sums by nothing: %s", r.Expr)
			}
			for _, label := range strings.Split(m[1], ",") {
				if label = strings.TrimSpace(label); !set[label] {
					t.Errorf("IntendExecutorsDown sums by %s, which the PodMonitors do not set", label)
				}
			}
		}
	}
	if read < 3 {
		t.Errorf("rules.yml reads %d jobs: the pattern misses them", read)
	}
}

// TestValuesSchema: values.schema.json refuses values that would be
// ignored or break the manifests, with a message naming them.
func TestValuesSchema(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		reason string
		args   []string
		want   string
	}{
		{"a misspelt key", []string{"--set", "server.replica=3"}, "replica"},
		{"a misspelt top-level key", []string{"--set", "executor.port=1"}, "executor"},
		{"a count that is not a number", []string{"--set", "server.replicas=two"}, "/server/replicas"},
		{"a port out of range", []string{"--set", "executorPod.port=70000"}, "/executorPod/port"},
		{"a budget neither a number nor a percentage", []string{"--set", "server.podDisruptionBudget.maxUnavailable=half"}, "maxUnavailable"},
		{"an unknown pull policy", []string{"--set", "image.pullPolicy=Sometimes"}, "pullPolicy"},
		{"a group name Kubernetes refuses in names", []string{"--set", "executors[0].name=Web_1", "--set", "executors[0].environment=prod",
			"--set", "executors[0].agents={a1}", "--set", "executors[0].tokenSecret.name=tok"}, "/executors/0/name"},
		{"a group without agents", []string{"--set", "executors[0].name=a", "--set", "executors[0].environment=prod",
			"--set", "executors[0].agents=", "--set", "executors[0].tokenSecret.name=tok"}, "/executors/0/agents"},
	} {
		out, err := helm(t, append([]string{"template", "rel", "intend"}, c.args...)...)
		if err == nil || !strings.Contains(out, "schema") || !strings.Contains(out, c.want) {
			t.Errorf("%s: err = %v, want the schema refusing %q\n%s", c.reason, err, c.want, out)
		}
	}
}

// TestTemplateRefuses: values that cannot work fail the render with a
// message that names the value.
func TestTemplateRefuses(t *testing.T) {
	t.Parallel()
	group := []string{"--set", "executors[0].environment=prod", "--set", "executors[0].agents={a1}",
		"--set", "executors[0].tokenSecret.name=tok"}
	for _, c := range []struct {
		reason string
		args   []string
		want   string
	}{
		{"no database Secret", []string{"--set", "database.existingSecret="}, "database.existingSecret"},
		{"an executor group without a name", group, "executors[].name"},
		{"two executor groups of one name", append([]string{"--set", "executors[0].name=a", "--set", "executors[1].name=a",
			"--set", "executors[1].environment=prod", "--set", "executors[1].agents={a2}", "--set", "executors[1].tokenSecret.name=t2"},
			group...), "used twice"},
		{"an executor group without a token", []string{"--set", "executors[0].name=a", "--set", "executors[0].environment=prod",
			"--set", "executors[0].agents={a1}"}, "tokenSecret.name"},
	} {
		out, err := helm(t, append([]string{"template", "rel", "intend"}, c.args...)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: err = %v, want a failure naming %q\n%s", c.reason, err, c.want, out)
		}
	}
}

func keys(objs map[string]object) []string {
	out := make([]string, 0, len(objs))
	for k := range objs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
