package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
)

// page is what every template gets.
type page struct {
	Title string
	// Env is the environment the page is of ("" for none).
	Env  string
	User *client.Whoami
	Role string
	// CSRF is the signed-in user's form token.
	CSRF  string
	Error string
	Flash string
	Next  string
	// OIDC: the sign-in page offers the OpenID Connect sign-in.
	OIDC bool
	Data any
}

var funcs = template.FuncMap{
	"path": url.PathEscape,
	// query is an encoded query string, safe as the part of an href
	// after "?": url.Values encodes every value.
	"query": func(kv ...string) template.URL {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		return template.URL(v.Encode())
	},
	"when": func(t any) string {
		switch t := t.(type) {
		case time.Time:
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		case *time.Time:
			if t == nil {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		}
		return fmt.Sprint(t)
	},
	"roleOf": func(w *client.Whoami, env string) string {
		if w == nil {
			return "none"
		}
		if r, ok := w.Environments[env]; ok {
			return r
		}
		return w.Role
	},
	"list": func(v ...string) []string { return v },
	// logLines are an action's adapter log lines, one text each.
	"logLines": func(raw json.RawMessage) []string {
		var lines []struct {
			Level string         `json:"level"`
			Msg   string         `json:"msg"`
			Attrs map[string]any `json:"attrs"`
		}
		if json.Unmarshal(raw, &lines) != nil {
			return nil
		}
		out := make([]string, len(lines))
		for i, l := range lines {
			out[i] = l.Level + " " + l.Msg
			for _, k := range slices.Sorted(maps.Keys(l.Attrs)) {
				out[i] += fmt.Sprintf(" %s=%v", k, l.Attrs[k])
			}
		}
		return out
	},
	"deref": func(v *int64) string {
		if v == nil {
			return "—"
		}
		return fmt.Sprint(*v)
	},
}

// render writes a page with its layout.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t, ok := c.pages[name]
	if !ok {
		http.Error(w, "no page "+name, http.StatusInternalServerError)
		return
	}
	if u := userOf(r); u != nil {
		p.User, p.CSRF = &u.whoami, c.csrf(u.token)
		if p.Env != "" {
			p.Role = u.roleIn(p.Env)
		} else {
			p.Role = u.whoami.Role
		}
	}
	if p.Flash == "" {
		p.Flash = c.flashOf(r)
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout.html", p); err != nil {
		c.opts.Log.Error("console: render", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// listPage is one page of a list: its items and the cursor of the next.
type listPage[T any] struct {
	Items []T    `json:"items"`
	Next  string `json:"next"`
}

// envList reads one page of an environment's list route (runs, compiles,
// …), limit rows after the request's ?after cursor.
func envList[T any](r *http.Request, route string, limit int) (listPage[T], error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if after := r.URL.Query().Get("after"); after != "" {
		q.Set("after", after)
	}
	var out listPage[T]
	err := userOf(r).api.Do(r.Context(), http.MethodGet,
		"/api/v1/environments/"+url.PathEscape(chi.URLParam(r, "env"))+"/"+route+"?"+q.Encode(), nil, &out)
	return out, err
}

// fail shows what the API answered as a page with its status.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadGateway
	var p *client.Problem
	if pe, ok := err.(*client.Problem); ok {
		p = pe
	}
	if p != nil && p.Status > 0 {
		status = p.Status
	}
	c.render(w, r, status, "error", page{Title: http.StatusText(status), Error: problemText(err), Env: chi.URLParam(r, "env")})
}

func (c *Console) environments(w http.ResponseWriter, r *http.Request) {
	u := userOf(r)
	var list struct {
		Items []client.Environment `json:"items"`
	}
	if err := u.api.Do(r.Context(), http.MethodGet, "/api/v1/environments?limit=1000", nil, &list); err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "environments", page{Title: "Environments", Data: list.Items})
}

// environmentListPage is how many agents, and executors, the
// environment's page shows at once.
const environmentListPage = 50

// environmentData is the environment page's.
type environmentData struct {
	Env       client.Environment
	Agents    []client.Agent
	Executors []client.Executor
	// AgentsAfter and ExecutorsAfter are the cursors the page shows the
	// agents and the executors from (?agents_after=, ?executors_after=);
	// AgentsNext and ExecutorsNext those of their next pages ("": none).
	AgentsAfter, AgentsNext       string
	ExecutorsAfter, ExecutorsNext string
	Runs                          []client.DeployRun
	Operator                      bool
	// Admin: the settings are a form; Settings are their rows.
	Admin    bool
	Settings []setting
}

func (c *Console) environment(w http.ResponseWriter, r *http.Request) {
	c.environmentPage(w, r, http.StatusOK, nil, "")
}

// environmentPage shows the environment; with settings, its settings form
// as submitted (with their errors), and status.
func (c *Console) environmentPage(w http.ResponseWriter, r *http.Request, status int, settings []setting, errText string) {
	u, env := userOf(r), chi.URLParam(r, "env")
	d := environmentData{Operator: u.may(env, auth.RoleOperator), Admin: u.may(env, auth.RoleAdmin)}
	base := "/api/v1/environments/" + url.PathEscape(env)
	// One page of agents and one of executors, each from its own cursor.
	d.AgentsAfter, d.ExecutorsAfter = r.URL.Query().Get("agents_after"), r.URL.Query().Get("executors_after")
	pageOf := func(list, after string) string {
		q := url.Values{"limit": {strconv.Itoa(environmentListPage)}}
		if after != "" {
			q.Set("after", after)
		}
		return base + "/" + list + "?" + q.Encode()
	}
	var agents struct {
		Items []client.Agent `json:"items"`
		Next  string         `json:"next"`
	}
	var execs struct {
		Items []client.Executor `json:"items"`
		Next  string            `json:"next"`
	}
	var runs struct {
		Items []client.DeployRun `json:"items"`
	}
	for _, get := range []struct {
		path string
		out  any
	}{{base, &d.Env}, {pageOf("agents", d.AgentsAfter), &agents}, {pageOf("executors", d.ExecutorsAfter), &execs},
		{base + "/runs?limit=10", &runs}} {
		if err := u.api.Do(r.Context(), http.MethodGet, get.path, nil, get.out); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	d.Agents, d.Executors, d.Runs = agents.Items, execs.Items, runs.Items
	d.AgentsNext, d.ExecutorsNext = agents.Next, execs.Next
	d.Settings = settings
	if d.Settings == nil {
		d.Settings = settingsOf(d.Env.Settings)
	}
	c.render(w, r, status, "environment", page{Title: d.Env.Name, Env: env, Data: d, Error: errText})
}

// resourcesData is the resources page's: one page of the table, its
// filters and the cursor of the next.
type resourcesData struct {
	Items                           []client.ResourceState
	Agent, Type, Result, Compliance string
	// Sort is the column the table is sorted by ("" the id).
	Sort string
	Next string
}

func (c *Console) resources(w http.ResponseWriter, r *http.Request) {
	u, env := userOf(r), chi.URLParam(r, "env")
	q := r.URL.Query()
	d := resourcesData{Agent: q.Get("agent"), Type: q.Get("type"), Result: q.Get("result"), Compliance: q.Get("compliance"),
		Sort: q.Get("sort")}
	api := url.Values{"limit": {"100"}}
	for k, v := range map[string]string{"agent": d.Agent, "type": d.Type, "result": d.Result, "compliance": d.Compliance,
		"after": q.Get("after"), "sort": d.Sort} {
		if v != "" {
			api.Set(k, v)
		}
	}
	var list struct {
		Items []client.ResourceState `json:"items"`
		Next  string                 `json:"next"`
	}
	if err := u.api.Do(r.Context(), http.MethodGet, "/api/v1/environments/"+url.PathEscape(env)+"/resources?"+api.Encode(), nil, &list); err != nil {
		c.fail(w, r, err)
		return
	}
	d.Items, d.Next = list.Items, list.Next
	c.render(w, r, http.StatusOK, "resources", page{Title: "Resources of " + env, Env: env, Data: d})
}

// resourceData is one resource's page.
type resourceData struct {
	Resource client.Resource
	Facts    []client.Fact
	// Intent is the resource as the released version holds it, nil when
	// it holds none; Attributes is its attributes, indented.
	Intent     *client.ResourceIntent
	Attributes string
	// Operator: the page offers to deploy or repair the resource.
	Operator bool
}

func (c *Console) resource(w http.ResponseWriter, r *http.Request) {
	u, env, id := userOf(r), chi.URLParam(r, "env"), r.URL.Query().Get("id")
	if id == "" {
		c.render(w, r, http.StatusBadRequest, "error", page{Title: "Bad request", Env: env, Error: "Name a resource (?id=…)."})
		return
	}
	base := "/api/v1/environments/" + url.PathEscape(env) + "/resources/" + url.PathEscape(id)
	d := resourceData{Operator: u.may(env, auth.RoleOperator)}
	if err := u.api.Do(r.Context(), http.MethodGet, base, nil, &d.Resource); err != nil {
		c.fail(w, r, err)
		return
	}
	var facts struct {
		Items []client.Fact `json:"items"`
	}
	if err := u.api.Do(r.Context(), http.MethodGet, base+"/facts", nil, &facts); err != nil {
		c.fail(w, r, err)
		return
	}
	d.Facts = facts.Items
	var intent client.ResourceIntent
	switch err := u.api.Do(r.Context(), http.MethodGet, base+"/intent", nil, &intent); {
	case client.IsNotFound(err):
		// An orphan: no released version holds it.
	case err != nil:
		c.fail(w, r, err)
		return
	default:
		d.Intent = &intent
		var b bytes.Buffer
		if json.Indent(&b, intent.Resource.Attributes, "", "  ") == nil {
			d.Attributes = b.String()
		}
	}
	c.render(w, r, http.StatusOK, "resource", page{Title: id, Env: env, Data: d})
}

// deploy asks for a deploy (mode incremental) or a repair (full).
func (c *Console) deploy(w http.ResponseWriter, r *http.Request) {
	u, env := userOf(r), chi.URLParam(r, "env")
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if !c.checkCSRF(r, u.token) {
		c.render(w, r, http.StatusForbidden, "error", page{Title: "Forbidden", Env: env,
			Error: "The form is stale (the server restarted, or you signed in again); go back and press the button again."})
		return
	}
	mode := r.PostFormValue("mode")
	if mode != "incremental" && mode != "full" {
		c.render(w, r, http.StatusUnprocessableEntity, "error", page{Title: "Invalid request", Env: env, Error: "mode must be incremental or full"})
		return
	}
	req, err := u.api.Deploy(r.Context(), env, mode)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	what := "Deploy"
	if mode == "full" {
		what = "Repair"
	}
	// The request's page follows it to its run.
	http.Redirect(w, r, c.flashURL(r, fmt.Sprintf("/console/env/%s/requests/%d", url.PathEscape(env), req.ID),
		fmt.Sprintf("%s requested (request %d).", what, req.ID)), http.StatusSeeOther)
}
