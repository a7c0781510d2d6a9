package temporalserver

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/intendhq/intend"
)

// TestDynamicConfigFromTemporalYAML checks that every dynamic_config value
// of temporal.yaml reaches the server's file, in the server's format, with
// temporal.yaml winning over this package's own values.
func TestDynamicConfigFromTemporalYAML(t *testing.T) {
	t.Parallel()
	cfg, err := intend.TemporalDevConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.DynamicConfig) == 0 {
		t.Fatal("temporal.yaml has no dynamic_config: this test checks nothing")
	}
	values := maps.Clone(cfg.DynamicConfig)
	values["frontend.enableServerVersionCheck"] = true // overrides the fixed false
	b, err := dynamicConfigYAML(values)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string][]map[string]any
	if err := yaml.Unmarshal(b, &got); err != nil {
		t.Fatalf("the file does not parse: %v\n%s", err, b)
	}
	want := maps.Clone(fixedDynamicConfig)
	maps.Copy(want, values)
	if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)); !slices.Equal(g, w) {
		t.Fatalf("keys = %v, want %v", g, w)
	}
	for k, v := range want {
		entries := got[k]
		if len(entries) != 1 || len(entries[0]) != 1 {
			t.Errorf("%s = %v, want one entry holding only a value", k, entries)
			continue
		}
		if entries[0]["value"] != v {
			t.Errorf("%s = %#v, want %#v", k, entries[0]["value"], v)
		}
	}
}

// TestStaticConfig parses the rendered static config back and checks what
// the server depends on, with a password that YAML would mangle unquoted.
func TestStaticConfig(t *testing.T) {
	t.Parallel()
	pg := Postgres{Host: "127.0.0.1", Port: 5433, User: "temporal", Password: `p@ss: 'w"o#rd`, VisibilityDatabase: "vis"}
	ports := Ports{Frontend: 1, FrontendHTTP: 2, FrontendMembership: 3, History: 4, HistoryMembership: 5,
		Matching: 6, MatchingMembership: 7, Worker: 8, WorkerMembership: 9, Metrics: 10}
	b, err := staticConfigYAML(pg, "127.0.0.2", ports, 4, "warn", "/x/dynamic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c staticConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("the file does not parse: %v\n%s", err, b)
	}
	for name, want := range map[string]string{"default": "temporal", "visibility": "vis"} {
		got := c.Persistence.DataStores[name].SQL
		if got.PluginName != "postgres12_pgx" || got.DatabaseName != want || got.ConnectAddr != "127.0.0.1:5433" ||
			got.User != pg.User || got.Password != pg.Password {
			t.Errorf("datastore %s = %+v, want postgres12_pgx on %s at 127.0.0.1:5433 as %s with the password", name, got, want, pg.User)
		}
	}
	if c.Persistence.DataStores[c.Persistence.DefaultStore].SQL.DatabaseName != "temporal" ||
		c.Persistence.DataStores[c.Persistence.VisibilityStore].SQL.DatabaseName != "vis" {
		t.Errorf("defaultStore %q, visibilityStore %q name the wrong datastores", c.Persistence.DefaultStore, c.Persistence.VisibilityStore)
	}
	if c.Persistence.NumHistoryShards != 4 {
		t.Errorf("numHistoryShards = %d, want 4", c.Persistence.NumHistoryShards)
	}
	wantRPC := map[string]rpc{
		"frontend": {GRPCPort: 1, HTTPPort: 2, MembershipPort: 3, BindOnIP: "127.0.0.2"},
		"history":  {GRPCPort: 4, MembershipPort: 5, BindOnIP: "127.0.0.2"},
		"matching": {GRPCPort: 6, MembershipPort: 7, BindOnIP: "127.0.0.2"},
		"worker":   {GRPCPort: 8, MembershipPort: 9, BindOnIP: "127.0.0.2"},
	}
	if len(c.Services) != len(wantRPC) {
		t.Errorf("services = %v, want the four", slices.Sorted(maps.Keys(c.Services)))
	}
	for name, want := range wantRPC {
		if got := c.Services[name].RPC; got != want {
			t.Errorf("services.%s.rpc = %+v, want %+v", name, got, want)
		}
	}
	if got := c.ClusterMetadata.ClusterInformation[c.ClusterMetadata.CurrentClusterName].RPCAddress; got != "127.0.0.2:1" {
		t.Errorf("current cluster's rpcAddress = %q, want the frontend 127.0.0.2:1", got)
	}
	if c.PublicClient.HostPort != "127.0.0.2:1" || c.Global.Membership.BroadcastAddress != "127.0.0.2" {
		t.Errorf("publicClient %q, broadcastAddress %q: want the frontend and its IP", c.PublicClient.HostPort, c.Global.Membership.BroadcastAddress)
	}
	if c.DynamicConfigClient.Filepath != "/x/dynamic.yaml" {
		t.Errorf("dynamicConfigClient.filepath = %q", c.DynamicConfigClient.Filepath)
	}
	if c.Log.Level != "warn" {
		t.Errorf("log.level = %q, want warn", c.Log.Level)
	}
	if c.Global.Metrics == nil || c.Global.Metrics.Prometheus.ListenAddress != "127.0.0.2:10" {
		t.Errorf("global.metrics = %+v, want Prometheus metrics on 127.0.0.2:10", c.Global.Metrics)
	}
}

