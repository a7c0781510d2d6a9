package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/fetchhosts"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/internal/publish"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// Default bounds of the autonomous compile's steps.
const (
	DefaultGitTimeout     = 5 * time.Minute
	DefaultCompileTimeout = publish.DefaultCompileTimeout
	// heartbeatEvery is well inside the workflow's 20 s heartbeat timeout.
	heartbeatEvery = 5 * time.Second
	// maxGitOutput bounds the git output kept for an error message.
	maxGitOutput = 8 << 10
)

// Compiler holds the activities of autonomous compiles (task queue
// intend): fetch an environment's git branch into a cache under DataDir,
// compile a commit of it, export and release the version, record the
// outcome. Every activity is idempotent: it reads the compile's row first
// and does nothing twice that the row says is done.
type Compiler struct {
	Store *store.Store
	// DataDir holds a bare git repository per environment
	// (git/<environment id>.git), fetched into again by every compile, and
	// the trees being compiled (work/<environment id>/<compile>), removed
	// after each compile.
	DataDir string
	// Wake tells the environment's scheduler that a release queued a
	// deploy; nil: the scheduler finds the request when it polls.
	Wake func(ctx context.Context, env store.Environment, reason string) error
	// ModelChanged announces a model source a compile's release made the
	// service instances' model to them (lsm.Engine's); nil: the
	// server's reconciler does.
	ModelChanged func(ctx context.Context, env lsm.Env, hash string) error
	// GitTimeout bounds one git command, a fetch included (0:
	// DefaultGitTimeout): git and what it started are killed when it
	// passes, and a fetch that took too long fails the compile, naming
	// the limit. CompileTimeout bounds one compile (0:
	// DefaultCompileTimeout).
	GitTimeout     time.Duration
	CompileTimeout time.Duration
	// Runner runs the compiles (nil: compiler.InProcess); intend server's
	// bounds their time and memory in child processes.
	Runner compiler.Runner
	// MaxTreeBytes bounds the files of a commit the compile checks out,
	// added up (0: project.MaxArchiveBytes, what a model source may hold):
	// a larger tree fails the compile before anything is written.
	MaxTreeBytes int64
	// AllowLocalRepos lets the compiles fetch a repo_url that is a local
	// path or file:// URL (intend server --allow-local-repos); without it
	// such a compile fails, and git is not even allowed the file
	// transport.
	AllowLocalRepos bool
	// FetchHosts says which hosts a compile may fetch from (intend server
	// --compile-fetch-hosts): the host must be on it and every address
	// it resolves to public or listed, checked before each fetch. Nil:
	// any host whose addresses are all public. Resolver looks the hosts
	// up (nil: the system's resolver).
	FetchHosts *fetchhosts.Policy
	Resolver   fetchhosts.Resolver
	Log        *slog.Logger // nil: slog.Default()

	// locks serialises git work on one environment's cache in this
	// process (compiles of an environment run one at a time anyway; a
	// retried activity may overlap an attempt that has not noticed it was
	// abandoned).
	locks sync.Map // environment id → *sync.Mutex
}

// Register registers the activities under their explicit names.
func (c *Compiler) Register(w workflows.ActivityRegistry) {
	workflows.TakeCompileActivity.Register(w, c.TakeCompile)
	workflows.FetchCompileActivity.Register(w, c.FetchCompile)
	workflows.BuildCompileActivity.Register(w, c.BuildCompile)
	workflows.ReleaseCompileActivity.Register(w, c.ReleaseCompile)
	workflows.FinishCompileActivity.Register(w, c.FinishCompile)
}

func (c *Compiler) log() *slog.Logger { return orDefault(c.Log) }

// TakeCompile returns the environment's running compile, or starts its
// oldest queued one (queuing a schedule compile first when the
// recompile_interval is due).
func (c *Compiler) TakeCompile(ctx context.Context, in workflows.TakeCompileInput) (workflows.TakeCompileResult, error) {
	t, err := c.Store.TakeCompile(ctx, in.EnvironmentID)
	if errors.Is(err, store.ErrNotFound) {
		return workflows.TakeCompileResult{Gone: true}, nil
	}
	if err != nil {
		return workflows.TakeCompileResult{}, err
	}
	out := workflows.TakeCompileResult{NextScheduleSeconds: int(t.NextSchedule / time.Second)}
	if t.Compile != nil {
		out.ID, out.Reason, out.Branch = t.Compile.ID, t.Compile.Reason, t.Compile.Branch
	}
	return out, nil
}

