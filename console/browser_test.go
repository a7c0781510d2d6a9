package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }

// browser starts a headless Chromium (Debian's, which make tools
// installs) and returns a context to drive it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: run make tools (it installs Debian's chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs the actions within 30 s; on failure it reports the page's URL
// and text, to say where the walk stopped.
func run(t *testing.T, ctx context.Context, actions ...chromedp.Action) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(sctx, actions...); err != nil {
		var url, text string
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = chromedp.Run(dctx, chromedp.Location(&url), chromedp.Text(`body`, &text, chromedp.ByQuery))
		t.Fatalf("%v\nat %s:\n%s", err, url, text)
	}
}

// navigate is chromedp.Navigate, tried again when Chrome reports the
// navigation aborted (net::ERR_ABORTED): right after a form's redirect
// lands, Chrome sometimes aborts the next navigation it is asked for,
// which says nothing about the page.
func navigate(url string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		for range 3 {
			if err = chromedp.Navigate(url).Do(ctx); err == nil || !strings.Contains(err.Error(), "ERR_ABORTED") {
				return err
			}
			time.Sleep(200 * time.Millisecond)
		}
		return err
	})
}

// signIn signs the browser out (when it is in) and in again with token,
// and waits for the environments page to list env.
func signIn(base, token, env string) chromedp.Tasks {
	return chromedp.Tasks{
		chromedp.Navigate(base + "login"),
		chromedp.WaitVisible(`#token`, chromedp.ByID),
		chromedp.SetValue(`#token`, token, chromedp.ByID),
		chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(`//a[text()="`+env+`"]`, chromedp.BySearch),
	}
}

// signOut presses Sign out.
func signOut(base string) chromedp.Tasks {
	return chromedp.Tasks{
		chromedp.Navigate(base),
		chromedp.Click(`//button[text()="Sign out"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#token`, chromedp.ByID),
	}
}

// readToken makes a token with role read in env and returns its secret.
func readToken(t *testing.T, c *client.Client, name, env string) string {
	t.Helper()
	tok, err := c.CreateToken(context.Background(), client.NewToken{Name: name, Role: "read", Environments: []string{env}})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Secret
}

// a11yCheck is a page's own check of what a screen reader and a keyboard
// need: a language, one h1, a label for every field, a name for every
// button and link, and a main landmark. It returns the problems found.
const a11yCheck = `(() => {
  const out = [];
  if (!document.documentElement.lang) out.push("no lang on html");
  if (document.querySelectorAll("h1").length !== 1) out.push("not one h1");
  if (!document.querySelector("main")) out.push("no main");
  for (const el of document.querySelectorAll("input, select, textarea")) {
    if (el.type === "hidden") continue;
    const labelled = (el.id && document.querySelector('label[for="' + el.id + '"]')) || el.closest("label") ||
      el.getAttribute("aria-label") || el.getAttribute("aria-labelledby");
    if (!labelled) out.push("unlabelled " + el.tagName + " " + (el.name || el.id));
  }
  for (const el of document.querySelectorAll("button, a[href]")) {
    if (!(el.textContent.trim() || el.getAttribute("aria-label"))) out.push("nameless " + el.tagName + " " + el.outerHTML.slice(0, 80));
  }
  return out;
})()`

// accessible checks the page in the browser (a11yCheck), and that at a
// phone's width (390 px) nothing but a table's own scroller overflows.
func accessible(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	var problems []string
	var overflow bool
	run(t, ctx,
		chromedp.Evaluate(a11yCheck, &problems),
		chromedp.EmulateViewport(390, 844),
		chromedp.Evaluate(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow),
		chromedp.EmulateViewport(1280, 900),
	)
	if len(problems) > 0 {
		t.Errorf("%s: %v", page, problems)
	}
	if overflow {
		t.Errorf("%s: the page is wider than a 390 px screen", page)
	}
}

// shot saves a screenshot of the page as name.png in the test's artifact
// directory (go test -artifacts keeps them; docs/console.md shows them).
func shot(t *testing.T, _ context.Context, name string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var png []byte
		if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(t.ArtifactDir(), name+".png"), png, 0o644)
	})
}

