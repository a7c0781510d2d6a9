package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
)

// runRoutes are the pages of deploy runs.
func (c *Console) runRoutes(r chi.Router) {
	r.Get("/console/env/{env}/runs", c.runs)
	r.Get("/console/env/{env}/runs/{run}", c.run)
	r.Get("/console/env/{env}/runs/{run}/events", c.runEvents)
}

func (c *Console) runs(w http.ResponseWriter, r *http.Request) {
	env := chi.URLParam(r, "env")
	list, err := envList[client.DeployRun](r, "runs", 50)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "runs", page{Title: "Runs of " + env, Env: env, Data: list})
}

// runData is one run's page.
type runData struct {
	Run client.DeployRun `json:"run"`
	// Workflow is the run's workflow in the Temporal UI ("" without one).
	Workflow string `json:"workflow"`
	Done     bool   `json:"done"`
	Percent  int    `json:"percent"`
	// Failures are the run's attempts that did not deploy, newest first
	// (the page's, not the event stream's); Before is the cursor they
	// start from, FailuresNext that of the older ones.
	Failures     []client.Action `json:"-"`
	Before       string          `json:"-"`
	FailuresNext string          `json:"-"`
}

// notDeployed are the results of an attempt that did not deploy.
var notDeployed = []string{"failed", "skipped", "skipped_for_dependency", "unavailable"}

// failuresPage is how many of a run's failures its page lists at once.
const failuresPage = 100

// runNumber is the {run} of the path, a positive whole number.
func runNumber(r *http.Request) (int64, bool) {
	n, err := strconv.ParseInt(chi.URLParam(r, "run"), 10, 64)
	return n, err == nil && n > 0
}

func (c *Console) getRun(r *http.Request, env string, n int64) (client.DeployRun, error) {
	return userOf(r).api.Run(r.Context(), env, n)
}

func (c *Console) runPage(run client.DeployRun) runData {
	d := runData{Run: run, Done: run.FinishedAt != nil}
	if run.Total > 0 {
		d.Percent = 100 * (run.Deployed + run.Failed + run.Skipped + run.Unavailable) / run.Total
	}
	if c.opts.TemporalUI != "" && run.WorkflowID != "" {
		d.Workflow = strings.TrimRight(c.opts.TemporalUI, "/") + "/namespaces/" + url.PathEscape(c.opts.Namespace) +
			"/workflows/" + url.PathEscape(run.WorkflowID)
	}
	return d
}

func (c *Console) run(w http.ResponseWriter, r *http.Request) {
	env := chi.URLParam(r, "env")
	n, ok := runNumber(r)
	if !ok {
		c.render(w, r, http.StatusBadRequest, "error", page{Title: "Bad request", Env: env,
			Error: fmt.Sprintf("run %q is not a positive whole number", chi.URLParam(r, "run"))})
		return
	}
	run, err := c.getRun(r, env, n)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := c.runPage(run)
	if before := r.URL.Query().Get("before"); run.Failed+run.Skipped+run.Unavailable > 0 || before != "" {
		if before != "" {
			if _, err := positive("cursor", before); err != nil {
				c.invalid(w, r, http.StatusBadRequest, err)
				return
			}
		}
		d.Before = before
		d.Failures, d.FailuresNext, err = userOf(r).api.Actions(r.Context(), env,
			client.ActionQuery{Run: n, Results: notDeployed, Before: before, Limit: failuresPage})
		if err != nil {
			c.fail(w, r, err)
			return
		}
	}
	c.render(w, r, http.StatusOK, "run", page{Title: fmt.Sprintf("Run %d of %s", n, env), Env: env, Data: d})
}

// runEvents streams the run's progress (stream): "progress" whenever it
// changes, "end" once it finished.
func (c *Console) runEvents(w http.ResponseWriter, r *http.Request) {
	env := chi.URLParam(r, "env")
	n, ok := runNumber(r)
	if !ok {
		http.Error(w, "run is not a positive whole number", http.StatusBadRequest)
		return
	}
	c.stream(w, r, func(r *http.Request) (any, bool, error) {
		run, err := c.getRun(r, env, n)
		return c.runPage(run), run.FinishedAt != nil, err
	})
}