// FetchCompile fetches the compile's branch and records the commit it
// points to. A fetch git refuses (unknown repository, unknown branch,
// no access) fails the compile with git's message and returns Failed.
func (c *Compiler) FetchCompile(ctx context.Context, in workflows.CompileInput) (workflows.FetchCompileResult, error) {
	comp, err := c.Store.GetCompile(ctx, in.EnvironmentID, in.ID)
	if err != nil {
		return workflows.FetchCompileResult{}, classify(err)
	}
	if comp.Status != store.CompileRunning {
		return workflows.FetchCompileResult{Failed: comp.Status != store.CompileSucceeded, Commit: comp.Commit}, nil
	}
	if comp.Commit != "" || comp.ModelHash != "" {
		// A compile of a model source (for facts, in push mode) fetches
		// nothing: the source is in PostgreSQL.
		return workflows.FetchCompileResult{Commit: comp.Commit}, nil
	}
	defer heartbeat(ctx)()
	commit, err := c.fetch(ctx, in.EnvironmentID, comp.RepoURL, comp.Branch)
	if err != nil {
		failed, err := c.outcome(ctx, in.EnvironmentID, in.ID, err)
		return workflows.FetchCompileResult{Failed: failed}, err
	}
	if err := c.Store.RecordCompileCommit(ctx, in.EnvironmentID, in.ID, commit); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return workflows.FetchCompileResult{Failed: true}, nil // finished meanwhile
		}
		return workflows.FetchCompileResult{}, classify(err)
	}
	return workflows.FetchCompileResult{Commit: commit}, nil
}

// BuildCompile compiles the commit with the environment's facts and
// exports the version (or finds it identical to the newest version), in
// one transaction with the compile's record. A model that does not
// compile fails the compile with every error, structured, and returns
// Failed.
func (c *Compiler) BuildCompile(ctx context.Context, in workflows.BuildCompileInput) (workflows.BuildCompileResult, error) {
	comp, err := c.Store.GetCompile(ctx, in.EnvironmentID, in.ID)
	if err != nil {
		return workflows.BuildCompileResult{}, classify(err)
	}
	if comp.Version != nil {
		return buildResult(comp), nil
	}
	if comp.Status != store.CompileRunning {
		return workflows.BuildCompileResult{Failed: true}, nil
	}
	env, err := c.Store.GetEnvironment(ctx, in.EnvironmentID)
	if err != nil {
		return workflows.BuildCompileResult{}, classify(err)
	}
	defer heartbeat(ctx)()

	work, err := c.workDir(in.EnvironmentID, in.ID)
	if err != nil {
		return workflows.BuildCompileResult{}, err
	}
	defer os.RemoveAll(work)
	tree := filepath.Join(work, "tree")
	fail := func(err error) (workflows.BuildCompileResult, error) {
		failed, err := c.outcome(ctx, in.EnvironmentID, in.ID, err)
		return workflows.BuildCompileResult{Failed: failed}, err
	}
	if comp.ModelHash != "" {
		return c.buildModelSource(ctx, env, comp, tree, fail)
	}
	if err := c.checkout(ctx, in.EnvironmentID, comp, in.Commit, work, tree); err != nil {
		return fail(err)
	}
	if err := project.CheckTree(tree); err != nil {
		return fail(&failure{msg: err.Error(), errs: store.CompileMessage(err.Error())})
	}

	facts, err := envFacts(ctx, c.Store, in.EnvironmentID)
	if err != nil {
		return workflows.BuildCompileResult{}, err
	}
	opts := compiler.Options{Dir: tree, Facts: facts}
	res, err := c.compile(ctx, env, opts)
	if err != nil {
		return fail(err)
	}
	v, err := intent.DecodeBytes(res.Export())
	if err != nil {
		return fail(exportErrors(err, res))
	}
	// The checkout becomes the model source service instances compile
	// from (the same archive again changes nothing).
	packed, err := project.Archive(tree)
	if err != nil {
		return fail(err)
	}
	// Its service entities become the catalog in the same transaction,
	// unless that would break live instances: then neither changes and
	// the compile fails, naming them.
	src, err := publish.Model(ctx, c.Store, in.EnvironmentID,
		publish.Source{Hash: packed.Hash, Archive: packed.Archive, Files: packed.Files, Origin: "compile"}, res)
	if err != nil {
		if be, ok := errors.AsType[*store.BreakingChangesError](err); ok {
			return fail(&failure{msg: be.Error(), errs: store.CompileMessage(be.Error())})
		}
		return workflows.BuildCompileResult{}, classify(err)
	}
	// The source becomes the live instances' model when the version
	// built from it is released (ReleaseCompile), not now.
	comp, err = c.Store.ExportCompile(ctx, in.EnvironmentID, in.ID, v, src.Hash)
	if errors.Is(err, store.ErrConflict) {
		return workflows.BuildCompileResult{Failed: true}, nil // finished meanwhile
	}
	if err != nil {
		return workflows.BuildCompileResult{}, classify(err)
	}
	if comp.Exported != nil && *comp.Exported {
		if n, err := c.Store.PruneVersions(ctx, in.EnvironmentID, env.Settings.KeepVersions); err != nil {
			c.log().Warn("pruning old versions failed", "environment", env.Name, "error", err)
		} else if n > 0 {
			c.log().Info("pruned old versions", "environment", env.Name, "deleted", n)
		}
	}
	c.log().Info("compiled", "environment", env.Name, "compile", in.ID, "commit", in.Commit,
		"version", *comp.Version, "exported", *comp.Exported, "resources", len(res.Resources), "took", res.Took)
	return buildResult(comp), nil
}