// TestConsoleInABrowser signs in with a token, walks the environments, an
// environment, its resources and one resource against a real server
// (PostgreSQL, Temporal, the embedded executor), presses Deploy, and
// checks that a read token sees no button it may not press and that a
// bad token is refused with a readable message.
func TestConsoleInABrowser(t *testing.T) {
	c, s, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second, TemporalUI: "http://temporal-ui.test:8233/"})
	env := servertest.NewEnvironment(t, c, "console", nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "motd")
	rid := "fs::File[localhost,path=" + file + "]"
	body, _ := json.Marshal(map[string]any{"resources": []any{map[string]any{"id": rid,
		"attributes": map[string]any{"path": file, "content": "hello\n", "mode": "0644"}}}})
	req := servertest.Release(t, c, env, body)
	if _, err := c.WaitRequest(context.Background(), env, req, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	reader := readToken(t, c, "console-reader", env)

	ctx := browser(t)
	base := s.URL() + "/console/"
	var text, errText string
	// A bad token: refused, and said so.
	run(t, ctx,
		chromedp.Navigate(base),
		chromedp.WaitVisible(`#token`, chromedp.ByID),
		shot(t, ctx, "login"),
		chromedp.SendKeys(`#token`, "intend_not-a-token", chromedp.ByID),
		chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(`p.error`, chromedp.ByQuery),
		chromedp.Text(`p.error`, &errText, chromedp.ByQuery),
	)
	accessible(t, ctx, "sign-in")
	if !strings.Contains(errText, "not valid") {
		t.Errorf("a bad token's message = %q", errText)
	}

	// The admin: environments, the environment with its buttons, Deploy.
	run(t, ctx,
		chromedp.SetValue(`#token`, c.Token, chromedp.ByID),
		chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(`//a[text()="`+env+`"]`, chromedp.BySearch),
		shot(t, ctx, "environments"),
		chromedp.Click(`//main//a[text()="`+env+`"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//h2[text()="Recent runs"]`, chromedp.BySearch),
		shot(t, ctx, "environment"),
		chromedp.Click(`//button[text()="Deploy"]`, chromedp.BySearch),
		// The request's page, then its run's (or "nothing to do"), ended.
		chromedp.WaitVisible(`//p[@data-live="done"]`, chromedp.BySearch),
		chromedp.Text(`main`, &text, chromedp.ByQuery),
	)
	accessible(t, ctx, "the deploy's run")
	if !strings.Contains(text, "user deploy") && !strings.Contains(text, "nothing to do") {
		t.Errorf("after Deploy the page says %q", text)
	}

	// Repair: the request's page follows it to its run, which ends.
	var repaired string
	run(t, ctx,
		chromedp.Navigate(base+"env/"+env),
		chromedp.Click(`//button[text()="Repair"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//p[@data-live="done"]`, chromedp.BySearch),
		chromedp.Location(&repaired),
	)
	if !strings.Contains(repaired, "/runs/") {
		t.Errorf("after Repair the browser is at %s, want the run's page", repaired)
	}

	// Halt asks first, on a page of its own (no script needed); then the
	// environment's page offers Resume.
	run(t, ctx,
		chromedp.Navigate(base+"env/"+env),
		chromedp.Click(`//button[text()="Halt…"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//h1[text()="Halt environment `+env+`?"]`, chromedp.BySearch),
		shot(t, ctx, "halt-confirm"),
	)
	accessible(t, ctx, "the halt's confirmation")
	run(t, ctx,
		chromedp.Click(`//section[contains(@class, "confirm")]//button`, chromedp.BySearch),
		chromedp.WaitVisible(`//p[@class="flash" and contains(text(), "halted")]`, chromedp.BySearch),
		chromedp.Click(`//button[text()="Resume"]`, chromedp.BySearch),
		// The halt's own flash says "until it is resumed": wait for the
		// resume's, or the next navigation cancels the resume in flight.
		chromedp.WaitVisible(`//p[@class="flash" and contains(text(), "resumed: deploys go on")]`, chromedp.BySearch),
	)
	if e, err := c.Environment(context.Background(), env); err != nil || e.Halted {
		t.Fatalf("after Resume the environment is %+v (%v), want it not halted", e, err)
	}

	// An admin edits the settings: a refused value is shown next to its
	// field, as typed; a good one is saved.
	var fieldErr, typed string
	run(t, ctx,
		navigate(base+"env/"+env),
		chromedp.SetValue(`#s-deploy_interval`, "-1", chromedp.ByID),
		chromedp.Click(`//button[text()="Save settings"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#s-deploy_interval-error`, chromedp.ByID),
		chromedp.Text(`#s-deploy_interval-error`, &fieldErr, chromedp.ByID),
		chromedp.Value(`#s-deploy_interval`, &typed, chromedp.ByID),
		shot(t, ctx, "settings-error"),
		chromedp.SetValue(`#s-deploy_interval`, "900", chromedp.ByID),
		chromedp.Click(`//button[text()="Save settings"]`, chromedp.BySearch),
		chromedp.WaitVisible(`p.flash`, chromedp.ByQuery),
		chromedp.Text(`p.flash`, &text, chromedp.ByQuery),
	)
	if !strings.Contains(fieldErr, "from 0") || typed != "-1" || !strings.Contains(text, "Settings saved: deploy_interval") {
		t.Errorf("settings: error %q with %q kept, then %q", fieldErr, typed, text)
	}
	if e, err := c.Environment(context.Background(), env); err != nil || e.Settings.DeployInterval != 900 {
		t.Errorf("deploy_interval after the save = %+v %v", e.Settings, err)
	}

	// Resources, filtered; one resource with its action log and facts.
	run(t, ctx,
		chromedp.Navigate(base+"env/"+env+"/resources?result=deployed"),
		chromedp.WaitVisible(`//a[text()="`+rid+`"]`, chromedp.BySearch),
		shot(t, ctx, "resources"),
		chromedp.Click(`//a[text()="`+rid+`"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//h2[text()="Action log"]`, chromedp.BySearch),
		chromedp.Text(`main`, &text, chromedp.ByQuery),
		shot(t, ctx, "resource"),
	)
	accessible(t, ctx, "resource")
	if !strings.Contains(text, "deployed") || !strings.Contains(text, "new version") || !strings.Contains(text, "size") ||
		!strings.Contains(text, "log lines") {
		t.Errorf("the resource page lacks its result, action log or facts:\n%s", text)
	}
	run(t, ctx, chromedp.Navigate(base+"env/"+env+"/resources?result=failed"),
		chromedp.WaitVisible(`main`, chromedp.ByQuery), chromedp.Text(`main`, &text, chromedp.ByQuery))
	if !strings.Contains(text, "No resource matches") {
		t.Errorf("filtered on failed, the table is not empty:\n%s", text)
	}
	// A column's heading sorts the table by it (on the server, with the
	// filters kept).
	var sorted, sortedBy string
	var hasSort bool
	run(t, ctx,
		chromedp.Navigate(base+"env/"+env+"/resources?result=deployed"),
		chromedp.Click(`//th/a[text()="Type"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//th[@aria-sort="ascending"]/a[text()="Type"]`, chromedp.BySearch),
		chromedp.Location(&sorted),
		chromedp.AttributeValue(`//th[@aria-sort]`, "aria-sort", &sortedBy, &hasSort, chromedp.BySearch),
		chromedp.WaitVisible(`//a[text()="`+rid+`"]`, chromedp.BySearch),
	)
	if !strings.Contains(sorted, "sort=type") || !strings.Contains(sorted, "result=deployed") {
		t.Errorf("sorted by type at %s, want sort=type with the filter kept", sorted)
	}

	// A run in progress: the page is loaded while the command sleeps, and
	// only its event stream can bring the counts to their end.
	made := filepath.Join(dir, "made")
	slow, _ := json.Marshal(map[string]any{"resources": []any{
		map[string]any{"id": rid, "attributes": map[string]any{"path": file, "content": "hello\n", "mode": "0644"}},
		map[string]any{"id": "exec::Command[localhost,name=slow]", "attributes": map[string]any{"name": "slow",
			"command": `sleep 3; echo made > "$OUT"`, "cwd": dir, "env": map[string]any{"OUT": made}, "creates": made,
			"timeout": 60}, "requires": []string{rid}}}})
	runNo := startedRun(t, c, env, servertest.Release(t, c, env, slow))
	var progress, workflowLink string
	var linked bool
	run(t, ctx,
		chromedp.Navigate(fmt.Sprintf("%senv/%s/runs/%d", base, env, runNo)),
		chromedp.WaitVisible(`//p[@data-live="running"]`, chromedp.BySearch),
		shot(t, ctx, "run-live"),
		chromedp.WaitVisible(`//p[@data-live="done"]`, chromedp.BySearch),
		chromedp.Text(`[data-field="run.deployed"]`, &progress, chromedp.ByQuery),
		chromedp.AttributeValue(`//a[contains(text(), "Temporal UI")]`, "href", &workflowLink, &linked, chromedp.BySearch),
		shot(t, ctx, "run"),
	)
	wantLink := "http://temporal-ui.test:8233/namespaces/"
	wantWorkflow := url.PathEscape(fmt.Sprintf("env/%s/deploy/%d", env, runNo))
	if !linked || !strings.HasPrefix(workflowLink, wantLink) || !strings.HasSuffix(workflowLink, "/workflows/"+wantWorkflow) {
		t.Errorf("the run's Temporal UI link = %q, want %s…/workflows/%s", workflowLink, wantLink, wantWorkflow)
	}
	accessible(t, ctx, "run")
	if progress != "1" {
		t.Errorf("after the run ended the page shows %q deployed, want 1, the command (from its event stream)", progress)
	}

	// The file's page shows its attributes and, in the released version
	// 2, the command that requires it; the command's, the file it
	// requires.
	cmdID := "exec::Command[localhost,name=slow]"
	var graph, attrs string
	run(t, ctx,
		chromedp.Navigate(base+"env/"+env+"/resource?id="+url.QueryEscape(rid)),
		chromedp.WaitVisible(`.graph`, chromedp.ByQuery),
		chromedp.Text(`.graph`, &graph, chromedp.ByQuery),
		chromedp.Text(`pre.attributes`, &attrs, chromedp.ByQuery),
		shot(t, ctx, "resource-graph"),
		chromedp.Click(`//div[@class="side"]//a[text()="`+cmdID+`"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//h1[text()="`+cmdID+`"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//div[@class="side"]//a[text()="`+rid+`"]`, chromedp.BySearch),
	)
	accessible(t, ctx, "resource with its graph")
	if !strings.Contains(graph, "Required by") || !strings.Contains(graph, cmdID) || !strings.Contains(attrs, `"content": "hello\n"`) {
		t.Errorf("the file's page: graph %q, attributes %q", graph, attrs)
	}

	// A run that fails: marked in the list, its page lists the failure
	// with its error.
	blocked := filepath.Join(dir, "a-directory")
	if err := os.Mkdir(blocked, 0o755); err != nil {
		t.Fatal(err)
	}
	failing, _ := json.Marshal(map[string]any{"resources": []any{
		map[string]any{"id": rid, "attributes": map[string]any{"path": file, "content": "hello\n", "mode": "0644"}},
		map[string]any{"id": "fs::File[localhost,path=" + blocked + "]", "attributes": map[string]any{"path": blocked, "content": "x\n"}}}})
	failed, err := c.WaitRequest(context.Background(), env, servertest.Release(t, c, env, failing), time.Minute, nil)
	if err != nil || failed.Failed != 1 {
		t.Fatalf("the failing run: %+v %v", failed, err)
	}
	run(t, ctx,
		chromedp.Navigate(base+"env/"+env+"/runs"),
		chromedp.WaitVisible(`//tr[@class="trouble"]//a[text()="`+fmt.Sprint(failed.Run)+`"]`, chromedp.BySearch),
		shot(t, ctx, "runs"),
		chromedp.Click(`//tr[@class="trouble"]//a[text()="`+fmt.Sprint(failed.Run)+`"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//h2[text()="What did not deploy"]`, chromedp.BySearch),
		chromedp.Text(`table.failures`, &text, chromedp.ByQuery),
		shot(t, ctx, "run-failures"),
	)
	accessible(t, ctx, "a run's failures")
	if !strings.Contains(text, blocked) || !strings.Contains(text, "is a directory") {
		t.Errorf("the failed run's page lists:\n%s", text)
	}

	// Sign out; a read token sees the environment but no button.
	var buttons int
	run(t, ctx,
		signOut(base),
		signIn(base, reader, env),
		chromedp.Navigate(base+"env/"+env),
		chromedp.WaitVisible(`//h2[text()="Agents"]`, chromedp.BySearch),
		chromedp.Evaluate(`document.querySelectorAll('main button').length`, &buttons),
		chromedp.Text(`.role`, &text, chromedp.ByQuery),
		shot(t, ctx, "environment-read"),
	)
	if buttons != 0 || strings.TrimSpace(text) != "read" {
		t.Errorf("a read token sees %d buttons and the role %q; want none and read", buttons, text)
	}
	fmt.Fprintf(os.Stderr, "console screenshots: %s\n", t.ArtifactDir())
}

// startedRun waits until the scheduler took request req into a run that
// has not finished, and returns the run.
func startedRun(t *testing.T, c *client.Client, env string, req int64) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r, err := c.Request(context.Background(), env, req)
		if err != nil {
			t.Fatal(err)
		}
		if r.Run != nil && *r.Run > 0 {
			return *r.Run
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("request %d was not taken into a run within 30 s", req)
	return 0
}
