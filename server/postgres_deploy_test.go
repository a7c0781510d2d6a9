package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/pgcluster"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/workflows"
)

// managedPostgres is a PostgreSQL cluster for intend to manage, apart from
// the one holding intend's own database: it checks passwords over TCP
// (so that logging in proves a role's password) and logs every statement
// (so that its log can be searched for the secret).
type managedPostgres struct {
	cluster  *pgcluster.Cluster
	password string // the superuser's
}

func startManagedPostgres(t *testing.T) managedPostgres {
	t.Helper()
	dir, err := os.MkdirTemp("", "intend-managed-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the server runs as postgres under root
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "pg")})
	if err != nil {
		t.Fatalf("start the PostgreSQL server to manage (install the server binaries: "+
			"`make tools` or `apt-get install -y postgresql`): %v", err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	m := managedPostgres{cluster: c, password: "admin-" + randomHex(t)}

	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var hba string
	if err := conn.QueryRow(ctx, "show hba_file").Scan(&hba); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"ALTER ROLE postgres PASSWORD '" + m.password + "'",
		"ALTER SYSTEM SET log_statement = 'all'",
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("configure the managed server: %v", err)
		}
	}
	if err := os.WriteFile(hba, []byte("local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "select pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the managed server to check passwords", 30*time.Second, func() error {
		probe, err := pgx.Connect(ctx, c.URL("postgres"))
		if err != nil {
			return nil // passwords are checked now
		}
		probe.Close(ctx)
		return errors.New("the managed server still accepts connections without a password")
	})
	return m
}

// connect logs in as user with password to database db.
func (m managedPostgres) connect(ctx context.Context, user, password, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://127.0.0.1:%d/%s?sslmode=disable", m.cluster.Port(), db))
	if err != nil {
		return nil, err
	}
	cfg.User, cfg.Password = user, password
	return pgx.ConnectConfig(ctx, cfg)
}