// buildModelSource is BuildCompile of a compile for facts in push mode:
// it compiles the stored model source comp.ModelHash (the released
// version's) in tree with the environment's facts and exports the
// version, which records the same source. The catalog is left alone:
// facts do not change it.
func (c *Compiler) buildModelSource(ctx context.Context, env store.Environment, comp store.Compile, tree string,
	fail func(error) (workflows.BuildCompileResult, error)) (workflows.BuildCompileResult, error) {
	archive, err := c.Store.ModelArchive(ctx, env.ID, comp.ModelHash)
	if errors.Is(err, store.ErrNotFound) {
		return fail(&failure{msg: "model source " + comp.ModelHash + " is no longer stored",
			errs: store.CompileMessage("model source " + comp.ModelHash + " is no longer stored")})
	}
	if err != nil {
		return workflows.BuildCompileResult{}, classify(err)
	}
	if err := project.Extract(archive, tree); err != nil {
		return fail(&failure{msg: err.Error(), errs: store.CompileMessage(err.Error())})
	}
	facts, err := envFacts(ctx, c.Store, env.ID)
	if err != nil {
		return workflows.BuildCompileResult{}, err
	}
	res, err := c.compile(ctx, env, compiler.Options{Dir: tree, Facts: facts, SourceKey: comp.ModelHash})
	if err != nil {
		return fail(err)
	}
	v, err := intent.DecodeBytes(res.Export())
	if err != nil {
		return fail(exportErrors(err, res))
	}
	comp, err = c.Store.ExportCompile(ctx, env.ID, comp.ID, v, comp.ModelHash)
	if errors.Is(err, store.ErrConflict) {
		return workflows.BuildCompileResult{Failed: true}, nil // finished meanwhile
	}
	if err != nil {
		return workflows.BuildCompileResult{}, classify(err)
	}
	c.log().Info("compiled the model source for facts", "environment", env.Name, "compile", comp.ID,
		"model", comp.ModelHash, "version", *comp.Version, "exported", *comp.Exported, "undefined", res.Undefined)
	return buildResult(comp), nil
}

func buildResult(c store.Compile) workflows.BuildCompileResult {
	out := workflows.BuildCompileResult{Version: *c.Version}
	if c.Exported != nil {
		out.Exported = *c.Exported
	}
	if c.ResourceCount != nil {
		out.ResourceCount = *c.ResourceCount
	}
	return out
}

