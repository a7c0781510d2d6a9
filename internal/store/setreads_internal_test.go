package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
)

// TestSetReadsReadTheSetAlone: the lifecycle engine's reads of one
// instance's resource set (its deploy state, its resources, its open
// hashes before an export) read that set's rows of version_resources, not
// every open row of the environment. Each runs once or twice per
// instance create (P7), so an environment-wide scan made a burst of
// 1,000 creates quadratic: in intend-bench the deploy check alone took
// 8.3 s of PostgreSQL's time, 4 ms a call. It happened while the table
// had no statistics yet (a new environment's first burst, before
// autovacuum's first analyze), where the planner took the index on
// (environment_id, resource_id) for the order by resource_id, and in the
// generic plan of a query with "$2 = ” or resource_set = $2". Checked
// as the store runs them (prepared statements, whose generic plan pgx's
// statement cache ends up with), before and after an analyze.
func TestSetReadsReadTheSetAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, e, url := internalEnv(t, "e")
	const sets, per = 200, 3
	var body strings.Builder
	body.WriteString(`{"resources":[`)
	for i := range sets {
		for j := range per {
			if i+j > 0 {
				body.WriteString(",")
			}
			fmt.Fprintf(&body, `{"id":"fs::File[a,path=/i%03d/%d]","attributes":{"path":"/i%03d/%d","content":"x"},"resource_set":"vm/i%03d"}`,
				i, j, i, j, i)
		}
	}
	body.WriteString(`]}`)
	v, err := intent.DecodeBytes([]byte(body.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ExportInstanceSets(ctx, e.ID, v, nil); err != nil {
		t.Fatal(err)
	}
	// The store's own reads answer right.
	sd, err := st.ResourceSetDeploy(ctx, e.ID, "vm/i007", time.Time{})
	if err != nil || sd.Total != per {
		t.Fatalf("ResourceSetDeploy = %+v, %v; want %d resources", sd, err, per)
	}
	content, err := st.ResourceSetContent(ctx, e.ID, "vm/i007")
	if err != nil || len(content.Hashes) != per {
		t.Fatalf("ResourceSetContent = %d hashes, %v; want %d", len(content.Hashes), err, per)
	}
	if rs, err := st.SetResources(ctx, e.ID, "vm/i007"); err != nil || len(rs) != per {
		t.Fatalf("SetResources = %d, %v; want %d", len(rs), err, per)
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "set plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	queries := []struct {
		name, sql, types, args string
	}{
		{"ResourceSetDeploy", resourceSetDeploySQL, "uuid, text, timestamptz", fmt.Sprintf("'%s', 'vm/i007', now()", e.ID)},
		{"SetResources", setResourcesSQL, "uuid, text", fmt.Sprintf("'%s', 'vm/i007'", e.ID)},
		{"openHashes of a set", openSetHashesSQL, "uuid, text", fmt.Sprintf("'%s', 'vm/i007'", e.ID)},
	}
	for _, when := range []string{"before an analyze", "after an analyze"} {
		if when == "after an analyze" {
			if _, err := conn.Exec(ctx, "analyze version_resources; analyze resource_state"); err != nil {
				t.Fatal(err)
			}
		}
		for i, q := range queries {
			name := fmt.Sprintf("q%d_%d", i, len(when))
			if _, err := conn.Exec(ctx, fmt.Sprintf("prepare %s(%s) as %s", name, q.types, q.sql)); err != nil {
				t.Fatalf("%s: %v", q.name, err)
			}
			var plan []byte
			if err := conn.QueryRow(ctx, fmt.Sprintf("explain (analyze, format json) execute %s(%s)", name, q.args),
				pgx.QueryExecModeSimpleProtocol).Scan(&plan); err != nil {
				t.Fatalf("%s: %v", q.name, err)
			}
			if read := rowsRead(t, plan, "version_resources"); read > per {
				t.Errorf("%s, %s: read %d rows of version_resources for a set of %d (of %d open rows): %s",
					q.name, when, read, per, sets*per, plan)
			}
		}
	}
}

// TestReferrersReadTheReferrersAlone: the read of an instance's referrers,
// which every transfer that promotes a set makes (notifyReferrers: once
// per instance create), reads the references to the instance and those
// referrers' rows, not every instance of the environment.
func TestReferrersReadTheReferrersAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, e, url := internalEnv(t, "e")
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const live = 500
	// Instances i0…, of which i1 and i2 reference i0.
	if _, err := conn.Exec(ctx, `insert into service_entities (environment_id, name, attributes, lifecycle, model_hash)
		values ($1::uuid, 'vm', '[]', '{}', 'h')`, e.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `insert into service_instances (environment_id, entity, id, state, version)
		select $1::uuid, 'vm', ('00000000-0000-0000-0000-' || lpad(n::text, 12, '0'))::uuid, 'up', 1
		from generate_series(0, $2 - 1) n`, e.ID, live); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `insert into service_instance_references (environment_id, referrer_id, attribute, target_id)
		select $1::uuid, ('00000000-0000-0000-0000-' || lpad(n::text, 12, '0'))::uuid, 'site',
		       '00000000-0000-0000-0000-000000000000'::uuid
		from generate_series(1, 2) n`, e.ID); err != nil {
		t.Fatal(err)
	}
	if rs, err := st.ReferencedBy(ctx, e.ID, "00000000-0000-0000-0000-000000000000"); err != nil || len(rs) != 2 {
		t.Fatalf("ReferencedBy = %+v, %v; want the 2 referrers", rs, err)
	}
	if _, err := conn.Exec(ctx, "set plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	for _, when := range []string{"before an analyze", "after an analyze"} {
		if when == "after an analyze" {
			if _, err := conn.Exec(ctx, "analyze service_instances; analyze service_instance_references"); err != nil {
				t.Fatal(err)
			}
		}
		name := fmt.Sprintf("r%d", len(when))
		if _, err := conn.Exec(ctx, fmt.Sprintf("prepare %s(uuid, uuid) as %s", name, referrersSQL)); err != nil {
			t.Fatal(err)
		}
		for _, target := range []struct {
			id        string
			referrers int
		}{{"00000000-0000-0000-0000-000000000000", 2}, {"00000000-0000-0000-0000-000000000007", 0}} {
			var plan []byte
			if err := conn.QueryRow(ctx, fmt.Sprintf("explain (analyze, format json) execute %s('%s', '%s')", name, e.ID, target.id),
				pgx.QueryExecModeSimpleProtocol).Scan(&plan); err != nil {
				t.Fatal(err)
			}
			if read := rowsRead(t, plan, "service_instances"); read > target.referrers {
				t.Errorf("referrers of %s, %s: read %d rows of service_instances for %d referrers (of %d instances): %s",
					target.id, when, read, target.referrers, live, plan)
			}
		}
	}
}

