package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
)

// registration is the body of a registration of agents.
func registration(host string, agents ...string) string {
	if agents == nil {
		agents = []string{}
	}
	return fmt.Sprintf(`{"hostname":%q,"pid":1,"version":"v","agents":[%s],"first":true}`, host,
		strings.Join(quoted(agents), ","))
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// namedExecutorToken stores an executor token of env called name, of
// every agent, and returns its secret and id.
func namedExecutorToken(t *testing.T, f *fixture, env store.Environment, name string) (string, string) {
	t.Helper()
	secret := auth.NewSecret()
	tok, err := f.st.CreateToken(context.Background(), store.NewToken{Name: name, Role: "executor",
		Environments: []string{env.ID}, Hash: auth.Hash(secret), Hint: auth.Hint(secret), CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return secret, tok.ID
}

// executorsOf lists the executors of env by name.
func executorsOf(t *testing.T, f *fixture, env string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, it := range f.mustCall("GET", "/api/v1/environments/"+env+"/executors?limit=1000", "", 200)["items"].([]any) {
		x := it.(map[string]any)
		out[x["name"].(string)] = x
	}
	return out
}

// TestExecutorRegistrationIsOwned: a registration belongs to the token
// that made it. Another executor token can neither overwrite it nor mark
// it stopped (403 naming why), nor take the server's own embedded
// executor's name; an admin may mark any stopped; once the owner token is
// revoked (rotated), another token takes the name over.
func TestExecutorRegistrationIsOwned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, api.Options{})
	f.env("owned")
	e, err := f.st.GetEnvironment(ctx, "owned")
	if err != nil {
		t.Fatal(err)
	}
	tokA, idA := namedExecutorToken(t, f, e, "exec-a")
	tokB, idB := namedExecutorToken(t, f, e, "exec-b")
	reg := "/api/v1/environments/owned/executor/registrations/"

	if code, out := f.callAs("PUT", reg+"web-1", registration("host-a", "a"), tokA, nil); code != 204 {
		t.Fatalf("A registers web-1: %d %v", code, out)
	}
	if x := executorsOf(t, f, "owned")["web-1"]; x["registered_by"] != "token:"+idA {
		t.Errorf("web-1 = %v, want registered by token:%s", x, idA)
	}
	// B overwrites it: refused, and web-1 is still A's.
	code, out := f.callAs("PUT", reg+"web-1", registration("host-b", "b"), tokB, nil)
	if code != 403 || !strings.Contains(fmt.Sprint(out["detail"]), `executor "web-1" is registered in environment "owned" by another token`) {
		t.Errorf("B registers web-1: %d %v, want 403 naming the other token", code, out)
	}
	if x := executorsOf(t, f, "owned")["web-1"]; x["hostname"] != "host-a" || fmt.Sprint(x["agents"]) != "[a]" ||
		x["registered_by"] != "token:"+idA {
		t.Errorf("web-1 after B's report = %v, want A's", x)
	}
	// B stops it: refused, and web-1 is still live.
	if code, out := f.callAs("POST", reg+"web-1/stop", "", tokB, nil); code != 403 ||
		!strings.Contains(fmt.Sprint(out["detail"]), "by another token") {
		t.Errorf("B stops web-1: %d %v, want 403", code, out)
	}
	if x := executorsOf(t, f, "owned")["web-1"]; x["live"] != true || x["stopped_at"] != nil {
		t.Errorf("web-1 after B's stop = %v, want live", x)
	}
	// B's own registrations are B's.
	if code, out := f.callAs("PUT", reg+"web-2", registration("host-b", "b"), tokB, nil); code != 204 {
		t.Fatalf("B registers web-2: %d %v", code, out)
	}
	if code, out := f.callAs("PUT", reg+"web-2", registration("host-a"), tokA, nil); code != 403 {
		t.Errorf("A registers B's web-2: %d %v, want 403", code, out)
	}

	// The server's in-process embedded executor registers through the
	// store: its name is the server's, no token's.
	if err := f.st.ReportExecutor(ctx, "owned", store.ExecutorReport{Name: "server-1", Hostname: "srv", Agents: []string{"a"},
		Embedded: true, First: true}); err != nil {
		t.Fatal(err)
	}
	code, out = f.callAs("PUT", reg+"server-1", registration("host-b", "a"), tokB, nil)
	if code != 403 || !strings.Contains(fmt.Sprint(out["detail"]), "by the intend server itself") {
		t.Errorf("B registers the embedded executor's name: %d %v, want 403", code, out)
	}
	if code, _ := f.callAs("POST", reg+"server-1/stop", "", tokB, nil); code != 403 {
		t.Errorf("B stops the embedded executor: %d, want 403", code)
	}
	if err := f.st.ReportExecutor(ctx, "owned", store.ExecutorReport{Name: "server-1", Hostname: "srv", Agents: []string{"a", "b"},
		Embedded: true}); err != nil {
		t.Errorf("the embedded executor's heartbeat: %v", err)
	}
	if err := f.st.StopExecutor(ctx, "server-1", []string{"owned"}); err != nil {
		t.Errorf("the embedded executor's stop: %v", err)
	}
	// Nor may the embedded executor take a token's name.
	if err := f.st.ReportExecutor(ctx, "owned", store.ExecutorReport{Name: "web-1", Hostname: "srv"}); err == nil {
		t.Error("the server's report took web-1 over from token A")
	}

	// An admin marks any registration stopped (operators clean up), but
	// does not overwrite it either.
	if code, out := f.call("POST", reg+"web-1/stop", ""); code != 204 {
		t.Errorf("an admin stops web-1: %d %v", code, out)
	}
	if x := executorsOf(t, f, "owned")["web-1"]; x["stopped_at"] == nil || x["live"] != false {
		t.Errorf("web-1 after the admin's stop = %v, want stopped", x)
	}
	if code, _ := f.call("PUT", reg+"web-1", registration("admin-host")); code != 403 {
		t.Errorf("an admin overwrites web-1: %d, want 403", code)
	}
	// A stopped registration is still A's: A revives it, B may not.
	if code, _ := f.callAs("PUT", reg+"web-1", registration("host-b", "b"), tokB, nil); code != 403 {
		t.Errorf("B registers A's stopped web-1: %d, want 403", code)
	}
	if code, out := f.callAs("PUT", reg+"web-1", registration("host-a", "a"), tokA, nil); code != 204 {
		t.Errorf("A revives web-1: %d %v", code, out)
	}

	// A rotated token: once A is revoked, its successor takes web-1 over.
	if _, err := f.st.RevokeToken(ctx, idA); err != nil {
		t.Fatal(err)
	}
	if code, out := f.callAs("PUT", reg+"web-1", registration("host-b", "b"), tokB, nil); code != 204 {
		t.Errorf("B registers web-1 after A's revocation: %d %v", code, out)
	}
	if x := executorsOf(t, f, "owned")["web-1"]; x["hostname"] != "host-b" || x["registered_by"] != "token:"+idB {
		t.Errorf("web-1 after the takeover = %v, want B's", x)
	}

	// The refusals are in the audit trail.
	_, audit := f.call("GET", "/api/v1/environments/owned/audit?limit=1000", "")
	seen := map[string]int{}
	for _, it := range audit["items"].([]any) {
		a := it.(map[string]any)
		seen[fmt.Sprintf("%s %v", a["action"], a["status"])]++
	}
	if seen["executor.report 403"] < 4 || seen["executor.stop 403"] < 2 {
		t.Errorf("audit trail = %v, want the refused reports and stops", seen)
	}
}

// TestExecutorRegistrationIsBounded: a token keeps at most 64 live
// executors in an environment (a 65th is a 422 that says so; its
// registrations that are not live make room, oldest first), and a
// registration names at most 1,000 agents.
func TestExecutorRegistrationIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, api.Options{})
	f.env("bounded")
	e, err := f.st.GetEnvironment(ctx, "bounded")
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := namedExecutorToken(t, f, e, "many")
	other, _ := namedExecutorToken(t, f, e, "other")
	reg := "/api/v1/environments/bounded/executor/registrations/"
	for i := range store.MaxExecutorsPerOwner {
		if code, out := f.callAs("PUT", fmt.Sprintf("%sx-%02d", reg, i), registration("h", "a"), tok, nil); code != 204 {
			t.Fatalf("registration %d: %d %v", i, code, out)
		}
	}
	code, out := f.callAs("PUT", reg+"x-64", registration("h", "a"), tok, nil)
	if code != 422 || !strings.Contains(fmt.Sprint(out["detail"]), "this token has 64 live executors registered") {
		t.Errorf("the 65th registration: %d %v, want 422 naming the bound", code, out)
	}
	// Its existing registrations still report, and another token is not
	// bounded by this one's.
	if code, out := f.callAs("PUT", reg+"x-00", registration("h", "a", "b"), tok, nil); code != 204 {
		t.Errorf("a heartbeat at the bound: %d %v", code, out)
	}
	if code, out := f.callAs("PUT", reg+"y-00", registration("h", "a"), other, nil); code != 204 {
		t.Errorf("another token's registration: %d %v", code, out)
	}
	// One stopped and one killed (unseen for 31 s): room for two, the
	// stopped and the dead one forgotten.
	if code, _ := f.callAs("POST", reg+"x-01/stop", "", tok, nil); code != 204 {
		t.Fatalf("stop x-01: %d", code)
	}
	conn, err := pgx.Connect(ctx, f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `update executors set last_seen = now() - interval '31 seconds' where name = 'x-02'`); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"x-64", "x-65"} {
		if code, out := f.callAs("PUT", reg+name, registration("h", "a"), tok, nil); code != 204 {
			t.Errorf("%s after two went: %d %v", name, code, out)
		}
	}
	if code, _ := f.callAs("PUT", reg+"x-66", registration("h", "a"), tok, nil); code != 422 {
		t.Errorf("x-66: %d, want 422", code)
	}
	xs := executorsOf(t, f, "bounded")
	if _, ok := xs["x-01"]; ok || len(xs) != store.MaxExecutorsPerOwner+1 {
		t.Errorf("%d executors (x-01 listed: %v), want 64 of the token and 1 of the other, the stopped and dead ones gone",
			len(xs), ok)
	}

	// Agents: at most 1,000 in one registration.
	agents := make([]string, store.MaxExecutorAgents+1)
	for i := range agents {
		agents[i] = fmt.Sprintf("agent-%d", i)
	}
	code, out = f.callAs("PUT", reg+"y-01", registration("h", agents...), other, nil)
	if code != 422 || !strings.Contains(fmt.Sprint(out["errors"]), "/agents") ||
		!strings.Contains(fmt.Sprint(out["errors"]), "at most 1000") {
		t.Errorf("1001 agents: %d %v, want 422 naming /agents", code, out)
	}
	if code, out := f.callAs("PUT", reg+"y-01", registration("h", agents[:store.MaxExecutorAgents]...), other, nil); code != 204 {
		t.Errorf("1000 agents: %d %v", code, out)
	}
}