// ReleaseCompile releases the compile's version, as POST .../release
// does: with auto_deploy on, the release queues a deploy and the
// scheduler is woken. A newer version released meanwhile is not an error:
// the compile's version is simply not released.
//
// A halted environment releases nothing: the version is held
// (store.ReleaseUnlessHalted) and resuming releases it. The model source a
// release makes the service instances' is announced to them after the
// commit (the server's reconciler announces it if this fails).
func (c *Compiler) ReleaseCompile(ctx context.Context, in workflows.ReleaseCompileInput) (workflows.ReleaseCompileResult, error) {
	env, err := c.Store.GetEnvironment(ctx, in.EnvironmentID)
	if err != nil {
		return workflows.ReleaseCompileResult{}, classify(err)
	}
	rel, held, err := c.Store.ReleaseUnlessHalted(ctx, in.EnvironmentID, in.Version)
	if errors.Is(err, store.ErrConflict) {
		return workflows.ReleaseCompileResult{}, nil
	}
	if err != nil {
		return workflows.ReleaseCompileResult{}, classify(err)
	}
	if held {
		c.log().Info("environment halted: the compile's version is held until it is resumed",
			"environment", env.Name, "compile", in.ID, "version", in.Version)
		return workflows.ReleaseCompileResult{}, nil
	}
	out := workflows.ReleaseCompileResult{Released: true}
	if rel.Model != "" && c.ModelChanged != nil {
		if err := c.ModelChanged(ctx, env.LSM(), rel.Model); err != nil {
			c.log().Warn("model source not announced to the service instances yet; the reconciler retries",
				"environment", env.Name, "model", rel.Model, "error", err)
		}
	}
	if rel.Request != nil {
		out.DeployRequest = rel.Request.ID
		if c.Wake != nil {
			if err := c.Wake(ctx, env, rel.Request.Reason); err != nil {
				// The request is queued; the scheduler's poll finds it.
				c.log().Warn("scheduler not woken after a compile's release", "compile", in.ID, "error", err)
			}
		}
	}
	return out, nil
}

// FinishCompile ends a compile (idempotent: a finished one stays as it is).
func (c *Compiler) FinishCompile(ctx context.Context, in workflows.FinishCompileInput) error {
	var errs json.RawMessage
	if in.Message != "" {
		errs = store.CompileMessage(in.Message)
	}
	_, err := c.Store.FinishCompile(ctx, in.EnvironmentID, in.ID, in.Status, errs, in.Released)
	return classify(err)
}

// failure is a compile that failed for a reason of its own (git refused,
// the model has errors): an outcome to record, not an activity error.
type failure struct {
	errs json.RawMessage
	msg  string
}

func (f *failure) Error() string { return f.msg }

// outcome records err as the compile's failure when it is one (git
// refused, the model has errors) and reports so; any other error is the
// activity's own, returned for Temporal to retry.
func (c *Compiler) outcome(ctx context.Context, envID string, id int64, err error) (failed bool, _ error) {
	var f *failure
	if !errors.As(err, &f) {
		return false, err
	}
	if _, err := c.Store.FinishCompile(ctx, envID, id, store.CompileFailed, f.errs, nil); err != nil {
		return false, classify(err)
	}
	return true, nil
}