func TestServerLogLevel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want, why string }{
		{"", "info", "the server's default when temporal.yaml sets none"},
		{"warn", "warn", "zap has the CLI's levels"},
		{"ERROR", "error", "zap wants them lower-case"},
		{"never", "fatal", "the CLI's never has no zap level; fatal is the nearest"},
	} {
		if got := serverLogLevel(tc.in); got != tc.want {
			t.Errorf("serverLogLevel(%q) = %q, want %q: %s", tc.in, got, tc.want, tc.why)
		}
	}
}

func TestResolvePorts(t *testing.T) {
	t.Parallel()
	got, picked, err := resolvePorts("127.0.0.1", Ports{History: 4242})
	if err != nil {
		t.Fatal(err)
	}
	if !picked {
		t.Error("picked = false, want true: eight ports were free to pick")
	}
	if got.History != 4242 {
		t.Errorf("History = %d, want the given 4242", got.History)
	}
	seen := map[int]bool{}
	for _, p := range got.fields() {
		if *p == 0 || seen[*p] || *p > maxPickedPort {
			t.Errorf("port %d is zero, handed out twice or above %d (the schema's SMALLINT) in %+v", *p, maxPickedPort, got)
		}
		seen[*p] = true
	}
	again, picked, err := resolvePorts("127.0.0.1", got)
	if err != nil || picked || again != got {
		t.Errorf("resolvePorts(all set) = %+v, %v, %v; want them unchanged, none picked", again, picked, err)
	}
}

// TestDynamicConfigValidByServer has the server itself check the dynamic
// config rendered from temporal.yaml: every key known, every value of its
// type. The server's validator reports problems as warnings and exits 0, so
// any line of output beyond the file name fails the test; a known-bad file
// shows that the check sees them.
func TestDynamicConfigValidByServer(t *testing.T) {
	t.Parallel()
	server, _ := binaries(t)
	cfg, err := intend.TemporalDevConfig()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := dynamicConfigYAML(cfg.DynamicConfig)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := dynamicConfigYAML(map[string]any{"intend.noSuchKey": 1, "frontend.rps": "many"})
	if err != nil {
		t.Fatal(err)
	}
	validate := func(content []byte) []string {
		file := filepath.Join(t.TempDir(), "dynamic.yaml")
		if err := os.WriteFile(file, content, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(server, "validate-dynamic-config", file).CombinedOutput()
		if err != nil {
			t.Fatalf("validate-dynamic-config: %v\n%s", err, out)
		}
		var problems []string
		for line := range strings.Lines(string(out)) {
			if line = strings.TrimSpace(line); line != "" && line != file {
				problems = append(problems, line)
			}
		}
		return problems
	}
	if problems := validate(rendered); len(problems) > 0 {
		t.Errorf("the server finds problems in the dynamic config from temporal.yaml:\n%s\n%s", strings.Join(problems, "\n"), rendered)
	}
	if problems := validate(bad); len(problems) < 2 {
		t.Errorf("the server's validator found %v in a file with an unknown key and a mistyped value: this test cannot fail", problems)
	}
}

// TestStartRefusesBadOptions checks the mistakes Start reports before it
// touches a database or a binary.
func TestStartRefusesBadOptions(t *testing.T) {
	t.Parallel()
	pg := Postgres{Host: "127.0.0.1", Port: 1, User: "temporal"}
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no dir", Options{Postgres: pg}, "Dir is required"},
		{"no postgres", Options{Dir: t.TempDir()}, "needs Host, Port and User"},
		{"unknown search attribute type", Options{Dir: t.TempDir(), Postgres: pg, Config: intend.TemporalDev{
			Namespace: "n", SearchAttributes: map[string]string{"Colour": "Colourful"},
		}}, "search attribute Colour"},
	} {
		_, err := Start(t.Context(), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Start = %v, want an error about %q", tc.name, err, tc.want)
		}
	}
}