func randomHex(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestPostgresDeploy deploys a postgres::Database, a postgres::Role whose
// password is a secret reference, and a postgres::Grant requiring both,
// through the API, Temporal and the embedded executor; the role logs in
// and holds the privilege. Then a drifted password is reported by a
// dry-run and repaired. The secret's value appears nowhere intend keeps or
// sends: not in its database, its API responses, the Temporal histories
// of the runs, nor the managed server's statement log.
func TestPostgresDeploy(t *testing.T) {
	pg := startManagedPostgres(t)
	secret := "Role-Secret-" + randomHex(t)
	const secretEnv, adminEnv = "INTEND_E2E_PG_ROLE_PASSWORD", "INTEND_E2E_PG_ADMIN_PASSWORD"
	// The embedded executor runs in this process and resolves references
	// from its environment: only variables with its prefix, here one of
	// this test's (intend server --secret-env-prefix).
	t.Setenv(secretEnv, secret)
	t.Setenv(adminEnv, pg.password)

	c, _, intendDB := startValidated(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second, SecretEnvPrefix: "INTEND_E2E_"})
	ctx := context.Background()
	env := newEnv(t, c, "pg", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	conn := map[string]any{
		"server":          fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", pg.cluster.Port()),
		"server_password": map[string]any{"secret": "env:" + adminEnv},
	}
	with := func(attrs map[string]any) map[string]any {
		for k, v := range conn {
			attrs[k] = v
		}
		return attrs
	}
	db := res{ID: "postgres::Database[localhost,name=appdb]",
		Attributes: with(map[string]any{"name": "appdb", "encoding": "UTF8", "connection_limit": 20})}
	role := res{ID: "postgres::Role[localhost,name=app]",
		Attributes: with(map[string]any{"name": "app", "login": true,
			"password": map[string]any{"secret": "env:" + secretEnv}})}
	grant := res{ID: "postgres::Grant[localhost,grant=app@database:appdb]",
		Attributes: with(map[string]any{"grant": "app@database:appdb", "role": "app", "on": "database",
			"object": "appdb", "privileges": []any{"CONNECT", "CREATE"}}),
		Requires: []string{db.ID, role.ID}}

	run := deploy(t, c, env, body(t, db, role, grant))
	if run.Total != 3 || run.Deployed != 3 || run.Failed != 0 {
		for _, id := range []string{db.ID, role.ID, grant.ID} {
			st, acts := getResource(t, c, env, id)
			t.Logf("%s: %+v %+v", id, st, acts)
		}
		t.Fatalf("run = %+v, want 3 of 3 deployed", run)
	}
	runs := []client.DeployRun{run}

	// The role logs in to its database with the secret, and only with it,
	// and holds the granted privilege.
	login := func(password string) error {
		conn, err := pg.connect(ctx, "app", password, "appdb")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var create bool
		if err := conn.QueryRow(ctx, "select has_database_privilege('appdb', 'CREATE')").Scan(&create); err != nil {
			return err
		}
		if !create {
			return fmt.Errorf("app lacks CREATE on appdb")
		}
		return nil
	}
	if err := login(secret); err != nil {
		t.Fatalf("the deployed role cannot log in with its secret: %v", err)
	}
	if err := login("not-the-secret"); err == nil {
		t.Fatal("the role logs in with a wrong password: the managed server does not check passwords")
	}

	// Drift: the password is changed behind intend's back. A dry-run
	// reports it (masked), a repair restores it.
	admin, err := pg.connect(ctx, "postgres", pg.password, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "ALTER ROLE app PASSWORD 'drifted-password'"); err != nil {
		t.Fatal(err)
	}
	var dry client.DeployRun
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/dryrun", map[string]any{}, &dry); err != nil {
		t.Fatal(err)
	}
	dryPath := fmt.Sprintf("/api/v1/environments/%s/dryrun/%d", env, dry.Run)
	var dryOut struct {
		client.DeployRun
		Results []client.DryrunResult
	}
	wait.For(t, "the dry-run to be done", 60*time.Second, func() error {
		if err := c.Do(ctx, http.MethodGet, dryPath, nil, &dryOut); err != nil {
			t.Fatal(err)
		}
		return wait.Unless(dryOut.Status == "done", "dry-run not done: %+v", dryOut)
	})
	drift := ""
	for _, r := range dryOut.Results {
		if r.ResourceID == role.ID {
			drift = string(r.Changes)
		}
	}
	if !strings.Contains(drift, `"password"`) || !strings.Contains(drift, "env:"+secretEnv) {
		t.Errorf("the dry-run's changes of the role = %s, want the password, shown as its reference", drift)
	}
	req, err := c.Deploy(ctx, env, "full")
	if err != nil {
		t.Fatal(err)
	}
	repair, err := c.WaitRequest(ctx, env, req.ID, 60*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	runs = append(runs, repair)
	if err := login(secret); err != nil {
		t.Fatalf("the repair did not restore the password: %v", err)
	}
	if _, acts := getResource(t, c, env, role.ID); len(acts) == 0 || !strings.Contains(string(acts[0].Changes), `"password"`) {
		t.Errorf("the repair's action does not record the password change: %+v", acts)
	}

	// The secret appears nowhere; its reference does, which shows each
	// search looks where the intent went.
	ref := "env:" + secretEnv
	where := map[string][]byte{}
	where["pg_dump of the intend database"] = dumpDatabase(t, intendDB)
	for _, p := range apiPaths(env, []string{db.ID, role.ID, grant.ID}, dry.Run) {
		where["GET "+p] = getRaw(t, c, p)
	}
	where["Temporal histories"] = histories(t, env, append(runs, dry))
	for name, b := range where {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the secret appears in %s", name)
		}
	}
	// What each place must hold for the search there to mean something.
	// Attributes do not travel through Temporal (executors load batches
	// from PostgreSQL), but the runs' payloads name the resources.
	for name, marker := range map[string]string{
		"pg_dump of the intend database":                                        ref,
		"GET " + resourcePath(env, role.ID):                                     ref,
		"GET /api/v1/environments/" + env + "/actions":                          ref,
		"GET " + fmt.Sprintf("/api/v1/environments/%s/dryrun/%d", env, dry.Run): ref,
		"Temporal histories":                                                    db.ID,
	} {
		if !bytes.Contains(where[name], []byte(marker)) {
			t.Errorf("%s does not hold %s: the search there proves nothing", name, marker)
		}
	}
	log, err := os.ReadFile(filepath.Join(pg.cluster.Dir(), "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(log, []byte(secret)) {
		t.Errorf("the secret appears in the managed server's log")
	}
	if !bytes.Contains(log, []byte(`CREATE ROLE "app"`)) {
		t.Errorf("the managed server's log lacks the CREATE ROLE statement; does it log statements?")
	}
}

func resourcePath(env, rid string) string {
	return "/api/v1/environments/" + env + "/resources/" + url.PathEscape(rid)
}

// apiPaths are the API responses that could show a resource's secret.
func apiPaths(env string, ids []string, dryrun int64) []string {
	base := "/api/v1/environments/" + env
	paths := []string{base + "/resources", base + "/actions", base + "/facts", base + "/versions/1",
		base + "/runs", fmt.Sprintf("%s/dryrun/%d", base, dryrun)}
	for _, id := range ids {
		paths = append(paths, resourcePath(env, id), resourcePath(env, id)+"/actions", resourcePath(env, id)+"/facts")
	}
	return paths
}

// getRaw returns the body of a successful GET.
func getRaw(t *testing.T, c *client.Client, path string) []byte {
	t.Helper()
	resp, err := authGet(c, c.Base+path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	return b
}

// dumpDatabase returns the pg_dump of the database at dbURL: schema and
// every row of every table.
func dumpDatabase(t *testing.T, dbURL string) []byte {
	t.Helper()
	bin, err := pgcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "pg_dump"), "--dbname", dbURL)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, errOut.String())
	}
	if !bytes.Contains(out.Bytes(), []byte("resource_actions")) {
		t.Fatalf("the dump lacks the table resource_actions:\n%s", out.String())
	}
	return out.Bytes()
}