// heartbeat heartbeats every few seconds (heartbeatEvery, or a third of
// the activity's heartbeat timeout when that is shorter) until the
// returned function is called; outside an activity (tests) it does
// nothing. With a short heartbeat timeout Temporal tells a worker that
// died holding the activity from one that is slow (a lock wait), and
// retries the first within seconds instead of at its start-to-close
// timeout (the orchestration activities, workflows.OrchestrationHeartbeat).
func heartbeat(ctx context.Context) func() {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	every := heartbeatEvery
	if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 && hb/3 < every {
		every = hb / 3
	}
	activity.RecordHeartbeat(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// lock takes the lock of an environment's git cache.
func (c *Compiler) lock(envID string) func() {
	m, _ := c.locks.LoadOrStore(envID, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

func (c *Compiler) repoDir(envID string) string {
	return filepath.Join(c.DataDir, "git", envID+".git")
}

// workDir makes an empty directory for one compile's tree, removing what
// earlier compiles of the environment left behind (a killed server's):
// compiles of one environment run one at a time and in order.
func (c *Compiler) workDir(envID string, id int64) (string, error) {
	if c.DataDir == "" {
		return "", errors.New("the server has no data directory for compiles")
	}
	parent := filepath.Join(c.DataDir, "work", envID)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("compile work directory: %w", err)
	}
	old, err := os.ReadDir(parent)
	if err != nil {
		return "", fmt.Errorf("compile work directory: %w", err)
	}
	for _, e := range old {
		if n, err := strconv.ParseInt(e.Name(), 10, 64); err == nil && n <= id {
			if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
				return "", fmt.Errorf("remove an old compile's tree: %w", err)
			}
		}
	}
	dir := filepath.Join(parent, strconv.FormatInt(id, 10))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("compile work directory: %w", err)
	}
	return dir, nil
}

// fetch fetches branch of url into the environment's cache and returns
// the commit it points to.
func (c *Compiler) fetch(ctx context.Context, envID, url, branch string) (string, error) {
	defer c.lock(envID)()
	return c.fetchLocked(ctx, envID, url, branch)
}

func (c *Compiler) fetchLocked(ctx context.Context, envID, url, branch string) (string, error) {
	if c.DataDir == "" {
		return "", errors.New("the server has no data directory for compiles")
	}
	if err := c.checkRepoURL(url); err != nil {
		return "", err
	}
	guard, err := c.fetchGuard(ctx, url)
	if err != nil {
		return "", err
	}
	repo := c.repoDir(envID)
	if _, err := os.Stat(filepath.Join(repo, "HEAD")); err != nil {
		if err := os.MkdirAll(filepath.Dir(repo), 0o700); err != nil {
			return "", fmt.Errorf("git cache: %w", err)
		}
		// A half-made cache (killed during init) is made again.
		if err := os.RemoveAll(repo); err != nil {
			return "", fmt.Errorf("git cache: %w", err)
		}
		if _, err := c.git(ctx, nil, "init", "--quiet", "--bare", repo); err != nil {
			return "", fmt.Errorf("git cache: %w", err)
		}
	}
	ref := "refs/heads/" + branch
	// The url goes in whole on every fetch (no remote is configured), so
	// a changed repo_url takes effect at the next compile. Only the
	// branch's tip is fetched (--depth 1): the compile needs no history,
	// and the cache does not grow with it.
	if _, err := c.git(ctx, nil, append(guard, "--git-dir", repo, "fetch", "--quiet", "--no-tags", "--force", "--depth", "1", "--",
		url, "+"+ref+":"+ref)...); err != nil {
		return "", gitFailure(fmt.Sprintf("fetch branch %s of %s", branch, redactURL(url)), err)
	}
	out, err := c.git(ctx, nil, "--git-dir", repo, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		return "", gitFailure(fmt.Sprintf("branch %s of %s", branch, redactURL(url)), err)
	}
	return strings.TrimSpace(out), nil
}

// checkRepoURL refuses to fetch a repo_url stored before the server's
// rules or flags changed: a local path or file:// URL without
// AllowLocalRepos, a transport other than https, ssh and git. A password
// in the URL, which the API now refuses, is still fetched: it only never
// shows (redactURL).
func (c *Compiler) checkRepoURL(url string) error {
	err := store.CheckRepoURL(url, c.AllowLocalRepos)
	if err == nil || errors.Is(err, store.ErrRepoCredentials) {
		return nil
	}
	msg := fmt.Sprintf("repo_url %s is not fetched: %v", redactURL(url), err)
	return &failure{msg: msg, errs: store.CompileMessage(msg)}
}

// fetchGuard checks the host a repo_url fetches from against FetchHosts
// (its name, and every address it resolves to now) and returns git's
// options for the fetch: over https, curl connects only to the addresses
// checked (http.curloptResolve: DNS cannot answer git differently a
// moment later), and no redirect is followed (it could lead anywhere).
// A local repo_url has no host: AllowLocalRepos rules it. A refusal fails
// the compile, naming the host and the flag; git is not run.
func (c *Compiler) fetchGuard(ctx context.Context, url string) ([]string, error) {
	scheme, host, port, ok := fetchhosts.Target(url)
	if !ok {
		return nil, nil
	}
	addrs, err := c.FetchHosts.Resolve(ctx, c.Resolver, host)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		msg := fmt.Sprintf("repo_url %s is not fetched: %v", redactURL(url), err)
		return nil, &failure{msg: msg, errs: store.CompileMessage(msg)}
	}
	guard := []string{"-c", "http.followRedirects=false"}
	if _, err := netip.ParseAddr(host); scheme == "https" && err != nil {
		pinned := make([]string, len(addrs))
		for i, a := range addrs {
			pinned[i] = a.String()
			if a.Is6() {
				pinned[i] = "[" + pinned[i] + "]"
			}
		}
		guard = append(guard, "-c", "http.curloptResolve="+host+":"+port+":"+strings.Join(pinned, ","))
	}
	return guard, nil
}

