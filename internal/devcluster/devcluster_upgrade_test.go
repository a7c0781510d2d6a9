package devcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/devcluster"
	"github.com/intendhq/intend/migrations"
)

// previousRelease builds cmd/intend as it was just before the newest
// migration was added (from this checkout's git history), and returns the
// binary and that commit.
func previousRelease(t *testing.T, dir string) (bin, commit string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations in %s: %v", root, err)
	}
	sort.Strings(files)
	newest := filepath.Base(files[len(files)-1])
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v (this test needs the repository's history: a clone, not an export)", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	// The mainline commit that added it (a merge of a branch, maybe, whose
	// own commits numbered it otherwise): the release before it is its
	// first parent.
	added := git("log", "--first-parent", "--diff-filter=A", "--no-renames", "--format=%H", "-1", "--", "migrations/"+newest)
	if added == "" {
		t.Fatalf("no commit adds migrations/%s: is this a shallow clone?", newest)
	}
	commit = git("rev-parse", added+"^")
	src := filepath.Join(dir, "previous-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, out)
	}
	bin = filepath.Join(dir, "intend-previous")
	build := exec.Command("go", "build", "-o", bin, "./cmd/intend")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the previous release (%s): %v\n%s", commit, err, out)
	}
	return bin, commit
}

// TestRollingUpgrade upgrades the two replicas one at a time across the
// newest migration, as docs/operations.md says: both start on the binary
// of the commit before that migration; server-1 is replaced by this
// binary, which migrates the schema while server-2, of the previous
// release, keeps serving on it; deploys go through each, then server-2 is
// replaced too. Nothing fails, every deploy ends done, the schema ends at
// this binary's newest version.
func TestRollingUpgrade(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bin := buildIntend(t, dir)
	previous, commit := previousRelease(t, dir)
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, devcluster.Options{
		Dir: filepath.Join(dir, "cluster"), Intend: bin, ServerIntend: previous, LogLevel: "warn",
	})
	conn, err := pgx.Connect(ctx, c.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := func() int32 {
		var v int32
		if err := conn.QueryRow(ctx, `select version from `+migrations.VersionTable).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := schema(); v != latest-1 {
		t.Fatalf("the previous release (%s) set the schema up at version %d, want %d", commit[:12], v, latest-1)
	}
	files := filepath.Join(dir, "files")
	deployFiles(t, replicaClient(c, 0), files, 1, "before the upgrade")

	if err := c.Servers[0].Replace(ctx, bin); err != nil {
		t.Fatal(err)
	}
	if v := schema(); v != latest {
		t.Fatalf("after server-1's upgrade the schema is at version %d, want %d", v, latest)
	}
	t.Logf("server-1 upgraded: schema %d → %d; server-2 still runs %s", latest-1, latest, commit[:12])
	deployFiles(t, replicaClient(c, 1), files, 2, "through the previous release's server-2 on the new schema")
	deployFiles(t, replicaClient(c, 0), files, 3, "through the upgraded server-1")

	if err := c.Servers[1].Replace(ctx, bin); err != nil {
		t.Fatal(err)
	}
	deployFiles(t, c.Client(), files, 4, "after both are upgraded")
	if v := schema(); v != latest {
		t.Fatalf("the schema ended at version %d, want %d", v, latest)
	}
}

// deployFiles exports and releases generation gen of 200 files under dir
// through cl, waits for the run to end done, and checks the files.
func deployFiles(t *testing.T, cl *client.Client, dir string, gen int, what string) {
	t.Helper()
	ctx := context.Background()
	var rs []map[string]any
	for i := range 200 {
		p := filepath.Join(dir, fmt.Sprintf("f%03d", i))
		rs = append(rs, map[string]any{"id": fmt.Sprintf("fs::File[%s,path=%s]", devcluster.AgentShared, p),
			"attributes": map[string]any{"path": p, "content": fmt.Sprintf("generation %d\n", gen), "mode": "0644"}})
	}
	body := mustJSON(t, map[string]any{"resources": rs})
	began := time.Now()
	v, err := cl.ExportVersion(ctx, devcluster.Environment, body)
	if err != nil {
		t.Fatalf("export %s: %v", what, err)
	}
	rel, err := cl.Release(ctx, devcluster.Environment, v.Version)
	if err != nil || rel.Request == nil {
		t.Fatalf("release %s: %+v, %v", what, rel, err)
	}
	run, err := cl.WaitRequest(ctx, devcluster.Environment, rel.Request.ID, 2*time.Minute, nil)
	if err != nil {
		t.Fatalf("deploy %s: %v", what, err)
	}
	if run.Status != "done" || run.Deployed != len(rs) || run.Failed != 0 {
		t.Fatalf("deploy %s: run %+v, want done with %d deployed", what, run, len(rs))
	}
	for i := range rs {
		p := filepath.Join(dir, fmt.Sprintf("f%03d", i))
		if b, err := os.ReadFile(p); err != nil || string(b) != fmt.Sprintf("generation %d\n", gen) {
			t.Fatalf("deploy %s: %s = %q, %v", what, p, b, err)
		}
	}
	t.Logf("deployed version %d %s in %v", v.Version, what, since(began))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
