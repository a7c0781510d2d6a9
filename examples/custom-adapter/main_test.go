package customadapter_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/examples/custom-adapter/kv"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }

// platforms are the kv module's (module/intend-module.yaml).
var platforms = []string{"linux/amd64", "linux/arm64"}

// TestCustomAdapterModule does what README.md walks through, with the
// stock intend binary only: it builds bin/intend and the kv plugin for
// both platforms of the module, starts `intend executor` for agent app1
// (its adapter for kv::Entry is the plugin the version names, fetched
// from the server: the executor is never rebuilt), and deploys the
// project with `intend export -d`. Then it upgrades the plugin (a new
// build, the module's next version, and a model change), dry-runs the
// upgrade with `intend dryrun` (the new plugin observes, nothing changes)
// and deploys it: the new release writes the file, and the old version
// still records the old plugin.
func TestCustomAdapterModule(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	intend := filepath.Join(dir, "intend")
	goBuild(t, nil, "-o", intend, "../../cmd/intend")

	// A copy of the module and of the project (../module from it), the
	// project's files under dir.
	mod, proj := filepath.Join(dir, "module"), filepath.Join(dir, "project")
	copyDir(t, "module", mod)
	copyDir(t, "project", proj)
	root := filepath.Join(dir, "app1")
	edit(t, filepath.Join(proj, "main.cue"), `root: "/tmp/intend-kv"`, fmt.Sprintf("root: %q", root))
	buildPlugin(t, mod, "v1.0.0")

	_, hostPort, namespace := testenv.Temporal(t)
	c, srv, _ := servertest.StartServer(t, server.Config{
		EmbeddedExecutor: true, ReconcileEvery: time.Second, SchedulerPoll: time.Second,
	})
	env := servertest.NewEnvironment(t, c, "kv", map[string]any{"autostart_agents": []string{}})

	cmd := exec.Command(intend, "executor")
	cmd.Env = append(os.Environ(), "INTEND_ENVIRONMENT="+env, "INTEND_AGENTS=app1",
		"INTEND_EXECUTOR_NAME=kv-1", "INTEND_SERVER="+srv.URL(),
		"INTEND_TOKEN="+servertest.ExecutorToken(t, c, env, "app1"), "INTEND_TEMPORAL_ADDRESS="+hostPort,
		"INTEND_TEMPORAL_NAMESPACE="+namespace, "INTEND_PLUGIN_CACHE_DIR="+filepath.Join(dir, "plugins"),
		"INTEND_LOG_LEVEL=info")
	executor := servertest.StartProcess(t, cmd) // killed when a check fails
	out := executor.Out

	// The CLI as an author runs it: the server, token and environment
	// from INTEND_* variables, the module cache of its own.
	cli := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(intend, args...)
		cmd.Dir = proj
		cmd.Env = append(os.Environ(), "INTEND_SERVER="+srv.URL(), "INTEND_TOKEN="+servertest.AdminToken,
			"INTEND_ENVIRONMENT="+env, "XDG_CACHE_HOME="+filepath.Join(dir, "cache"), "NO_COLOR=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("intend %s: %v\n%s%s\nthe executor's log:\n%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes(), out)
		}
		return stdout.Bytes()
	}
	// deploy exports and releases the project, and waits for the deploy
	// of the changed resources.
	deploy := func(changed int) int64 {
		t.Helper()
		var res struct {
			Version client.VersionInfo `json:"version"`
			Release client.Release     `json:"release"`
		}
		if err := json.Unmarshal(cli("export", "-d", "-o", "json"), &res); err != nil {
			t.Fatal(err)
		}
		if res.Release.Request == nil {
			t.Fatalf("version %d: its release queued no deploy", res.Version.Version)
		}
		run, err := c.WaitRequest(ctx, env, res.Release.Request.ID, 2*time.Minute, nil)
		if err != nil || run.Deployed != changed || run.Failed != 0 {
			t.Fatalf("the deploy of version %d: %+v, %v\nthe executor's log:\n%s", res.Version.Version, run, err, out)
		}
		return res.Version.Version
	}

	v1 := deploy(3)
	kvFile := filepath.Join(root, "app1.env")
	checkFile(t, kvFile, "v1.0.0", "PORT=8080", "DB_HOST=db.internal")
	if b, err := os.ReadFile(filepath.Join(root, "motd")); err != nil || string(b) != "app1 is configured by intend\n" {
		t.Errorf("motd = %q, %v (a built-in adapter)", b, err)
	}
	old := digests(t, mod)
	checkPlugin(t, c, env, v1, "v1.0.0", old)
	// intend versions show lists the plugin per platform with its digest.
	show := string(cli("versions", "show", strconv.FormatInt(v1, 10)))
	for _, p := range platforms {
		if !strings.Contains(show, p) || !strings.Contains(show, old[p]) {
			t.Errorf("intend versions show %d lacks plugin kv for %s (%s):\n%s", v1, p, old[p], show)
		}
	}
	acts, _, err := c.Actions(ctx, env, client.ActionQuery{Resource: "kv::Entry[app1,key=PORT]", Action: "deploy"})
	if err != nil || len(acts) == 0 || acts[0].Executor != "kv-1" || acts[0].Result != "deployed" {
		t.Errorf("the action log of kv::Entry[app1,key=PORT]: %+v, %v; want deployed by kv-1", acts, err)
	}
	checkArtifacts(t, c, env, old)

	// The upgrade: the plugin's next release, the module's next version,
	// and a model change that the new release deploys.
	buildPlugin(t, mod, "v1.1.0")
	edit(t, filepath.Join(mod, "intend-module.yaml"), "version: v1.0.0", "version: v1.1.0")
	edit(t, filepath.Join(proj, "intend.yaml"), "version: v1.0.0", "version: v1.1.0")
	edit(t, filepath.Join(proj, "main.cue"), `value: "8080"`, `value: "9090"`)
	upgraded := digests(t, mod)
	for _, p := range platforms {
		if upgraded[p] == old[p] {
			t.Fatalf("the v1.1.0 build for %s has the digest of v1.0.0's", p)
		}
	}

	before, err := os.ReadFile(kvFile)
	if err != nil {
		t.Fatal(err)
	}
	var dry struct {
		Version       int64                 `json:"version"`
		Results       []client.DryrunResult `json:"results"`
		PluginChanges []string              `json:"plugin_changes"`
	}
	if err := json.Unmarshal(cli("dryrun", "-o", "json"), &dry); err != nil {
		t.Fatal(err)
	}
	// The dry-run says which plugin release it ran, against the released one.
	if want := "plugin kv v1.0.0 → kv v1.1.0: linux/amd64 " + short(old["linux/amd64"]) + " → " + short(upgraded["linux/amd64"]); len(dry.PluginChanges) != 1 || !strings.HasPrefix(dry.PluginChanges[0], want) {
		t.Errorf("the dry-run's plugin changes: %q, want one starting %q", dry.PluginChanges, want)
	}
	changes := map[string]string{}
	for _, r := range dry.Results {
		changes[r.ResourceID] = r.Status
		if r.ResourceID == "kv::Entry[app1,key=PORT]" && (!strings.Contains(string(r.Changes), "8080") || !strings.Contains(string(r.Changes), "9090")) {
			t.Errorf("the dry-run's changes of %s: %s, want 8080 → 9090", r.ResourceID, r.Changes)
		}
	}
	if len(changes) != 3 || changes["kv::Entry[app1,key=PORT]"] != "modified" || changes["kv::Entry[app1,key=DB_HOST]"] != "unmodified" {
		t.Errorf("the dry-run of the upgrade: %+v, want PORT modified, the rest unmodified", dry.Results)
	}
	checkPlugin(t, c, env, dry.Version, "v1.1.0", upgraded)
	// The dry-run ran the new release: the executor started it for the
	// dry-run, before any deploy of it.
	if !strings.Contains(out.String(), upgraded[platform(t)]) {
		t.Errorf("the executor did not start the plugin %s for the dry-run:\n%s", upgraded[platform(t)], out)
	}
	if after, err := os.ReadFile(kvFile); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the dry-run changed %s: %q, was %q (%v)", kvFile, after, before, err)
	}

	v2 := deploy(1) // PORT: only a changed resource is deployed
	checkFile(t, kvFile, "v1.1.0", "PORT=9090", "DB_HOST=db.internal")
	checkPlugin(t, c, env, v2, "v1.1.0", upgraded)
	checkPlugin(t, c, env, v1, "v1.0.0", old) // the old version keeps its plugin
	checkArtifacts(t, c, env, old, upgraded)

	if err := executor.Stop(); err != nil {
		t.Fatalf("stopping the executor (SIGTERM): %v\n%s", err, out)
	}
}

