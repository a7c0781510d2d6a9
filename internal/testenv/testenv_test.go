package testenv_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestDatabase(t *testing.T) {
	t.Parallel()
	a, b := testenv.Database(t), testenv.Database(t)
	if a == b {
		t.Fatalf("two calls returned the same database %s", a)
	}
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{a, b} {
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		var version int32
		err = conn.QueryRow(t.Context(), "select version from "+migrations.VersionTable).Scan(&version)
		conn.Close(t.Context())
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if version != latest {
			t.Errorf("%s is at schema version %d, want the newest, %d", url, version, latest)
		}
	}

	// Databases are separate: a table made in one is not in the other.
	exec(t, a, "create table only_in_a (x int)")
	conn, err := pgx.Connect(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var found bool
	if err := conn.QueryRow(t.Context(), "select to_regclass('only_in_a') is not null").Scan(&found); err != nil || found {
		t.Fatalf("table of one database seen in the other: %v, %v", found, err)
	}
}

func TestDatabaseConcurrent(t *testing.T) {
	t.Parallel()
	for i := range 8 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			exec(t, testenv.Database(t), "select 1 from "+migrations.VersionTable)
		})
	}
}

func TestDatabaseDroppedAfterTest(t *testing.T) {
	t.Parallel()
	var url string
	t.Run("holder", func(t *testing.T) {
		url = testenv.Database(t)
		exec(t, url, "select 1")
	})
	if _, err := pgx.Connect(t.Context(), url); err == nil {
		t.Fatalf("%s still exists after its test ended", url)
	}
}

func greet(ctx workflow.Context, name string) (string, error) {
	return "hello " + name, nil
}

func TestTemporal(t *testing.T) {
	t.Parallel()
	c, hostPort, namespace := testenv.Temporal(t)
	if hostPort == "" || namespace == "" {
		t.Fatalf("hostPort %q, namespace %q", hostPort, namespace)
	}
	queue := testenv.UniqueName(t, "tq")
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(greet)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	env := testenv.UniqueName(t, "env")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        testenv.UniqueName(t, "wf"),
		TaskQueue: queue,
		// A search attribute of temporal.yaml: registered by the server.
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword("IntendEnvironment").ValueSet(env)),
	}, greet, "intend")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got != "hello intend" {
		t.Fatalf("workflow returned %q", got)
	}
}

func TestUniqueName(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^[a-z]([a-z0-9]|-[a-z0-9])*$`)
	seen := map[string]bool{}
	for _, tc := range []struct {
		name, prefix string
	}{
		{"plain prefix", "env"},
		{"no prefix", ""},
		{"prefix needing cleanup", "  My_Env!!"},
		{"prefix starting with a digit", "9lives"},
		{"long prefix is cut", "a-very-long-prefix-that-alone-exceeds-forty-characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 3 {
				n := testenv.UniqueName(t, tc.prefix)
				if len(n) > 40 || !valid.MatchString(n) {
					t.Errorf("UniqueName(%q) = %q: want [a-z0-9-], starting with a letter, at most 40 bytes", tc.prefix, n)
				}
				if seen[n] {
					t.Errorf("UniqueName(%q) = %q twice", tc.prefix, n)
				}
				seen[n] = true
			}
		})
	}
}

func exec(t *testing.T, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestFuzzingProcessesStartServicesOnFirstUse(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"-test.run=^$", "-test.fuzz=^FuzzX$", "-test.fuzztime=10s"}, true},
		{[]string{"-test.fuzzworker", "-test.paniconexit0"}, true},
		{[]string{"--test.fuzzworker=true"}, true},
		{[]string{"-test.run=TestX", "-test.fuzzcachedir=/tmp/c"}, false},
		{[]string{"-test.v", "-test.count=1"}, false},
		{nil, false},
	} {
		if got := testenv.Fuzzing(c.args); got != c.want {
			t.Errorf("fuzzing(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
