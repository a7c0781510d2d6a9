package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/pgcluster"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestTenantCannotEscalate walks the escalation of issue 26 against an
// `intend server` run as production runs it: as root, with the database
// URL (and its password) in its environment, PostgreSQL asking for that
// password, and --executor-uids giving each environment's embedded
// executor a user of its own. An author limited to environment alpha
// releases one exec::Command that tries, step by step, what the attack
// did; every step is refused:
//   - the command runs as alpha's own unprivileged user, not as root, in
//     a process that is not the server's;
//   - it cannot read the server's environment (the database URL) through
//     /proc, and its own environment holds none of the server's variables;
//   - it cannot reach PostgreSQL: the server's own binary, `token create`
//     against the database, fails without the password, and no admin
//     token is made;
//   - it cannot read /etc/shadow;
//   - it cannot read the file environment beta's executor wrote, nor beta's
//     executor's socket or directory.
func TestTenantCannotEscalate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test starts the server as root, as production does (CI and sessions run as root)")
	}
	ctx := context.Background()
	bin := intendBinary(t)
	// Installed binaries are world-executable; the test's build directory
	// is not until told.
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}

	pgDir, err := os.MkdirTemp("", "esc-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(pgDir) })
	pw := make([]byte, 16)
	_, _ = rand.Read(pw)
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: pgDir, Password: hex.EncodeToString(pw)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	if err := pg.EnsureDatabase(ctx, "intend"); err != nil {
		t.Fatal(err)
	}
	dbURL := pg.URL("intend")

	_, hostPort, namespace := testenv.Temporal(t)
	port, err := childproc.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	cmd := exec.Command(bin, "server", "--listen", "127.0.0.1:"+strconv.Itoa(port),
		"--temporal-address", hostPort, "--temporal-namespace", namespace, "--data-dir", dataDir,
		"--executor-uids", "61000-61999", "--log-level", "warn")
	cmd.Env = append(os.Environ(), "INTEND_DATABASE_URL="+dbURL, "INTEND_BOOTSTRAP_TOKEN="+servertest.AdminToken)
	srv := servertest.StartProcess(t, cmd)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	admin := client.New(base)
	admin.Token = servertest.AdminToken
	waitHealthy(t, admin, srv)

	// The targets' directory is shared, as /tmp is.
	targets, err := os.MkdirTemp("", "esc-targets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(targets) })
	if err := os.Chmod(targets, 0o1777); err != nil {
		t.Fatal(err)
	}

	// Environment beta keeps a secret in a file its executor writes.
	beta := servertest.NewEnvironment(t, admin, "beta", nil)
	betaSecret := filepath.Join(targets, "beta-secret.txt")
	body, _ := json.Marshal(map[string]any{"resources": []map[string]any{{
		"id":         "fs::File[localhost,path=" + betaSecret + "]",
		"attributes": map[string]any{"path": betaSecret, "content": "beta's secret\n", "mode": "0600"},
	}}})
	if run, err := admin.WaitRequest(ctx, beta, servertest.Release(t, admin, beta, body), 90*time.Second, nil); err != nil || run.Deployed != 1 {
		t.Fatalf("beta's release: %+v, %v\n%s", run, err, srv.Out)
	}

	// An author of alpha releases the attack.
	alpha := servertest.NewEnvironment(t, admin, "alpha", nil)
	alphaID := environmentID(t, admin, alpha)
	author := client.New(base)
	author.Token = makeToken(t, admin, "alpha-author", "author", alphaID)
	report := filepath.Join(targets, "alpha-report.txt")
	// What the attack printed (the admin token it made) is the first line
	// of its standard output, which the action log keeps; it is made as
	// the command runs (the command's text is the intent, which a read
	// token reads).
	const stolen = "intend_nekotnimdanelots"
	script := fmt.Sprintf(`echo "made: intend_$(echo stolenadmintoken | rev)"
exec > %[1]s 2>&1
echo "uid=$(id -u) gid=$(id -g) ppid_is_server=$([ "$PPID" = "%[2]d" ] && echo yes || echo no)"
if tr '\0' '\n' < /proc/%[2]d/environ >/dev/null 2>&1; then echo "server-environ=READ"; tr '\0' '\n' < /proc/%[2]d/environ; else echo "server-environ=denied"; fi
if tr '\0' ' ' < /proc/%[2]d/cmdline | grep -q postgres; then echo "server-cmdline=HAS-DATABASE-URL"; else echo "server-cmdline=clean"; fi
if env | grep -q -e INTEND_DATABASE_URL -e INTEND_BOOTSTRAP_TOKEN -e INTEND_TOKEN -e "$(echo postgres:)"; then echo "own-env=HAS-SECRETS"; env; else echo "own-env=clean"; fi
if cat /etc/shadow >/dev/null 2>&1; then echo "shadow=READ"; else echo "shadow=denied"; fi
if cat %[3]s >/dev/null 2>&1; then echo "beta-file=READ"; else echo "beta-file=denied"; fi
if ls %[4]s >/dev/null 2>&1; then echo "server-data=READ"; else echo "server-data=denied"; fi
if %[5]s token create --database-url 'postgres://postgres@127.0.0.1:%[6]d/intend?sslmode=disable&connect_timeout=5' --name evil --role admin >/dev/null 2>&1; then echo "token-create=MADE"; else echo "token-create=refused"; fi
echo done
`, report, srv.PID(), betaSecret, dataDir, bin, pg.Port())
	body, _ = json.Marshal(map[string]any{"resources": []map[string]any{{
		"id":         "exec::Command[localhost,name=attack]",
		"attributes": map[string]any{"name": "attack", "command": script, "creates": report},
	}}})
	run, err := author.WaitRequest(ctx, alpha, servertest.Release(t, author, alpha, body), 120*time.Second, nil)
	if err != nil {
		t.Fatalf("alpha's release: %v\n%s", err, srv.Out)
	}
	out, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("the command wrote no report (run %+v): %v\n%s", run, err, srv.Out)
	}
	got := string(out)
	t.Logf("what alpha's command found:\n%s", got)
	for _, want := range []string{"ppid_is_server=no", "server-environ=denied", "server-cmdline=clean", "own-env=clean",
		"shadow=denied", "beta-file=denied", "server-data=denied", "token-create=refused", "done"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("alpha's command: want %s", want)
		}
	}
	var uid int
	if _, err := fmt.Sscanf(got, "uid=%d", &uid); err != nil || uid < 61000 || uid > 61999 {
		t.Errorf("alpha's command ran as uid %d (%v), want one of --executor-uids", uid, err)
	}
	for _, tok := range listTokens(t, admin) {
		if tok == "evil" {
			t.Error("a token named evil was made")
		}
	}

	// What the command printed is the author's to read, not a read
	// token's of the same environment.
	reader := client.New(base)
	reader.Token = makeToken(t, admin, "alpha-reader", "read", alphaID)
	for who, cl := range map[string]*client.Client{"read": reader, "author": author} {
		var raw json.RawMessage
		if err := cl.Do(ctx, "GET", "/api/v1/environments/"+alpha+"/actions", nil, &raw); err != nil {
			t.Fatal(err)
		}
		if shown := strings.Contains(string(raw), stolen); shown != (who == "author") {
			t.Errorf("the action log as %s shows the command's output: %v, want %v\n%s", who, shown, who == "author", raw)
		}
	}
}