// platform is this machine's, as the module names it.
func platform(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOOS", "GOARCH").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	return f[0] + "/" + f[1]
}

func goBuild(t *testing.T, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// buildPlugin builds ./plugin, release version, into the module's dist/
// for each of its platforms, as README.md does.
func buildPlugin(t *testing.T, mod, version string) {
	t.Helper()
	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		goBuild(t, []string{"GOOS=" + goos, "GOARCH=" + goarch, "CGO_ENABLED=0"},
			"-ldflags", "-X main.version="+version,
			"-o", filepath.Join(mod, "dist", "kv-"+goos+"-"+goarch), "./plugin")
	}
}

// digests are the module's built artifacts' by platform.
func digests(t *testing.T, mod string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range platforms {
		b, err := os.ReadFile(filepath.Join(mod, "dist", "kv-"+strings.ReplaceAll(p, "/", "-")))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		out[p] = "sha256:" + hex.EncodeToString(sum[:])
	}
	return out
}

// checkPlugin: version v requires the kv plugin of module kv at
// release, with these artifacts.
func checkPlugin(t *testing.T, c *client.Client, env string, v int64, release string, artifacts map[string]string) {
	t.Helper()
	var got client.Version
	if err := c.Do(context.Background(), http.MethodGet, client.EnvPath(env, "versions", fmt.Sprint(v)), nil, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Plugins) != 1 {
		t.Fatalf("version %d requires plugins %+v, want kv", v, got.Plugins)
	}
	p := got.Plugins[0]
	if p.Name != "kv" || p.Module != "kv" || p.Version != release || p.Runtime != "exec" ||
		strings.Join(p.Types, ",") != kv.EntryType || len(p.Artifacts) != len(artifacts) {
		t.Errorf("version %d's plugin: %+v, want kv of module kv %s serving %s", v, p, release, kv.EntryType)
	}
	for platform, d := range artifacts {
		if p.Artifacts[platform] != d {
			t.Errorf("version %d's plugin for %s: %s, want %s", v, platform, p.Artifacts[platform], d)
		}
	}
}