// redactURL hides the password of a URL in a repo_url or in git's
// messages (store.RedactURL): what a compile records and logs never
// holds one.
func redactURL(s string) string { return store.RedactURL(s) }

var shaPattern = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// checkout writes the tree of commit into tree (a fresh directory below
// work), fetching again first when the cache lacks the commit (it was
// fetched by another server).
func (c *Compiler) checkout(ctx context.Context, envID string, comp store.Compile, commit, work, tree string) error {
	if !shaPattern.MatchString(commit) {
		return fmt.Errorf("commit %q is not a full sha", commit)
	}
	defer c.lock(envID)()
	repo := c.repoDir(envID)
	has := func() bool {
		_, err := c.git(ctx, nil, "--git-dir", repo, "cat-file", "-e", commit+"^{commit}")
		return err == nil
	}
	if !has() {
		if _, err := c.fetchLocked(ctx, envID, comp.RepoURL, comp.Branch); err != nil {
			return err
		}
		if !has() {
			// The branch moved on since the commit was fetched (by
			// another server), and a fetch brings only its tip: ask for
			// the commit itself, which servers that allow it send.
			guard, err := c.fetchGuard(ctx, comp.RepoURL)
			if err != nil {
				return err
			}
			if _, err := c.git(ctx, nil, append(guard, "--git-dir", repo, "fetch", "--quiet", "--no-tags", "--depth", "1", "--",
				comp.RepoURL, commit)...); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if !has() {
			return &failure{msg: "commit is gone", errs: store.CompileMessage(fmt.Sprintf(
				"commit %s is no longer on branch %s of %s (force-pushed?)", commit, comp.Branch, redactURL(comp.RepoURL)))}
		}
	}
	if err := c.checkTreeSize(ctx, repo, commit); err != nil {
		return err
	}
	// A private index: the cache is bare and may serve several compiles.
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(work, "index")}
	if _, err := c.git(ctx, env, "--git-dir", repo, "read-tree", commit); err != nil {
		return fmt.Errorf("read the tree of %s: %w", commit, err)
	}
	if err := os.Mkdir(tree, 0o700); err != nil {
		return fmt.Errorf("check out %s: %w", commit, err)
	}
	if _, err := c.git(ctx, env, "--git-dir", repo, "--work-tree", tree, "checkout-index", "--all", "--force"); err != nil {
		return fmt.Errorf("check out %s: %w", commit, err)
	}
	return nil
}

// maxTreeFiles bounds the files (and links) of a commit the compile
// checks out: a model is far smaller, and a checkout must not fill the
// disk with empty files.
const maxTreeFiles = 100_000

// checkTreeSize refuses a commit whose files, added up, exceed
// MaxTreeBytes, or that has more than maxTreeFiles of them, before
// anything is checked out: git lists the tree with each blob's size, read
// as it comes, and stopped at the first entry over a bound.
func (c *Compiler) checkTreeSize(ctx context.Context, repo, commit string) error {
	limit := c.MaxTreeBytes
	if limit <= 0 {
		limit = project.MaxArchiveBytes
	}
	sz := &treeSizer{limit: limit}
	err := c.gitTo(ctx, nil, sz, "--git-dir", repo, "ls-tree", "-r", "-l", "-z", "--full-tree", commit)
	switch {
	case sz.over != "":
		msg := fmt.Sprintf("commit %s is too large to compile: %s", commit, sz.over)
		return &failure{msg: msg, errs: store.CompileMessage(msg)}
	case err != nil:
		return fmt.Errorf("list the tree of %s: %w", commit, err)
	}
	return nil
}

// errTreeTooLarge stops git's listing once a tree is over a bound.
var errTreeTooLarge = errors.New("the tree is too large")