// environmentID is env's id.
func environmentID(t *testing.T, c *client.Client, env string) string {
	t.Helper()
	e, err := c.Environment(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// makeToken makes a token of role limited to env and returns its secret.
func makeToken(t *testing.T, c *client.Client, name, role, env string) string {
	t.Helper()
	tok, err := c.CreateToken(context.Background(), client.NewToken{Name: name, Role: role, Environments: []string{env}})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Secret
}

// listTokens lists the names of the live tokens.
func listTokens(t *testing.T, c *client.Client) []string {
	t.Helper()
	toks, err := c.Tokens(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(toks))
	for i, tok := range toks {
		names[i] = tok.Name
	}
	return names
}

// TestRootServerNamesItsExecutorsUser: a server started as root does not
// run tenants' resources as root unless told: it refuses to start its
// embedded executor without --executor-user or --executor-uids (the
// refusal of the server's Temporal credentials is TestCheckEmbedded's).
func TestRootServerNamesItsExecutorsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root, as CI and sessions run")
	}
	ctx := context.Background()
	_, hostPort, namespace := testenv.Temporal(t)
	db := testenv.Database(t)
	_, err := server.Start(ctx, server.Config{Listen: "127.0.0.1:0", DatabaseURL: db, TemporalAddress: hostPort,
		TemporalNamespace: namespace, EmbeddedExecutor: true})
	if err == nil || !strings.Contains(err.Error(), "--executor-user") {
		t.Errorf("root without an executor user: %v, want a refusal naming --executor-user", err)
	}
}
