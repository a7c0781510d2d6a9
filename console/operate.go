package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
)

// An operator's buttons beyond Deploy and Repair: halt and resume the
// environment, pause and unpause an agent, deploy or repair one
// resource; and the confirmation every destructive button asks for.

// operateRoutes are the operator's forms.
func (c *Console) operateRoutes(r chi.Router) {
	r.Post("/console/env/{env}/halt", c.halt(true))
	r.Post("/console/env/{env}/resume", c.halt(false))
	r.Post("/console/env/{env}/agents/pause", c.pause(true))
	r.Post("/console/env/{env}/agents/unpause", c.pause(false))
	r.Post("/console/env/{env}/resource/deploy", c.deployResource)
}

// confirmField is a field the confirmation page posts again.
type confirmField struct{ Name, Value string }

// confirmData is the confirmation page's: the question, the form posted
// again (to the same address, with confirm=yes) and where Cancel goes.
type confirmData struct {
	Question, Detail string
	Action           string
	Fields           []confirmField
	Button           string
	Cancel           string
}

// confirmed reports whether a destructive form came confirmed
// (confirm=yes). When not, it shows a page that asks, whose button posts
// the same form again, confirmed, with the user's anti-forgery token: a
// confirmation that needs no script. The form's token was checked
// before (c.form); the page carries a fresh one.
func (c *Console) confirmed(w http.ResponseWriter, r *http.Request, question, detail, button, cancel string) bool {
	if r.PostFormValue("confirm") == "yes" {
		return true
	}
	d := confirmData{Question: question, Detail: detail, Action: r.URL.EscapedPath(), Button: button, Cancel: cancel}
	for _, k := range slices.Sorted(maps.Keys(r.PostForm)) {
		if k == "csrf" || k == "confirm" {
			continue
		}
		for _, v := range r.PostForm[k] {
			d.Fields = append(d.Fields, confirmField{k, v})
		}
	}
	c.render(w, r, http.StatusOK, "confirm", page{Title: question, Env: chi.URLParam(r, "env"), Data: d})
	return false
}

// halt halts (or resumes) the environment: POST .../halt or .../resume.
// Halting stops every deploy, so it asks first.
func (c *Console) halt(halted bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, env := userOf(r), chi.URLParam(r, "env")
		if !c.form(w, r) {
			return
		}
		back := "/console/env/" + url.PathEscape(env)
		verb, done := "resume", "resumed: deploys go on"
		if halted {
			verb, done = "halt", "halted: nothing deploys until it is resumed"
			if !c.confirmed(w, r, "Halt environment "+env+"?",
				"Halting stops every deploy, repair and retry of the environment (runs in flight stop after their current batches) until it is resumed.",
				"Halt "+env, back) {
				return
			}
		}
		if err := u.api.Do(r.Context(), http.MethodPost, client.EnvPath(env, verb), nil, nil); err != nil {
			c.fail(w, r, err)
			return
		}
		http.Redirect(w, r, c.flashURL(r, back, "Environment "+env+" "+done+"."), http.StatusSeeOther)
	}
}

// pause pauses (or unpauses) the agent the form names. Pausing stops its
// deploys, so it asks first.
func (c *Console) pause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, env := userOf(r), chi.URLParam(r, "env")
		if !c.form(w, r) {
			return
		}
		back := "/console/env/" + url.PathEscape(env) + "#agents"
		verb, done := "unpause", "unpaused"
		if paused {
			verb, done = "pause", "paused: its resources are not deployed until it is unpaused"
		}
		agent := r.PostFormValue("agent")
		if agent == "" {
			c.invalid(w, r, http.StatusUnprocessableEntity, fmt.Errorf("name the agent to %s", verb))
			return
		}
		if paused {
			if !c.confirmed(w, r, "Pause agent "+agent+"?",
				"Its resources are neither deployed nor repaired until it is unpaused; the other agents go on.",
				"Pause "+agent, back) {
				return
			}
		}
		if err := u.api.Do(r.Context(), http.MethodPost, client.EnvPath(env, "agents", agent, verb), nil, nil); err != nil {
			c.fail(w, r, err)
			return
		}
		http.Redirect(w, r, c.flashURL(r, "/console/env/"+url.PathEscape(env), "Agent "+agent+" "+done+"."), http.StatusSeeOther)
	}
}

// deployResource deploys (mode incremental) or repairs (full) the one
// resource the form names, then follows the request as Deploy does.
func (c *Console) deployResource(w http.ResponseWriter, r *http.Request) {
	u, env := userOf(r), chi.URLParam(r, "env")
	if !c.form(w, r) {
		return
	}
	id, mode := r.PostFormValue("id"), r.PostFormValue("mode")
	switch {
	case id == "":
		c.invalid(w, r, http.StatusUnprocessableEntity, fmt.Errorf("name the resource to deploy"))
		return
	case mode != "incremental" && mode != "full":
		c.invalid(w, r, http.StatusUnprocessableEntity, fmt.Errorf("mode must be incremental or full"))
		return
	}
	req, err := u.api.RequestDeploy(r.Context(), env, client.DeployRequest{Mode: mode, ResourceIDs: []string{id}})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	what := "Deploy"
	if mode == "full" {
		what = "Repair"
	}
	http.Redirect(w, r, c.flashURL(r, fmt.Sprintf("/console/env/%s/requests/%d", url.PathEscape(env), req.ID),
		fmt.Sprintf("%s of %s requested (request %d).", what, id, req.ID)), http.StatusSeeOther)
}

func init() {
	// runTrouble says what did not deploy in a run ("" when all did).
	funcs["runTrouble"] = func(r client.DeployRun) string {
		var parts []string
		for _, p := range []struct {
			n    int
			what string
		}{{r.Failed, "failed"}, {r.Skipped, "skipped"}, {r.Unavailable, "without an executor"}} {
			if p.n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
			}
		}
		return strings.Join(parts, ", ")
	}
	// changes are an action record's changes, attribute by attribute,
	// text of several lines as a unified diff (as intend resource logs
	// prints them).
	funcs["changes"] = changesOf
	// problems reads compile errors (a validation's, a log entry's) as a
	// list, or keeps them as text when they are not one.
	funcs["problems"] = problemsOf
}

// problemList is compile errors as a page shows them: each problem, or
// the raw text when they do not read as problems.
type problemList struct {
	Items []compileError
	Raw   string
}

func problemsOf(raw json.RawMessage) *problemList {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" || s == "[]" {
		return nil
	}
	var p problemList
	if err := json.Unmarshal(raw, &p.Items); err != nil || len(p.Items) == 0 {
		var b bytes.Buffer
		if json.Indent(&b, raw, "", "  ") == nil {
			s = b.String()
		}
		return &problemList{Raw: s}
	}
	return &p
}
