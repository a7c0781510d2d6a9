// Package apiclient is a small client of intend's REST API, used by the CLI
// and the embedded deploy. Error responses come back as *api.Problem.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/store"
)

// Client talks to one server.
type Client struct {
	Base string // e.g. http://127.0.0.1:8888
	HTTP *http.Client
}

// New returns a client for the server at base.
func New(base string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), HTTP: &http.Client{Timeout: 5 * time.Minute}}
}

// Do sends a request with an optional JSON body (raw []byte is sent as it
// is) and decodes a JSON response into out (when not nil).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				return err
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		var p api.Problem
		if json.Unmarshal(data, &p) == nil && p.Type != "" {
			return &p
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode response: %w", method, path, err)
		}
	}
	return nil
}

// EnsureProject returns the named project, creating it when missing.
func (c *Client) EnsureProject(ctx context.Context, name string) (store.Project, error) {
	var p store.Project
	err := c.Do(ctx, http.MethodPost, "/api/v1/projects", map[string]string{"name": name}, &p)
	if prob, ok := err.(*api.Problem); ok && prob.Status == http.StatusConflict {
		var l struct{ Items []store.Project }
		if err := c.Do(ctx, http.MethodGet, "/api/v1/projects", nil, &l); err != nil {
			return p, err
		}
		for _, x := range l.Items {
			if x.Name == name {
				return x, nil
			}
		}
	}
	return p, err
}

// EnsureEnvironment returns the named environment, creating it in project
// when missing.
func (c *Client) EnsureEnvironment(ctx context.Context, project, name string) (store.Environment, error) {
	var e store.Environment
	err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+url.PathEscape(name), nil, &e)
	if prob, ok := err.(*api.Problem); ok && prob.Status == http.StatusNotFound {
		err = c.Do(ctx, http.MethodPost, "/api/v1/environments",
			map[string]string{"project": project, "name": name}, &e)
	}
	return e, err
}

// ExportVersion uploads a version body (JSON {"resources": [...]}).
func (c *Client) ExportVersion(ctx context.Context, env string, body []byte) (store.VersionInfo, error) {
	var v store.VersionInfo
	err := c.Do(ctx, http.MethodPut, "/api/v1/environments/"+url.PathEscape(env)+"/versions", body, &v)
	return v, err
}

// Release releases a version.
func (c *Client) Release(ctx context.Context, env string, version int64) (store.Release, error) {
	var r store.Release
	err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/environments/%s/versions/%d/release",
		url.PathEscape(env), version), nil, &r)
	return r, err
}

// Run returns a deploy run.
func (c *Client) Run(ctx context.Context, env string, run int64) (store.DeployRun, error) {
	var r store.DeployRun
	err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/environments/%s/runs/%d", url.PathEscape(env), run), nil, &r)
	return r, err
}

// Resources returns one page of resources.
func (c *Client) Resources(ctx context.Context, env string, query url.Values) ([]store.ResourceState, string, error) {
	var l struct {
		Items []store.ResourceState
		Next  string
	}
	err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+url.PathEscape(env)+"/resources?"+query.Encode(), nil, &l)
	return l.Items, l.Next, err
}

// Request returns a deploy request.
func (c *Client) Request(ctx context.Context, env string, id int64) (store.Request, error) {
	var r store.Request
	err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/environments/%s/requests/%d", url.PathEscape(env), id), nil, &r)
	return r, err
}

// Deploy queues a deploy ("incremental") or repair ("full").
func (c *Client) Deploy(ctx context.Context, env, mode string) (store.Request, error) {
	var r store.Request
	err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+url.PathEscape(env)+"/deploy",
		map[string]string{"mode": mode}, &r)
	return r, err
}

// WaitRequest waits until the scheduler took a request into a run and that
// run ended, calling progress (when not nil) with every new state of the
// run. It returns the run.
func (c *Client) WaitRequest(ctx context.Context, env string, id int64, timeout time.Duration,
	progress func(store.DeployRun)) (store.DeployRun, error) {
	deadline := time.Now().Add(timeout)
	var last store.DeployRun
	for {
		req, err := c.Request(ctx, env, id)
		if err != nil {
			return last, err
		}
		if req.Run != nil && *req.Run == 0 {
			return last, nil // an automatic request that had nothing to do
		}
		if req.Run != nil {
			r, err := c.Run(ctx, env, *req.Run)
			if err != nil {
				return last, err
			}
			if progress != nil && r != last {
				progress(r)
			}
			last = r
			switch r.Status {
			case "done", "failed":
				return r, nil
			}
			// A preempted run puts the request back; keep waiting.
		}
		if time.Now().After(deadline) {
			return last, fmt.Errorf("deploy request %d not done after %s (run %+v)", id, timeout, last)
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
