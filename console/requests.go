package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
)

// requestRoutes follow a deploy or repair request to its run.
func (c *Console) requestRoutes(r chi.Router) {
	r.Get("/console/env/{env}/requests/{id}", c.request)
	r.Get("/console/env/{env}/requests/{id}/events", c.requestEvents)
}

// requestID is the {id} of the path, a positive whole number.
func requestID(r *http.Request) (int64, bool) {
	n, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	return n, err == nil && n > 0
}

// requestData is a request's page: Follow is its run's page once the
// scheduler took it into one.
type requestData struct {
	Request client.Request `json:"request"`
	Follow  string         `json:"follow,omitempty"`
	Nothing bool           `json:"nothing"`
}

func (c *Console) requestPage(env string, req client.Request) requestData {
	d := requestData{Request: req}
	if req.Run != nil {
		if *req.Run > 0 {
			d.Follow = fmt.Sprintf("/console/env/%s/runs/%d", url.PathEscape(env), *req.Run)
		} else {
			d.Nothing = true
		}
	}
	return d
}

// request shows a queued request, and sends the browser to its run once
// there is one.
func (c *Console) request(w http.ResponseWriter, r *http.Request) {
	u, env := userOf(r), chi.URLParam(r, "env")
	id, ok := requestID(r)
	if !ok {
		c.render(w, r, http.StatusBadRequest, "error", page{Title: "Bad request", Env: env,
			Error: fmt.Sprintf("request %q is not a positive whole number", chi.URLParam(r, "id"))})
		return
	}
	req, err := u.api.Request(r.Context(), env, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := c.requestPage(env, req)
	if d.Follow != "" {
		to := d.Follow
		if f := c.flashOf(r); f != "" {
			to = c.flashURL(r, to, f)
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "request", page{Title: fmt.Sprintf("Request %d of %s", id, env), Env: env, Data: d})
}

// requestEvents streams the request until the scheduler took it (stream).
func (c *Console) requestEvents(w http.ResponseWriter, r *http.Request) {
	u, env := userOf(r), chi.URLParam(r, "env")
	id, ok := requestID(r)
	if !ok {
		http.Error(w, "request is not a positive whole number", http.StatusBadRequest)
		return
	}
	c.stream(w, r, func(r *http.Request) (any, bool, error) {
		req, err := u.api.Request(r.Context(), env, id)
		return c.requestPage(env, req), req.Run != nil, err
	})
}
