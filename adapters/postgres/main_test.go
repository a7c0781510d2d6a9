package postgres_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/pgcluster"
)

// The tests share one throwaway cluster that, unlike pgcluster's default,
// checks passwords over TCP (scram-sha-256 for every user, the admin
// included), so that logging in as a managed role proves its password, and
// that logs every statement, so that the log can be searched for secrets.
var (
	cluster  *pgcluster.Cluster
	adminURL string // postgres://postgres@127.0.0.1:<port>/postgres, no password
	logPath  string
	nameSeq  atomic.Int64
)

const (
	// adminPasswordEnv holds the admin password for the whole test binary;
	// resources name it as {"secret": "env:" + adminPasswordEnv}.
	adminPasswordEnv = "INTEND_SECRET_TEST_PG_ADMIN_PASSWORD"
	adminPassword    = "admin-Pa55-for-tests"
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "intend-pgadapter-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The server runs as user postgres when the tests run as root.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster, err = pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "pg")})
	if err != nil {
		fmt.Fprintf(os.Stderr, "the postgres adapter tests need a PostgreSQL server "+
			"(install the server binaries: `make tools` or `apt-get install -y postgresql`): %v\n", err)
		return 1
	}
	defer cluster.Stop(context.Background())
	if err := requirePasswords(ctx, cluster, adminPassword, true); err != nil {
		fmt.Fprintf(os.Stderr, "configure the test cluster: %v\n", err)
		return 1
	}
	os.Setenv(adminPasswordEnv, adminPassword)
	adminURL = strings.TrimSuffix(cluster.URL("postgres"), "?sslmode=disable")
	logPath = filepath.Join(cluster.Dir(), "postgres.log")
	return m.Run()
}

// requirePasswords gives the superuser a password, makes every TCP
// connection authenticate with SCRAM-SHA-256 (local socket connections
// stay trusted), optionally logs every statement, and waits until the
// server enforces it.
func requirePasswords(ctx context.Context, c *pgcluster.Cluster, password string, logAll bool) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var hba string
	if err := conn.QueryRow(ctx, "show hba_file").Scan(&hba); err != nil {
		return err
	}
	stmts := []string{"ALTER ROLE postgres PASSWORD " + quote(password)}
	if logAll {
		stmts = append(stmts, "ALTER SYSTEM SET log_statement = 'all'")
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", strings.SplitN(s, " PASSWORD", 2)[0], err)
		}
	}
	// The file exists and belongs to the server's user; WriteFile keeps
	// its owner.
	rules := "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(hba, []byte(rules), 0o600); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "select pg_reload_conf()"); err != nil {
		return err
	}
	// The reload is asynchronous: wait until a connection without the
	// password is refused.
	deadline := time.Now().Add(30 * time.Second)
	for {
		probe, err := pgx.Connect(ctx, c.URL("postgres"))
		if err != nil {
			return nil
		}
		probe.Close(ctx)
		if time.Now().After(deadline) {
			return fmt.Errorf("the server still accepts connections without a password after reloading %s", hba)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// quote is a SQL string literal, for the tests' own statements.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// uniqueName returns a fresh lower-case identifier starting with prefix.
func uniqueName(prefix string) string {
	return prefix + "_" + strconv.FormatInt(nameSeq.Add(1), 10)
}

// adminDSN is the admin connection string to database db, with the
// password, for the tests' direct checks.
func adminDSN(db string) string {
	return fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable", adminPassword, cluster.Port(), db)
}

// connectAs connects to database db as user with password.
func connectAs(ctx context.Context, user, password, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://127.0.0.1:%d/%s?sslmode=disable", cluster.Port(), db))
	if err != nil {
		return nil, err
	}
	cfg.User, cfg.Password = user, password
	return pgx.ConnectConfig(ctx, cfg)
}

// sqlExec runs statements as the admin in database db.
func sqlExec(t testing.TB, db string, stmts ...string) {
	t.Helper()
	// Not t.Context(): cleanups use it too, after it is canceled.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, adminDSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// sqlBool runs a query returning one boolean as the admin in database db.
func sqlBool(t testing.TB, db, query string, args ...any) bool {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), adminDSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var b bool
	if err := conn.QueryRow(context.Background(), query, args...).Scan(&b); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return b
}

// sqlStrings runs a query returning one text[] as the admin.
func sqlStrings(t testing.TB, db, query string, args ...any) []string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), adminDSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var out []string
	if err := conn.QueryRow(context.Background(), query, args...).Scan(&out); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
}

// res builds a desired resource of typ identified by idAttr, on the test
// cluster, the admin password given as a secret reference.
func res(typ, idAttr string, attrs map[string]any) adapters.Resource {
	all := map[string]any{
		"server":          adminURL,
		"server_password": map[string]any{"secret": "env:" + adminPasswordEnv},
	}
	maps.Copy(all, attrs)
	value, _ := all[idAttr].(string)
	if value == "" {
		value = "unnamed"
	}
	return adapters.Resource{
		ID:         resource.ID{Type: typ, Agent: "pg1", Attribute: idAttr, Value: value},
		Attributes: all,
	}
}

// withID returns r with the id of like: conformance's invalid resources
// address the same place as the valid one.
func withID(r adapters.Resource, like adapters.Resource) adapters.Resource {
	r.ID = like.ID
	return r
}

// apply runs the engine once, as the executor does, and returns the
// context to look at its logs.
func apply(t testing.TB, h adapters.Handler, r adapters.Resource, dryRun bool) (adapters.Outcome, *adapters.Context, error) {
	t.Helper()
	hc := adapters.NewContext()
	t.Cleanup(hc.Close)
	out, err := adapters.Run(context.Background(), h, hc, r, dryRun) // cleanups call it too
	return out, hc, err
}

// mustApply is apply that fails t on an error or another action than want.
func mustApply(t testing.TB, h adapters.Handler, r adapters.Resource, want adapters.Operation) *adapters.Context {
	t.Helper()
	out, hc, err := apply(t, h, r, false)
	if err != nil {
		t.Fatalf("apply %s: %v", r.ID, err)
	}
	if out.Action != want {
		t.Fatalf("apply %s: action %q, want %q (diff %v)", r.ID, out.Action, want, out.Diff)
	}
	return hc
}

func purged(r adapters.Resource) adapters.Resource {
	r.Purged = true
	return r
}

// logContains reports whether the server log holds s.
func logContains(t testing.TB, s string) bool {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), s)
}