// checkArtifacts: the environment holds exactly these artifacts.
func checkArtifacts(t *testing.T, c *client.Client, env string, sets ...map[string]string) {
	t.Helper()
	var page struct {
		Items []client.Artifact `json:"items"`
	}
	if err := c.Do(context.Background(), http.MethodGet, client.EnvPath(env, "artifacts"), nil, &page); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, a := range page.Items {
		have[a.Digest] = true
	}
	n := 0
	for _, s := range sets {
		for platform, d := range s {
			n++
			if !have[d] {
				t.Errorf("GET artifacts lacks %s (%s): %+v", d, platform, page.Items)
			}
		}
	}
	if len(page.Items) != n {
		t.Errorf("GET artifacts: %d, want %d: %+v", len(page.Items), n, page.Items)
	}
}

// checkFile: the environment file starts with the header of the
// plugin's release and holds lines (resources of one batch run
// concurrently: in any order).
func checkFile(t *testing.T, file, release string, lines ...string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(got) != len(lines)+1 || got[0] != "# "+kv.HeaderMark+" "+release {
		t.Fatalf("%s = %q, want the header of %s and %q", file, b, release, lines)
	}
	for _, l := range lines {
		found := false
		for _, g := range got[1:] {
			found = found || g == l
		}
		if !found {
			t.Errorf("%s = %q, lacks %q", file, b, l)
		}
	}
}

// copyDir copies the regular files under src to dst, but for dist/ (the
// test builds its own).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if rel == "dist" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// edit replaces the one occurrence of from in file with to.
func edit(t *testing.T, file, from, to string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), from) != 1 {
		t.Fatalf("%s has %d %q, want one", file, strings.Count(string(b), from), from)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), from, to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// short is a digest as intend dryrun prints it.
func short(digest string) string { return digest[:len("sha256:")+12] + "…" }
