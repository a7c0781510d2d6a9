package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHelpersSendAndDecode: each typed helper sends its method, path and
// body, and decodes the answer into its wire type.
func TestHelpersSendAndDecode(t *testing.T) {
	t.Parallel()
	type sent struct{ method, path, body string }
	cases := []struct {
		why    string
		answer string
		call   func(*Client) (any, error)
		want   sent
		check  func(any) bool
	}{
		{"create an environment: the settings given, nothing empty",
			`{"id":"e1","name":"prod","settings":{"auto_deploy":false,"autostart_agents":null}}`,
			func(c *Client) (any, error) {
				return c.CreateEnvironment(context.Background(), NewEnvironment{Project: "p", Name: "prod",
					Settings: map[string]any{"auto_deploy": false}})
			},
			sent{"POST", "/api/v1/environments", `{"project":"p","name":"prod","settings":{"auto_deploy":false}}`},
			func(v any) bool { e := v.(Environment); return e.ID == "e1" && !e.Settings.AutoDeploy }},
		{"a dry-run of the released version sends no version",
			`{"run":4,"action":"dryrun","status":"queued"}`,
			func(c *Client) (any, error) {
				return c.RequestDryrun(context.Background(), "prod", DryrunRequest{Agents: []string{"web"}})
			},
			sent{"POST", "/api/v1/environments/prod/dryrun", `{"agents":["web"]}`},
			func(v any) bool { r := v.(DeployRun); return r.Run == 4 && r.Action == "dryrun" }},
		{"a dry-run's results",
			`{"run":4,"status":"done","results":[{"id":"fs::File[web,path=/a]","status":"changed"}],"next":"x"}`,
			func(c *Client) (any, error) { return c.Dryrun(context.Background(), "prod", 4) },
			sent{"GET", "/api/v1/environments/prod/dryrun/4", ""},
			func(v any) bool {
				d := v.(Dryrun)
				return d.Run == 4 && len(d.Results) == 1 && d.Results[0].Status == "changed" && d.Next == "x"
			}},
		{"a token: the secret comes back beside the token",
			`{"id":"t1","name":"ci","role":"author","token":"intend_s3cret"}`,
			func(c *Client) (any, error) {
				return c.CreateToken(context.Background(), NewToken{Name: "ci", Role: "author",
					ExpiresIn: json.RawMessage(`"720h"`)})
			},
			sent{"POST", "/api/v1/tokens", `{"name":"ci","role":"author","expires_in":"720h"}`},
			func(v any) bool { tk := v.(CreatedToken); return tk.ID == "t1" && tk.Secret == "intend_s3cret" }},
		{"a rollback posts to the version's rollback",
			`{"version":{"version":9},"changed":2,"deploy_request":{"id":5,"run":null},"rolled_back_from":8}`,
			func(c *Client) (any, error) { return c.Rollback(context.Background(), "prod", 7) },
			sent{"POST", "/api/v1/environments/prod/versions/7/rollback", ""},
			func(v any) bool {
				r := v.(Rollback)
				return r.Version.Version == 9 && r.Request != nil && r.Request.ID == 5 && r.From == 8
			}},
		{"the failures of a run: its number and the results, comma-separated",
			`{"items":[{"id":3,"resource_id":"fs::File[web,path=/a]","result":"failed","error":"boom"}],"next":"3"}`,
			func(c *Client) (any, error) {
				acts, next, err := c.Actions(context.Background(), "prod", ActionQuery{Run: 12,
					Results: []string{"failed", "skipped"}, Limit: 50})
				return struct {
					acts []Action
					next string
				}{acts, next}, err
			},
			sent{"GET", "/api/v1/environments/prod/actions?limit=50&result=failed%2Cskipped&run=12", ""},
			func(v any) bool {
				p := v.(struct {
					acts []Action
					next string
				})
				return len(p.acts) == 1 && p.acts[0].Result == "failed" && *p.acts[0].Error == "boom" && p.next == "3"
			}},
		{"whoami",
			`{"kind":"token","name":"ci","actor":"token:ci","role":"none","environments":{"prod":"author"}}`,
			func(c *Client) (any, error) { return c.Whoami(context.Background()) },
			sent{"GET", "/api/v1/whoami", ""},
			func(v any) bool { w := v.(Whoami); return w.Actor == "token:ci" && w.Environments["prod"] == "author" }},
	}
	for _, tc := range cases {
		var got sent
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			got = sent{r.Method, r.URL.Path, string(b)}
			if r.URL.RawQuery != "" {
				got.path += "?" + r.URL.RawQuery
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, tc.answer)
		}))
		v, err := tc.call(New(srv.URL))
		srv.Close()
		if err != nil {
			t.Errorf("%s: %v", tc.why, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s: sent %+v, want %+v", tc.why, got, tc.want)
		}
		if !tc.check(v) {
			t.Errorf("%s: decoded %+v", tc.why, v)
		}
	}
}
