package console

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// pagedAPI serves an environment "prod" with 120 agents and 70 executors,
// each list a page at a time as the API pages them (?limit=, ?after=, the
// next cursor being the last name), and records the queries of the lists.
type pagedAPI struct{ queries []string }

func (p *pagedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/api/v1/whoami":
		_, _ = io.WriteString(w, `{"kind":"token","name":"t","actor":"token:t","role":"none","environments":{"prod":"read"}}`)
	case r.URL.Path == "/api/v1/environments/prod":
		_, _ = io.WriteString(w, `{"id":"e1","project_id":"p1","name":"prod","description":"","halted":false,"last_version":0,`+
			`"released_version":null,"created_at":"2026-11-25T00:00:00Z","updated_at":"2026-11-25T00:00:00Z",`+
			`"settings":{"auto_deploy":true}}`)
	case r.URL.Path == "/api/v1/environments/prod/agents":
		p.queries = append(p.queries, "agents?"+r.URL.RawQuery)
		p.page(w, r, "ag", 120, func(name string) string { return fmt.Sprintf(`{"name":%q,"paused":false,"executors":[]}`, name) })
	case r.URL.Path == "/api/v1/environments/prod/executors":
		p.queries = append(p.queries, "executors?"+r.URL.RawQuery)
		p.page(w, r, "ex", 70, func(name string) string {
			return fmt.Sprintf(`{"name":%q,"hostname":"h","pid":1,"version":"v","agents":[],"embedded":false,`+
				`"started_at":"2026-11-25T00:00:00Z","last_seen":"2026-11-25T00:00:00Z","live":true}`, name)
		})
	case r.URL.Path == "/api/v1/environments/prod/runs":
		_, _ = io.WriteString(w, `{"items":[]}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"type":"urn:intend:problem:not-found","title":"Not found","status":404}`)
	}
}

// page writes the page of n names prefix-000… after ?after= of ?limit=.
func (p *pagedAPI) page(w http.ResponseWriter, r *http.Request, prefix string, n int, item func(string) string) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	after := r.URL.Query().Get("after")
	var items []string
	next := ""
	for i := range n {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		if name <= after {
			continue
		}
		if len(items) == limit {
			next = fmt.Sprintf("%s-%03d", prefix, i-1)
			break
		}
		items = append(items, item(name))
	}
	_, _ = fmt.Fprintf(w, `{"items":[%s],"next":%q}`, strings.Join(items, ","), next)
}

// TestEnvironmentPageShowsAPage: the environment's page shows a page of
// 50 agents and one of 50 executors, each with a "next" link that keeps
// the other list where it is; following the links walks each list to
// its end.
func TestEnvironmentPageShowsAPage(t *testing.T) {
	api := &pagedAPI{}
	c, err := New(Options{API: api})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	get := func(target string) string {
		t.Helper()
		w := do(h, "GET", target, "good", nil)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", target, w.Code, w.Body.String())
		}
		return w.Body.String()
	}
	body := get("/console/env/prod")
	for _, want := range []string{"ag-000", "ag-049", "ex-000", "ex-049",
		`<a rel="next" href="?agents_after=ag-049#agents">Next agents</a>`,
		`<a rel="next" href="?executors_after=ex-049#executors">Next executors</a>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the first page lacks %s", want)
		}
	}
	for _, not := range []string{"ag-050", "ex-050"} {
		if strings.Contains(body, not) {
			t.Errorf("the first page shows %s, beyond its page", not)
		}
	}
	if q := strings.Join(api.queries, " "); q != "agents?limit=50 executors?limit=50" {
		t.Errorf("the API was asked %s", q)
	}

	// The agents' next pages, the executors staying on their second.
	body = get("/console/env/prod?agents_after=ag-049&executors_after=ex-049")
	if !strings.Contains(body, "ag-050") || !strings.Contains(body, "ag-099") || strings.Contains(body, "ag-049<") ||
		!strings.Contains(body, "ex-050") || !strings.Contains(body, "ex-069") ||
		!strings.Contains(body, `href="?agents_after=ag-099&amp;executors_after=ex-049#agents"`) ||
		strings.Contains(body, "Next executors") {
		t.Errorf("the second pages:\n%s", body)
	}
	body = get("/console/env/prod?agents_after=ag-099")
	if !strings.Contains(body, "ag-119") || strings.Contains(body, "Next agents") {
		t.Errorf("the last page of agents:\n%s", body)
	}
}
