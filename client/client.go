package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to one server. Its fields may be set before first use; a
// Client is then safe for concurrent use.
type Client struct {
	Base string // e.g. http://127.0.0.1:8888
	HTTP *http.Client
	// Token, when not empty, is sent with every request as
	// "Authorization: Bearer <Token>".
	Token string
	// Header holds extra headers sent with every request (WithHeader).
	Header http.Header
	// MaxPoll is the longest pause of WaitRequest between two looks
	// (default 500 ms: light on a server during long runs). Benchmarks
	// set it low, so that the poll does not add to what they measure.
	MaxPoll time.Duration
}

// UnreachableError is a request that got no response because the server
// could not be reached: the connection was refused or reset, the name did
// not resolve, or the request timed out.
type UnreachableError struct {
	Base string // the server's base URL
	Err  error  // what the network said
}

// Error says which server could not be reached, and why.
func (e *UnreachableError) Error() string {
	return "cannot reach the intend server at " + e.Base + ": " + e.Err.Error()
}

// Unwrap returns the network's error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// unreachable wraps a transport error as *UnreachableError when it is a
// network failure. A cancelled ctx is the caller's doing and other
// transport errors (a TLS certificate that does not verify, a malformed
// URL) are not about reachability: both stay as they are.
func (c *Client) unreachable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	inner := err
	var ue *url.Error
	if errors.As(err, &ue) {
		inner = ue.Err
	}
	var ne net.Error
	if errors.As(inner, &ne) {
		return &UnreachableError{Base: c.Base, Err: inner}
	}
	return err
}

// WithHeader returns a copy of c that also sends the header k: v (the
// /lsm API's X-Intend-Environment, for one).
func (c *Client) WithHeader(k, v string) *Client {
	cc := *c
	cc.Header = c.Header.Clone()
	if cc.Header == nil {
		cc.Header = http.Header{}
	}
	cc.Header.Set(k, v)
	return &cc
}

// New returns a client for the server at base.
func New(base string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), HTTP: &http.Client{Timeout: 5 * time.Minute}}
}

// Do sends a request with an optional JSON body (raw []byte is sent as it
// is) and decodes a JSON response into out (when not nil).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	var size int64
	contentType := "application/json"
	if raw, ok := body.(Raw); ok {
		body, contentType = raw.Body, raw.ContentType
	}
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				return err
			}
		}
		rd, size = bytes.NewReader(b), int64(len(b))
	}
	resp, err := c.send(ctx, method, path, rd, size, contentType)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		var p Problem
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
func (c *Client) EnsureProject(ctx context.Context, name string) (Project, error) {
	var p Project
	err := c.Do(ctx, http.MethodPost, "/api/v1/projects", map[string]string{"name": name}, &p)
	if IsConflict(err) {
		var l struct{ Items []Project }
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
func (c *Client) EnsureEnvironment(ctx context.Context, project, name string) (Environment, error) {
	var e Environment
	err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+url.PathEscape(name), nil, &e)
	if IsNotFound(err) {
		err = c.Do(ctx, http.MethodPost, "/api/v1/environments",
			map[string]string{"project": project, "name": name}, &e)
	}
	return e, err
}

// ExportVersion uploads a version body (JSON {"resources": [...]}).
func (c *Client) ExportVersion(ctx context.Context, env string, body []byte) (VersionInfo, error) {
	var v VersionInfo
	err := c.Do(ctx, http.MethodPut, "/api/v1/environments/"+url.PathEscape(env)+"/versions", body, &v)
	return v, err
}

// Release releases a version.
func (c *Client) Release(ctx context.Context, env string, version int64) (Release, error) {
	var r Release
	err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/environments/%s/versions/%d/release",
		url.PathEscape(env), version), nil, &r)
	return r, err
}

// Environment returns an environment by name or id.
func (c *Client) Environment(ctx context.Context, env string) (Environment, error) {
	var e Environment
	err := c.Do(ctx, http.MethodGet, EnvPath(env), nil, &e)
	return e, err
}

// Rollback releases a new version that copies version (docs/api.md).
func (c *Client) Rollback(ctx context.Context, env string, version int64) (Rollback, error) {
	var r Rollback
	err := c.Do(ctx, http.MethodPost, EnvPath(env, "versions", strconv.FormatInt(version, 10), "rollback"), nil, &r)
	return r, err
}

// Whoami tells who the client's token is.
func (c *Client) Whoami(ctx context.Context) (Whoami, error) {
	var w Whoami
	err := c.Do(ctx, http.MethodGet, "/api/v1/whoami", nil, &w)
	return w, err
}

