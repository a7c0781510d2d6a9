package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/client"
)

// roundTrip fetches path and checks that the answer decodes into the wire
// type T with no member left over and encodes back to the same bytes: the
// route answers with T, not with a row or a view of its own that a Go
// client would decode only in part. (That T's JSON is what the route wrote
// before T existed is TestWireMatchesRows's and TestWireMatchesViews'.)
func roundTrip[T any](t *testing.T, c *client.Client, path string) T {
	t.Helper()
	var raw json.RawMessage
	if err := c.Do(context.Background(), http.MethodGet, path, nil, &raw); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	var v T
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("GET %s: decode into %T: %v\n%s", path, v, err, raw)
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, raw) {
		t.Errorf("GET %s: %T does not carry the answer as it was\nserver: %s\nwire:   %s", path, v, raw, again)
	}
	return v
}

// TestClientAgainstTheAPI drives the real handlers with package client:
// its typed helpers send what the routes take, its wire types carry what
// they answer, byte for byte, and refusals come back as typed problems.
func TestClientAgainstTheAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	ctx := context.Background()
	c := client.New(f.srv.URL)
	c.Token = f.token

	if _, err := c.EnsureProject(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnsureProject(ctx, "web"); err != nil {
		t.Fatalf("EnsureProject of an existing project: %v", err)
	}
	e, err := c.CreateEnvironment(ctx, client.NewEnvironment{Project: "web", Name: "prod",
		Settings: map[string]any{"repair_interval": 3600}})
	if err != nil || e.Name != "prod" || e.Settings.RepairInterval != 3600 || !e.Settings.AutoDeploy {
		t.Fatalf("CreateEnvironment = %+v, %v", e, err)
	}
	v1, err := c.ExportVersion(ctx, "prod", []byte(version(fileRes("/a"), fileRes("/b", "fs::File[h,path=/a]"))))
	if err != nil || v1.Version != 1 || v1.ResourceCount != 2 {
		t.Fatalf("ExportVersion = %+v, %v", v1, err)
	}
	rel, err := c.Release(ctx, "prod", 1)
	if err != nil || rel.Version.Version != 1 || rel.Request == nil || rel.Changed != 2 {
		t.Fatalf("Release = %+v, %v", rel, err)
	}
	if _, err := c.ExportVersion(ctx, "prod", []byte(version(fileRes("/c")))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Release(ctx, "prod", 2); err != nil {
		t.Fatal(err)
	}
	rb, err := c.Rollback(ctx, "prod", 1)
	if err != nil || rb.Version.Version != 3 || rb.From != 1 || rb.Request == nil {
		t.Fatalf("Rollback = %+v, %v", rb, err)
	}
	req, err := c.Request(ctx, "prod", rb.Request.ID)
	if err != nil || req.ID != rb.Request.ID || req.Kind != "deploy" {
		t.Fatalf("Request = %+v, %v", req, err)
	}
	rs, next, err := c.Resources(ctx, "prod", url.Values{"limit": {"1"}})
	if err != nil || len(rs) != 1 || next == "" {
		t.Fatalf("Resources = %+v, %q, %v", rs, next, err)
	}
	dr, err := c.RequestDryrun(ctx, "prod", client.DryrunRequest{})
	if err != nil || dr.Action != "dryrun" || dr.Version != 3 {
		t.Fatalf("RequestDryrun = %+v, %v", dr, err)
	}
	if d, err := c.Dryrun(ctx, "prod", dr.Run); err != nil || d.Run != dr.Run {
		t.Fatalf("Dryrun = %+v, %v", d, err)
	}

	// Every shape, as the server writes it.
	roundTrip[client.List[client.Project]](t, c, "/api/v1/projects")
	roundTrip[client.Environment](t, c, client.EnvPath("prod"))
	roundTrip[client.List[client.Environment]](t, c, "/api/v1/environments")
	roundTrip[client.List[client.VersionInfo]](t, c, client.EnvPath("prod", "versions"))
	roundTrip[client.Version](t, c, client.EnvPath("prod", "versions", "1"))
	roundTrip[client.VersionDiff](t, c, client.EnvPath("prod", "versions", "1", "diff", "2"))
	roundTrip[client.List[client.ResourceState]](t, c, client.EnvPath("prod", "resources"))
	roundTrip[client.Resource](t, c, client.EnvPath("prod", "resources", "fs::File[h,path=/a]"))
	roundTrip[client.Request](t, c, client.EnvPath("prod", "requests", "1"))
	roundTrip[client.Dryrun](t, c, client.EnvPath("prod", "dryrun", strconv.FormatInt(dr.Run, 10)))
	roundTrip[client.List[client.DeployRun]](t, c, client.EnvPath("prod", "runs"))
	roundTrip[client.List[client.Token]](t, c, "/api/v1/tokens")
	roundTrip[client.List[client.AuditEntry]](t, c, "/api/v1/audit")

	// A token made through the client names its holder.
	tok, err := c.CreateToken(ctx, client.NewToken{Name: "reader", Role: "read", Environments: []string{"prod"},
		ExpiresIn: json.RawMessage(`"1h"`)})
	if err != nil || tok.Secret == "" || tok.ExpiresAt == nil {
		t.Fatalf("CreateToken = %+v, %v", tok, err)
	}
	reader := client.New(f.srv.URL)
	reader.Token = tok.Secret
	who, err := reader.Whoami(ctx)
	if err != nil || who.Name != "reader" || who.Environments["prod"] != "read" {
		t.Fatalf("Whoami = %+v, %v", who, err)
	}

	// Refusals are typed: callers branch without reading text.
	problems := []struct {
		why      string
		err      error
		pred     func(error) bool
		wantType string
		field    string
	}{
		{"an unknown environment", func() error { _, err := c.Environment(ctx, "nope"); return err }(),
			client.IsNotFound, client.TypeNotFound, ""},
		{"an unknown setting names its pointer",
			func() error {
				_, err := c.CreateEnvironment(ctx, client.NewEnvironment{Project: "web", Name: "qa",
					Settings: map[string]any{"nope": 1}})
				return err
			}(),
			client.IsValidation, client.TypeValidation, "/settings/nope"},
		{"an existing environment", func() error {
			_, err := c.CreateEnvironment(ctx, client.NewEnvironment{Project: "web", Name: "prod"})
			return err
		}(), client.IsConflict, client.TypeConflict, ""},
		{"a reader may not release", func() error { _, err := reader.Release(ctx, "prod", 2); return err }(),
			client.IsForbidden, client.TypeForbidden, ""},
		{"no token", func() error { _, err := client.New(f.srv.URL).Whoami(ctx); return err }(),
			client.IsUnauthenticated, client.TypeUnauthenticated, ""},
	}
	for _, p := range problems {
		var prob *client.Problem
		if !errors.As(p.err, &prob) || !p.pred(p.err) || prob.Type != p.wantType {
			t.Errorf("%s: got %v, want a %s problem", p.why, p.err, p.wantType)
			continue
		}
		if p.field != "" && (len(prob.Errors) == 0 || prob.Errors[0].Field != p.field) {
			t.Errorf("%s: errors %+v, want one for %s", p.why, prob.Errors, p.field)
		}
	}
}