// histories returns every event of every workflow execution of env (its
// scheduler and its runs, each run of a workflow that continued as new
// included), serialized: payloads are in there as the bytes that were
// sent. It waits until the runs given are visible.
func histories(t *testing.T, env string, runs []client.DeployRun) []byte {
	t.Helper()
	tc, _, _ := testenv.Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var execs []struct{ id, run string }
	wait.For(t, "the runs' and the scheduler's workflows to be listed", 60*time.Second, func() error {
		execs = execs[:0]
		var token []byte
		for {
			resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Query: fmt.Sprintf("WorkflowId STARTS_WITH 'env/%s/'", env), NextPageToken: token})
			if err != nil {
				t.Fatalf("list workflows: %v", err)
			}
			for _, e := range resp.Executions {
				execs = append(execs, struct{ id, run string }{e.Execution.WorkflowId, e.Execution.RunId})
			}
			if token = resp.NextPageToken; len(token) == 0 {
				break
			}
		}
		missing := ""
		for _, r := range runs {
			found := false
			for _, e := range execs {
				found = found || e.id == r.WorkflowID
			}
			if !found {
				missing = r.WorkflowID
			}
		}
		if !found(execs, workflows.SchedulerWorkflowID(env)) {
			missing = workflows.SchedulerWorkflowID(env)
		}
		return wait.Unless(missing == "", "workflow %s not listed", missing)
	})
	var all bytes.Buffer
	for _, e := range execs {
		it := tc.GetWorkflowHistory(ctx, e.id, e.run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatalf("history of %s/%s: %v", e.id, e.run, err)
			}
			b, err := proto.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			all.Write(b)
		}
	}
	return all.Bytes()
}

func found(execs []struct{ id, run string }, id string) bool {
	for _, e := range execs {
		if e.id == id {
			return true
		}
	}
	return false
}
