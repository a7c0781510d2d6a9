package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// consoleAs posts and gets console pages with a token, as a signed-in
// browser does (the session cookie; forms with their anti-forgery token,
// read from the page that holds them).
type consoleAs struct {
	t     *testing.T
	base  string
	token string
}

func (b consoleAs) do(method, path string, form url.Values) (int, string, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.AddCookie(&http.Cookie{Name: "intend_console", Value: b.token})
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), resp.Header.Get("Location")
}

// get is a page that must answer 200.
func (b consoleAs) get(path string) string {
	b.t.Helper()
	code, body, _ := b.do(http.MethodGet, path, nil)
	if code != http.StatusOK {
		b.t.Fatalf("GET %s = %d:\n%s", path, code, body)
	}
	return body
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the user's form token, from any page of theirs.
func (b consoleAs) csrf() string {
	b.t.Helper()
	m := csrfField.FindStringSubmatch(b.get("/console/"))
	if m == nil {
		b.t.Fatal("no form token on the environments page")
	}
	return m[1]
}

// TestConsoleOperatorViews, against a real server: a run with a failure
// and a skip is marked in the runs lists, and its page lists both with
// their errors; a resource's action log shows its change as a diff; an
// operator halts (after confirming) and resumes the environment, pauses
// (after confirming) and unpauses an agent, and deploys one resource;
// a read token is offered none of these buttons and its forms are
// refused by the API.
func TestConsoleOperatorViews(t *testing.T) {
	c, s, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	ctx := context.Background()
	env := servertest.NewEnvironment(t, c, "operate", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	dir := t.TempDir()
	good := filepath.Join(dir, "motd")
	blocked := filepath.Join(dir, "a-directory")
	if err := os.Mkdir(blocked, 0o755); err != nil {
		t.Fatal(err)
	}
	after := filepath.Join(dir, "after")
	file := func(path, content string, requires ...string) map[string]any {
		r := map[string]any{"id": "fs::File[localhost,path=" + path + "]",
			"attributes": map[string]any{"path": path, "content": content, "mode": "0644"}}
		if len(requires) > 0 {
			r["requires"] = requires
		}
		return r
	}
	id := func(path string) string { return "fs::File[localhost,path=" + path + "]" }
	release := func(rs ...any) client.DeployRun {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"resources": rs})
		run, err := c.WaitRequest(ctx, env, servertest.Release(t, c, env, b), time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	// Version 1 deploys motd; version 2 changes it, fails on a path that
	// is a directory and skips the file that requires that one.
	release(file(good, "hello\n"), file(after, "x\n"))
	run := release(file(good, "hello\nagain\n"), file(blocked, "not a dir\n"), file(after, "y\n", id(blocked)))
	if run.Failed != 1 || run.Skipped != 1 {
		t.Fatalf("run %d: %d failed, %d skipped; want 1 and 1", run.Run, run.Failed, run.Skipped)
	}
	admin := consoleAs{t, s.URL(), c.Token}
	mark := `<span class="badge bad">1 failed, 1 skipped</span>`
	for _, page := range []string{"/console/env/" + env + "/runs", "/console/env/" + env} {
		body := admin.get(page)
		if !strings.Contains(body, mark) || strings.Count(body, `class="trouble"`) != 1 {
			t.Errorf("%s does not mark the one run with failures with %s:\n%s", page, mark, body)
		}
	}
	body := admin.get(fmt.Sprintf("/console/env/%s/runs/%d", env, run.Run))
	for _, want := range []string{"What did not deploy", url.QueryEscape(id(blocked)), `<span class="badge failed">failed</span>`,
		"is a directory", url.QueryEscape(id(after)), "skipped_for_dependency"} {
		if !strings.Contains(body, want) {
			t.Errorf("the run's page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, url.QueryEscape(id(good))) {
		t.Errorf("the run's page lists %s, which deployed:\n%s", id(good), body)
	}
	body = admin.get("/console/env/" + env + "/resource?id=" + url.QueryEscape(id(good)))
	if !strings.Contains(body, `<span class="hunk">@@ -1 &#43;1,2 @@</span>`) ||
		!strings.Contains(body, `<span class="add">&#43;again</span>`) {
		t.Errorf("the action log shows no diff of motd's content:\n%s", body)
	}

	// The operator's buttons, and the reader's lack of them.
	operator, err := c.CreateToken(ctx, client.NewToken{Name: "console-operator", Role: "operator", Environments: []string{env}})
	if err != nil {
		t.Fatal(err)
	}
	op := consoleAs{t, s.URL(), operator.Secret}
	reader := consoleAs{t, s.URL(), readToken(t, c, "console-operate-reader", env)}
	envPage, resourcePage := "/console/env/"+env, "/console/env/"+env+"/resource?id="+url.QueryEscape(id(good))
	for _, want := range []string{`action="/console/env/` + env + `/halt"`, `action="/console/env/` + env + `/agents/pause"`,
		`<input type="hidden" name="agent" value="localhost">`} {
		if body := op.get(envPage); !strings.Contains(body, want) {
			t.Errorf("the operator's environment page lacks %s", want)
		}
		if body := reader.get(envPage); strings.Contains(body, want) {
			t.Errorf("the reader's environment page has %s", want)
		}
	}
	if body := op.get(resourcePage); !strings.Contains(body, "Deploy this resource") || !strings.Contains(body, "Repair this resource") {
		t.Errorf("the operator's resource page lacks its buttons:\n%s", body)
	}
	if body := reader.get(resourcePage); strings.Contains(body, "this resource</button>") {
		t.Errorf("the reader's resource page has deploy buttons:\n%s", body)
	}

	csrf := op.csrf()
	halted := func() bool {
		t.Helper()
		e, err := c.Environment(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		return e.Halted
	}
	// Halt asks first, and does nothing until confirmed.
	code, body, _ := op.do(http.MethodPost, "/console/env/"+env+"/halt", url.Values{"csrf": {csrf}})
	if code != http.StatusOK || !strings.Contains(body, "Halt environment "+env+"?") ||
		!strings.Contains(body, `<input type="hidden" name="confirm" value="yes">`) || halted() {
		t.Fatalf("an unconfirmed halt = %d, halted %v:\n%s", code, halted(), body)
	}
	code, _, loc := op.do(http.MethodPost, "/console/env/"+env+"/halt", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "halted") || !halted() {
		t.Fatalf("a confirmed halt = %d %s, halted %v", code, loc, halted())
	}
	if body := op.get(envPage); !strings.Contains(body, ">Resume</button>") {
		t.Errorf("a halted environment's page has no Resume:\n%s", body)
	}
	code, _, loc = op.do(http.MethodPost, "/console/env/"+env+"/resume", url.Values{"csrf": {csrf}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "resumed") || halted() {
		t.Fatalf("resume = %d %s, halted %v", code, loc, halted())
	}

	paused := func() bool {
		t.Helper()
		agents, err := c.Agents(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range agents {
			if a.Name == "localhost" {
				return a.Paused
			}
		}
		t.Fatalf("no agent localhost in %+v", agents)
		return false
	}
	pause := url.Values{"csrf": {csrf}, "agent": {"localhost"}}
	if code, body, _ := op.do(http.MethodPost, "/console/env/"+env+"/agents/pause", pause); code != http.StatusOK ||
		!strings.Contains(body, "Pause agent localhost?") || paused() {
		t.Fatalf("an unconfirmed pause = %d, paused %v:\n%s", code, paused(), body)
	}
	pause.Set("confirm", "yes")
	if code, _, loc := op.do(http.MethodPost, "/console/env/"+env+"/agents/pause", pause); code != http.StatusSeeOther || !paused() {
		t.Fatalf("a confirmed pause = %d %s, paused %v", code, loc, paused())
	}
	if body := op.get(envPage); !strings.Contains(body, `action="/console/env/`+env+`/agents/unpause"`) {
		t.Errorf("a paused agent has no Unpause:\n%s", body)
	}
	if code, _, loc := op.do(http.MethodPost, "/console/env/"+env+"/agents/unpause", url.Values{"csrf": {csrf}, "agent": {"localhost"}}); code != http.StatusSeeOther || paused() {
		t.Fatalf("unpause = %d %s, paused %v", code, loc, paused())
	}

	// Deploy one resource: a request for it alone, followed to its page.
	code, _, loc = op.do(http.MethodPost, "/console/env/"+env+"/resource/deploy",
		url.Values{"csrf": {csrf}, "id": {id(blocked)}, "mode": {"full"}})
	m := regexp.MustCompile(`/console/env/` + env + `/requests/(\d+)\?flash=Repair\+of\+`).FindStringSubmatch(loc)
	if code != http.StatusSeeOther || m == nil {
		t.Fatalf("deploy one resource = %d %s", code, loc)
	}
	var req client.Request
	if err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+env+"/requests/"+m[1], nil, &req); err != nil {
		t.Fatal(err)
	}
	if req.Kind != "repair" || len(req.ResourceIDs) != 1 || req.ResourceIDs[0] != id(blocked) {
		t.Errorf("the request made = %+v, want a repair of %s alone", req, id(blocked))
	}

	// A reader's forms (made by hand) are the API's to refuse.
	rcsrf := reader.csrf()
	for _, path := range []string{"/halt", "/resume", "/resource/deploy"} {
		form := url.Values{"csrf": {rcsrf}, "confirm": {"yes"}, "id": {id(good)}, "mode": {"incremental"}}
		if code, body, _ := reader.do(http.MethodPost, "/console/env/"+env+path, form); code != http.StatusForbidden {
			t.Errorf("a reader's POST %s = %d, want 403:\n%s", path, code, body)
		}
	}
	// Without the form token: refused before the API.
	if code, _, _ := op.do(http.MethodPost, "/console/env/"+env+"/halt", url.Values{"confirm": {"yes"}}); code != http.StatusForbidden || halted() {
		t.Errorf("a halt without the form token = %d, halted %v", code, halted())
	}
}