// Run returns a deploy run.
func (c *Client) Run(ctx context.Context, env string, run int64) (DeployRun, error) {
	var r DeployRun
	err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/environments/%s/runs/%d", url.PathEscape(env), run), nil, &r)
	return r, err
}

// Resources returns one page of resources.
func (c *Client) Resources(ctx context.Context, env string, query url.Values) ([]ResourceState, string, error) {
	var l struct {
		Items []ResourceState
		Next  string
	}
	err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+url.PathEscape(env)+"/resources?"+query.Encode(), nil, &l)
	return l.Items, l.Next, err
}

// Request returns a deploy request.
func (c *Client) Request(ctx context.Context, env string, id int64) (Request, error) {
	var r Request
	err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/environments/%s/requests/%d", url.PathEscape(env), id), nil, &r)
	return r, err
}

// Deploy queues a deploy ("incremental") or repair ("full").
func (c *Client) Deploy(ctx context.Context, env, mode string) (Request, error) {
	return c.RequestDeploy(ctx, env, DeployRequest{Mode: mode})
}

// WaitRequest waits until the scheduler took a request into a run and that
// run ended, calling progress (when not nil) with every new state of the
// run. It returns the run.
func (c *Client) WaitRequest(ctx context.Context, env string, id int64, timeout time.Duration,
	progress func(DeployRun)) (DeployRun, error) {
	deadline := time.Now().Add(timeout)
	poll := 20 * time.Millisecond
	var last DeployRun
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
		case <-time.After(poll):
		}
		// Quick for short runs, light on the server for long ones.
		longest := c.MaxPoll
		if longest <= 0 {
			longest = maxPoll
		}
		poll = min(2*poll, longest)
	}
}

// maxPoll is the default longest pause of WaitRequest between two looks.
const maxPoll = 500 * time.Millisecond

// EnvPath returns the API path of environment env (an id or a name), with
// segments appended, each escaped as one path segment (a resource id's
// '/', '[' and ']' included).
func EnvPath(env string, segments ...string) string {
	var b strings.Builder
	b.WriteString("/api/v1/environments/")
	b.WriteString(url.PathEscape(env))
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// Paged is what All fetched: the first page without its items and cursor,
// and the items of every page.
type Paged struct {
	// Head holds the first page's other members: for a version, its
	// fields; for a list, nothing.
	Head map[string]json.RawMessage
	// Items are the items of every page, in the server's order, as the
	// server sent them.
	Items []json.RawMessage
}

// All fetches a paginated endpoint page by page. Every page is a JSON
// object whose member key holds an array of items and whose "next" member,
// when present, is the cursor that goes back as the query parameter
// cursor ("after" or "before", see docs/api.md). It stops after the page
// on which it has limit items or more (limit <= 0: every page) and returns
// at most limit items. query is not modified.
func (c *Client) All(ctx context.Context, path string, query url.Values, key, cursor string, limit int) (Paged, error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	var out Paged
	for {
		p := path
		if len(q) > 0 {
			p += "?" + q.Encode()
		}
		var page map[string]json.RawMessage
		if err := c.Do(ctx, http.MethodGet, p, nil, &page); err != nil {
			return out, err
		}
		var items []json.RawMessage
		if raw, ok := page[key]; ok {
			if err := json.Unmarshal(raw, &items); err != nil {
				return out, fmt.Errorf("GET %s: decode %q: %w", p, key, err)
			}
		}
		var next string
		if raw, ok := page["next"]; ok {
			if err := json.Unmarshal(raw, &next); err != nil {
				return out, fmt.Errorf("GET %s: decode \"next\": %w", p, err)
			}
		}
		if out.Head == nil {
			delete(page, key)
			delete(page, "next")
			out.Head = page
		}
		out.Items = append(out.Items, items...)
		if limit > 0 && len(out.Items) >= limit {
			out.Items = out.Items[:limit]
			return out, nil
		}
		if next == "" || len(items) == 0 {
			return out, nil
		}
		q.Set(cursor, next)
	}
}

// List fetches every item of a list endpoint ({"items": [...], "next"}),
// following cursors as All does.
func (c *Client) List(ctx context.Context, path string, query url.Values, cursor string, limit int) ([]json.RawMessage, error) {
	p, err := c.All(ctx, path, query, "items", cursor, limit)
	return p.Items, err
}

// Raw is a request body that is not JSON, sent as it is with its type.
type Raw struct {
	ContentType string
	Body        []byte
}

// RequestDeploy queues a user deploy or repair of a scope.
func (c *Client) RequestDeploy(ctx context.Context, env string, body DeployRequest) (Request, error) {
	var r Request
	err := c.Do(ctx, http.MethodPost, EnvPath(env, "deploy"), body, &r)
	return r, err
}