// TestRegistrationListsArePaged: the executors, agents, tokens and
// callbacks answer a bounded page with the cursor of the next; walking
// the pages yields every item once, in order; a bad cursor or limit is a
// 422; and the client's typed lists follow the pages.
func TestRegistrationListsArePaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, api.Options{})
	f.env("paged")
	e, err := f.st.GetEnvironment(ctx, "paged")
	if err != nil {
		t.Fatal(err)
	}

	// 130 agents (beyond the default page of 100), 7 executors, 5
	// callbacks, and 130 tokens.
	var rs, agents []string
	for i := range 130 {
		a := fmt.Sprintf("ag-%03d", i)
		agents = append(agents, a)
		rs = append(rs, fmt.Sprintf(`{"id":"fs::File[%s,path=/f]","attributes":{"path":"/f","content":"x"}}`, a))
	}
	v, err := intent.DecodeBytes([]byte(version(rs...)))
	if err != nil {
		t.Fatal(err)
	}
	info, err := f.st.ExportVersion(ctx, e.ID, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
		t.Fatal(err)
	}
	var execs []string
	for i := range 7 {
		name := fmt.Sprintf("exec-%d", i)
		execs = append(execs, name)
		if err := f.st.ReportExecutor(ctx, "paged", store.ExecutorReport{Name: name, Hostname: "h",
			Agents: agents[i : i+2], First: true}); err != nil {
			t.Fatal(err)
		}
	}
	var callbacks []string
	for i := range 5 {
		cb, err := f.st.CreateCallback(ctx, e.ID, store.NewCallback{URL: fmt.Sprintf("https://hooks.example.com/%d", i),
			Secret: "s", CreatedBy: "test"})
		if err != nil {
			t.Fatal(err)
		}
		callbacks = append(callbacks, cb.ID)
	}
	for i := range 130 {
		f.newToken(fmt.Sprintf("tok-%03d", i), "read", nil)
	}
	// One revoked token, listed with ?revoked=true only.
	if _, err := f.st.RevokeToken(ctx, "tok-000"); err != nil {
		t.Fatal(err)
	}
	allTokens, err := f.st.ListTokens(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	var tokenIDs []string
	for _, tk := range allTokens {
		tokenIDs = append(tokenIDs, tk.ID)
	}
	lsmEnv := http.Header{"X-Intend-Environment": {"paged"}}

	// walk reads every page of path by limit n, following next as
	// ?after=, and returns the items' key in order and the pages read.
	walk := func(path string, query url.Values, key string, n int, header http.Header) ([]string, int) {
		t.Helper()
		var got []string
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		q.Set("limit", fmt.Sprint(n))
		for pages := 1; pages < 200; pages++ {
			code, out := f.callAs("GET", path+"?"+q.Encode(), "", f.token, header)
			if code != 200 {
				t.Fatalf("GET %s?%s = %d %v", path, q.Encode(), code, out)
			}
			items, _ := out["items"].([]any)
			if len(items) > n {
				t.Fatalf("GET %s?%s: %d items, more than the limit", path, q.Encode(), len(items))
			}
			for _, it := range items {
				got = append(got, fmt.Sprint(it.(map[string]any)[key]))
			}
			next, _ := out["next"].(string)
			if next == "" {
				return got, pages
			}
			q.Set("after", next)
		}
		t.Fatalf("%s: no end after 200 pages", path)
		return nil, 0
	}
	env := "/api/v1/environments/paged"
	for _, tc := range []struct {
		what, path string
		query      url.Values
		key        string
		n          int
		header     http.Header
		want       []string
	}{
		{"executors", env + "/executors", nil, "name", 3, nil, execs},
		{"agents", env + "/agents", nil, "name", 40, nil, agents},
		{"tokens", "/api/v1/tokens", url.Values{"revoked": {"true"}}, "id", 17, nil, tokenIDs},
		{"callbacks", "/lsm/v1/callbacks", nil, "id", 2, lsmEnv, callbacks},
	} {
		got, pages := walk(tc.path, tc.query, tc.key, tc.n, tc.header)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s by %d: %d items %v, want %d %v", tc.what, tc.n, len(got), got, len(tc.want), tc.want)
		}
		if wantPages := len(tc.want)/tc.n + 1; pages != wantPages && pages != len(tc.want)/tc.n {
			t.Errorf("%s by %d: %d pages for %d items", tc.what, tc.n, pages, len(tc.want))
		}
	}
	// A page of agents carries the executors of its agents.
	_, out := f.callAs("GET", env+"/agents?limit=2", "", f.token, nil)
	if items := out["items"].([]any); fmt.Sprint(items[1].(map[string]any)["executors"].([]any)[0].(map[string]any)["name"]) != "exec-0" {
		t.Errorf("agents page = %v, want ag-001 served by exec-0", out)
	}
	// Without a limit: the default page of 100, and its next.
	if _, out := f.callAs("GET", env+"/agents", "", f.token, nil); len(out["items"].([]any)) != 100 || out["next"] != "ag-099" {
		t.Errorf("agents without a limit: %d items, next %v; want 100 and ag-099", len(out["items"].([]any)), out["next"])
	}

	for _, tc := range []struct {
		path   string
		header http.Header
		field  string
	}{
		{env + "/executors?limit=0", nil, "?limit"},
		{env + "/executors?limit=1001", nil, "?limit"},
		{env + "/agents?limit=1001", nil, "?limit"},
		{env + "/executors?after=" + strings.Repeat("x", 300), nil, "?after"},
		{"/api/v1/tokens?limit=1001", nil, "?limit"},
		{"/api/v1/tokens?after=not-a-cursor", nil, "?after"},
		{"/api/v1/tokens?after=eyJhdCI6IjIwMjYtMDEtMDFUMDA6MDA6MDBaIiwiaWQiOiJ4In0", nil, "?after"}, // {"at":…,"id":"x"}
		{"/lsm/v1/callbacks?after=not-a-cursor", lsmEnv, "?after"},
		{"/lsm/v1/callbacks?limit=0", lsmEnv, "?limit"},
	} {
		code, out := f.callAs("GET", tc.path, "", f.token, tc.header)
		if code != 422 || !strings.Contains(fmt.Sprint(out["errors"]), tc.field) {
			t.Errorf("GET %s = %d %v, want 422 naming %s", tc.path, code, out, tc.field)
		}
	}

	// The client's lists follow every page.
	c := client.New(f.srv.URL)
	c.Token = f.token
	as, err := c.Agents(ctx, "paged")
	if err != nil || len(as) != len(agents) || as[129].Name != "ag-129" {
		t.Errorf("client.Agents: %d agents, %v", len(as), err)
	}
	ts, err := c.Tokens(ctx, true)
	if err != nil || len(ts) != len(tokenIDs) {
		t.Errorf("client.Tokens: %d tokens, %v; want %d", len(ts), err, len(tokenIDs))
	}
	if live, err := c.Tokens(ctx, false); err != nil || len(live) != len(tokenIDs)-1 {
		t.Errorf("client.Tokens without the revoked: %d tokens, %v; want %d", len(live), err, len(tokenIDs)-1)
	}
	if xs, err := c.Executors(ctx, "paged"); err != nil || len(xs) != len(execs) {
		t.Errorf("client.Executors: %d, %v", len(xs), err)
	}
	if cbs, err := c.Callbacks(ctx, "paged"); err != nil || len(cbs) != len(callbacks) {
		t.Errorf("client.Callbacks: %d, %v", len(cbs), err)
	}
}