// treeSizer adds up the blob sizes of `git ls-tree -r -l -z`'s entries
// ("<mode> <type> <object> <size>\t<path>\0", size "-" for a submodule)
// as they are written, and fails the write once over a bound.
type treeSizer struct {
	limit   int64
	total   int64
	files   int
	partial []byte
	over    string // which bound, once over one
}

func (t *treeSizer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, 0)
		if i < 0 {
			if t.partial = append(t.partial, p...); len(t.partial) > 1<<16 {
				t.over = "it has a path longer than 64 KiB"
				return 0, errTreeTooLarge
			}
			break
		}
		entry := p[:i]
		if len(t.partial) > 0 {
			entry = append(t.partial, entry...)
			t.partial = nil
		}
		p = p[i+1:]
		t.add(entry)
		if t.over != "" {
			return 0, errTreeTooLarge
		}
	}
	return n, nil
}

func (t *treeSizer) add(entry []byte) {
	meta, _, _ := bytes.Cut(entry, []byte{'\t'})
	f := strings.Fields(string(meta))
	if len(f) != 4 || f[1] != "blob" {
		return // a submodule's commit: not checked out
	}
	size, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil || size < 0 {
		return
	}
	t.total += size
	t.files++
	switch {
	case t.total > t.limit:
		t.over = fmt.Sprintf("its files add up to more than %s (the server's limit)", byteSize(t.limit))
	case t.files > maxTreeFiles:
		t.over = fmt.Sprintf("it has more than %d files (the server's limit)", maxTreeFiles)
	}
}

// byteSize writes n bytes in MiB when it is a whole number of them.
func byteSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// gitError is a git command that failed: its arguments and the tail of
// its standard error; limit is the time limit it was stopped at, if it
// was.
type gitError struct {
	args   []string
	stderr string
	err    error
	limit  time.Duration
}

// Error is git's message, or the command; a password in a URL in either
// is redacted (the message goes to the compile's record and to logs).
func (e *gitError) Error() string {
	if e.stderr != "" {
		return redactURL(e.stderr)
	}
	return redactURL(fmt.Sprintf("git %s: %v", strings.Join(e.args, " "), e.err))
}

func (e *gitError) Unwrap() error { return e.err }

// gitFailure makes a git error a failure of the compile, with git's own
// message, unless the activity itself was cancelled.
func gitFailure(what string, err error) error {
	var ge *gitError
	if !errors.As(err, &ge) || errors.Is(err, context.Canceled) {
		return err
	}
	msg := what + ": " + ge.Error()
	switch {
	case ge.limit > 0:
		msg = fmt.Sprintf("%s: git took longer than %s (the server's git time limit) and was stopped", what, ge.limit)
	case errors.Is(err, context.DeadlineExceeded):
		msg = what + ": git took too long and was stopped"
	}
	return &failure{msg: msg, errs: store.CompileMessage(msg)}
}

// git runs git with extra environment variables and returns its standard
// output. It never prompts (no terminal, ssh in batch mode), runs no
// hooks, and speaks only the transports of CheckRepoURL: https, ssh, git,
// and file only with AllowLocalRepos (never ext, a command line in a
// URL, nor any other remote helper).
func (c *Compiler) git(ctx context.Context, env []string, args ...string) (string, error) {
	var stdout bytes.Buffer
	if err := c.gitTo(ctx, env, &stdout, args...); err != nil {
		return "", err
	}
	return stdout.String(), nil
}