// TestEntityDefinitionsCountNothing: what the lifecycle engine's writes
// read of the catalog (an instance create: its API write, the
// validation, the config sync) is the entity without the live instance
// counts, which read every live instance of the entity, three times per
// create; the definition is GetEntity's otherwise.
func TestEntityDefinitionsCountNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, e, url := internalEnv(t, "e")
	if err := st.RegisterEntities(ctx, e.ID, "h", []lsm.Entity{{Name: "vm", Attributes: []lsm.AttributeSpec{}, Lifecycle: lsm.Simple()}}); err != nil {
		t.Fatal(err)
	}
	const live = 300
	for i := range live {
		ch := InstanceChange{Entity: "vm", ID: fmt.Sprintf("00000001-0000-4000-8000-%012d", i), Version: 1, State: "start",
			Sets:  lsm.Sets{Candidate: map[string]any{"name": fmt.Sprint(i)}},
			Event: json.RawMessage(`{"trigger": "create", "target": "start", "error": false, "operations": []}`)}
		if _, err := st.ApplyInstanceChange(ctx, e.ID, ch); err != nil {
			t.Fatal(err)
		}
	}
	full, err := st.GetEntity(ctx, e.ID, "vm")
	if err != nil || full.Instances["start"] != live {
		t.Fatalf("GetEntity = %+v, %v; want %d instances in start", full.Instances, err, live)
	}
	def, err := st.GetEntityDefinition(ctx, e.ID, "vm")
	if err != nil {
		t.Fatal(err)
	}
	defs, err := st.ListEntityDefinitions(ctx, e.ID)
	if err != nil || len(defs) != 1 {
		t.Fatalf("ListEntityDefinitions = %+v, %v", defs, err)
	}
	full.Instances = nil
	for _, got := range []ServiceEntity{def, defs[0]} {
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(full)
		if string(a) != string(b) {
			t.Errorf("the definition is\n%s\nwant GetEntity's without its counts\n%s", a, b)
		}
	}
	if _, err := st.GetEntityDefinition(ctx, e.ID, "nosuch"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetEntityDefinition of no entity: %v, want ErrNotFound", err)
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []struct {
		sql  string
		read bool
	}{{entitiesCountedSQL, true}, {entitiesUncountedSQL, false}} {
		var plan []byte
		if err := conn.QueryRow(ctx, "explain (analyze, format json) "+q.sql, e.ID, "vm").Scan(&plan); err != nil {
			t.Fatal(err)
		}
		if read := rowsRead(t, plan, "service_instances"); (read > 0) != q.read {
			t.Errorf("%s\nread %d rows of service_instances", q.sql, read)
		}
	}
}

// rowsRead adds up the rows the scans of table in an EXPLAIN (ANALYZE,
// FORMAT JSON) plan returned and removed by a filter, over their loops.
func rowsRead(t *testing.T, plan []byte, table string) int {
	t.Helper()
	var doc []struct {
		Plan json.RawMessage `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &doc); err != nil || len(doc) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	type node struct {
		Relation string  `json:"Relation Name"`
		Rows     float64 `json:"Actual Rows"`
		Removed  float64 `json:"Rows Removed by Filter"`
		Loops    float64 `json:"Actual Loops"`
		Plans    []json.RawMessage
	}
	var walk func(raw json.RawMessage) int
	walk = func(raw json.RawMessage) int {
		var n node
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Fatal(err)
		}
		sum := 0
		if n.Relation == table {
			sum += int((n.Rows + n.Removed) * n.Loops)
		}
		for _, c := range n.Plans {
			sum += walk(c)
		}
		return sum
	}
	return walk(doc[0].Plan)
}
