package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The bodies of the requests the typed helpers send. Do takes any other
// body of docs/api.md as a value that encodes to it (a map will do).

// DeployRequest is the body of POST .../deploy.
type DeployRequest struct {
	// Mode is "incremental" (deploy what is not compliant) or "full"
	// (repair: re-verify everything in scope).
	Mode string `json:"mode"`
	// Agents and ResourceIDs narrow the scope; empty is everything.
	Agents      []string `json:"agents,omitempty"`
	ResourceIDs []string `json:"resource_ids,omitempty"`
}

// NewEnvironment is the body of POST /api/v1/environments.
type NewEnvironment struct {
	// Project is the project's name or id; it must exist (EnsureProject).
	Project     string `json:"project"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Settings holds the settings that differ from the defaults, by
	// their JSON names (Settings' tags), such as "auto_deploy": false.
	Settings map[string]any `json:"settings,omitempty"`
}

// DryrunRequest is the body of POST .../dryrun.
type DryrunRequest struct {
	// Version to dry-run; 0: the released one.
	Version int64 `json:"version,omitempty"`
	// Agents and ResourceIDs narrow the scope; empty is everything.
	Agents      []string `json:"agents,omitempty"`
	ResourceIDs []string `json:"resource_ids,omitempty"`
}

// NewToken is the body of POST /api/v1/tokens.
type NewToken struct {
	Name string `json:"name"`
	// Role is "read", "author", "operator", "admin" or "executor"
	// (docs/security.md).
	Role string `json:"role"`
	// Environments limits the token to these environments (ids or
	// names); empty: every environment.
	Environments []string `json:"environments,omitempty"`
	// Agents limits an executor token to these agents.
	Agents []string `json:"agents,omitempty"`
	// ExpiresIn is a Go duration ("720h") or a number of seconds; empty:
	// the token does not expire.
	ExpiresIn json.RawMessage `json:"expires_in,omitempty"`
}

// CreateEnvironment creates an environment.
func (c *Client) CreateEnvironment(ctx context.Context, body NewEnvironment) (Environment, error) {
	var e Environment
	err := c.Do(ctx, http.MethodPost, "/api/v1/environments", body, &e)
	return e, err
}

// RequestDryrun starts a dry-run; read its results with Dryrun.
func (c *Client) RequestDryrun(ctx context.Context, env string, body DryrunRequest) (DeployRun, error) {
	var r DeployRun
	err := c.Do(ctx, http.MethodPost, EnvPath(env, "dryrun"), body, &r)
	return r, err
}

// Dryrun returns a dry-run's progress and its first page of results (up
// to 1000; follow Next with ?after= through Do for more).
func (c *Client) Dryrun(ctx context.Context, env string, run int64) (Dryrun, error) {
	var d Dryrun
	err := c.Do(ctx, http.MethodGet, EnvPath(env, "dryrun", strconv.FormatInt(run, 10)), nil, &d)
	return d, err
}

// CreateToken creates an API token; the answer holds its secret, shown
// this once.
func (c *Client) CreateToken(ctx context.Context, body NewToken) (CreatedToken, error) {
	var t CreatedToken
	err := c.Do(ctx, http.MethodPost, "/api/v1/tokens", body, &t)
	return t, err
}

// listAll fetches every page of a list endpoint ({"items", "next"},
// next going back as ?after=) and decodes its items.
func listAll[T any](ctx context.Context, c *Client, path string, query url.Values) ([]T, error) {
	raw, err := c.List(ctx, path, query, "after", 0)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			return nil, fmt.Errorf("GET %s: decode item %d: %w", path, i, err)
		}
	}
	return out, nil
}

// Tokens returns every API token (revoked ones too with revoked), newest
// first, never their secrets; it follows the pages of GET /api/v1/tokens.
func (c *Client) Tokens(ctx context.Context, revoked bool) ([]Token, error) {
	q := url.Values{}
	if revoked {
		q.Set("revoked", "true")
	}
	return listAll[Token](ctx, c, "/api/v1/tokens", q)
}

// Agents returns every agent of the environment with the executors
// serving it, by name; it follows the pages of GET .../agents.
func (c *Client) Agents(ctx context.Context, env string) ([]Agent, error) {
	return listAll[Agent](ctx, c, EnvPath(env, "agents"), nil)
}

// Executors returns every executor registered with the environment, by
// name; it follows the pages of GET .../executors.
func (c *Client) Executors(ctx context.Context, env string) ([]Executor, error) {
	return listAll[Executor](ctx, c, EnvPath(env, "executors"), nil)
}

// Callbacks returns every LSM callback of the environment, oldest first;
// it follows the pages of GET /lsm/v1/callbacks.
func (c *Client) Callbacks(ctx context.Context, env string) ([]Callback, error) {
	return listAll[Callback](ctx, c.lsm(env), "/lsm/v1/callbacks", nil)
}

// ActionQuery filters the action log (GET .../actions); the zero value
// is the newest page of every action.
type ActionQuery struct {
	// Resource keeps one resource's actions.
	Resource string
	// Action is deploy, repair or dryrun.
	Action string
	// Results keeps the actions with any of these results ("failed",
	// "skipped", "skipped_for_dependency", "unavailable", "deployed").
	Results []string
	// Run keeps the actions of one deploy run or dry-run (its number).
	Run int64
	// Before is the cursor: the Next of the previous page.
	Before string
	// Limit is the page's size (the server's default when 0).
	Limit int
}

// Actions returns one page of the environment's action log, newest
// first, and the cursor of the next ("" at the end).
func (c *Client) Actions(ctx context.Context, env string, q ActionQuery) ([]Action, string, error) {
	v := url.Values{}
	for k, s := range map[string]string{"resource": q.Resource, "action": q.Action, "before": q.Before,
		"result": strings.Join(q.Results, ",")} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Run > 0 {
		v.Set("run", strconv.FormatInt(q.Run, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := EnvPath(env, "actions")
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var page struct {
		Items []Action `json:"items"`
		Next  string   `json:"next"`
	}
	err := c.Do(ctx, http.MethodGet, path, nil, &page)
	return page.Items, page.Next, err
}