// gitTo is git writing its standard output to stdout. Git runs in a
// process group of its own, killed whole when GitTimeout passes (a
// transport helper or ssh does not go on downloading).
func (c *Compiler) gitTo(ctx context.Context, env []string, stdout io.Writer, args ...string) error {
	timeout := c.GitTimeout
	if timeout <= 0 {
		timeout = DefaultGitTimeout
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	file := "never"
	if c.AllowLocalRepos {
		file = "always"
	}
	full := append([]string{"-c", "protocol.allow=never", "-c", "protocol.https.allow=always",
		"-c", "protocol.ssh.allow=always", "-c", "protocol.git.allow=always", "-c", "protocol.file.allow=" + file,
		"-c", "protocol.ext.allow=never", "-c", "core.hooksPath=" + os.DevNull}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	if os.Getenv("GIT_SSH_COMMAND") == "" {
		cmd.Env = append(cmd.Env, "GIT_SSH_COMMAND=ssh -o BatchMode=yes")
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		return nil
	}
	cmd.WaitDelay = 5 * time.Second
	stderr := &childproc.Tail{Max: maxGitOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		ge := &gitError{args: args, stderr: strings.TrimSpace(stderr.String()), err: err}
		if ctx.Err() != nil {
			ge.err = ctx.Err()
			if parent.Err() == nil {
				ge.limit = timeout
			}
		}
		return ge
	}
	return nil
}

// compile runs the compiler through the Runner, within the time limit and
// env's CPU time limit; a failed compile, or one stopped at a limit, is a
// failure with structured errors.
func (c *Compiler) compile(ctx context.Context, env store.Environment, opts compiler.Options) (*compiler.Result, error) {
	res, err := publish.Compile(ctx, c.Runner, env, opts, c.CompileTimeout)
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the activity was cancelled: not the model's fault
	}
	return nil, compileErrors(err, opts.Dir)
}

// orDefaultTimeout is limit, or DefaultCompileTimeout when it is not set.
func orDefaultTimeout(limit time.Duration) time.Duration {
	if limit <= 0 {
		return DefaultCompileTimeout
	}
	return limit
}

// envFacts returns the environment's facts as the compiler takes them.
func envFacts(ctx context.Context, st *store.Store, envID string) (map[string]map[string]json.RawMessage, error) {
	facts, err := st.ListFacts(ctx, envID, "")
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]json.RawMessage{}
	for _, f := range facts {
		if out[f.ResourceID] == nil {
			out[f.ResourceID] = map[string]json.RawMessage{}
		}
		out[f.ResourceID][f.Name] = f.Value
	}
	return out, nil
}

// compileErrors makes a failed compile's error a failure with structured
// errors. File names are relative to the project.
func compileErrors(err error, dir string) error {
	var errs compiler.Errors
	var pe *project.Error
	switch {
	case errors.As(err, &errs):
	case errors.As(err, &pe):
		e := &compiler.Error{Message: relative(pe.Msg, dir)}
		if pe.Key != "" {
			e.Message = pe.Key + ": " + e.Message
		}
		if rel, rerr := filepath.Rel(dir, pe.File); rerr == nil && !strings.HasPrefix(rel, "..") {
			e.Positions = []compiler.Position{{File: filepath.ToSlash(rel)}}
		}
		errs = compiler.Errors{e}
	case errors.As(err, new(*compiler.LimitError)):
		errs = compiler.Errors{{Message: err.Error()}}
	default:
		errs = compiler.Errors{{Message: relative(err.Error(), dir)}}
	}
	b, merr := json.Marshal(errs)
	if merr != nil {
		return merr
	}
	return &failure{msg: errs.Error(), errs: b}
}

// relative rewrites the paths below dir (the checked-out project) in msg
// as relative ones: the server's directories are none of the model's
// business.
func relative(msg, dir string) string {
	msg = strings.ReplaceAll(msg, dir+string(filepath.Separator), "")
	return strings.ReplaceAll(msg, dir, ".")
}

// exportErrors makes a version the compiler produced but the export
// refuses (a requires cycle, for one) a failure, each problem naming the
// resource by id rather than by its index in the export.
func exportErrors(err error, res *compiler.Result) error {
	var ve *intent.ValidationError
	if !errors.As(err, &ve) {
		return &failure{msg: err.Error(), errs: store.CompileMessage("the compiled version is invalid: " + err.Error())}
	}
	errs := make(compiler.Errors, 0, len(ve.Problems))
	for _, p := range ve.Problems {
		e := &compiler.Error{Message: p.Detail}
		// /resources/<i>/… names the i-th resource of the export.
		var i int
		var rest string
		if n, _ := fmt.Sscanf(p.Path, "/resources/%d%s", &i, &rest); n >= 1 && i >= 0 && i < len(res.Resources) {
			e.Path = res.Resources[i].Origin
			e.Message = res.Resources[i].ID + ": " + p.Detail
		}
		errs = append(errs, e)
	}
	if ve.Omitted > 0 {
		errs = append(errs, &compiler.Error{Message: fmt.Sprintf("and %d more problems", ve.Omitted)})
	}
	b, merr := json.Marshal(errs)
	if merr != nil {
		return merr
	}
	return &failure{msg: errs.Error(), errs: b}
}
