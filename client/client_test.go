package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
)

func TestClientSendsToken(t *testing.T) {
	t.Parallel()
	cases := []struct {
		why   string
		token string
		want  string
	}{
		{"a token goes as a bearer token", "s3cret", "Bearer s3cret"},
		{"no token, no header", "", ""},
	}
	for _, tc := range cases {
		var got string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = r.Header.Get("Authorization")
			w.Write([]byte(`{}`))
		}))
		c := New(srv.URL)
		c.Token = tc.token
		err := c.Do(context.Background(), http.MethodGet, "/api/v1/projects", nil, nil)
		srv.Close()
		if err != nil || got != tc.want {
			t.Errorf("%s: Authorization %q, %v; want %q", tc.why, got, err, tc.want)
		}
	}
}

func TestClientUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String()
	l.Close() // nothing listens there now

	err = New(base).Do(context.Background(), http.MethodGet, "/healthz", nil, nil)
	var ue *UnreachableError
	if !errors.As(err, &ue) || ue.Base != base {
		t.Fatalf("closed port: %v (%T), want an *UnreachableError naming %s", err, err, base)
	}

	// A cancelled request is the caller's doing, not the server's absence.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = New(base).Do(ctx, http.MethodGet, "/healthz", nil, nil)
	if err == nil || errors.As(err, &ue) {
		t.Fatalf("cancelled: %v, want an error that is not *UnreachableError", err)
	}
}

func TestClientProblem(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		w.Write([]byte(`{"type":"urn:intend:problem:validation","title":"Validation failed","status":422,` +
			`"detail":"the settings are invalid","errors":[{"field":"/settings/nope","detail":"unknown setting"}],` +
			`"trace_id":"0af7651916cd43dd8448eb211c80319c"}`))
	}))
	defer srv.Close()
	err := New(srv.URL).Do(context.Background(), http.MethodPatch, "/api/v1/environments/x", map[string]any{}, nil)
	var p *Problem
	if !errors.As(err, &p) || p.Status != 422 || p.Type != TypeValidation || len(p.Errors) != 1 ||
		p.Errors[0].Field != "/settings/nope" || p.TraceID != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("got %v, want the 422 problem with its field error and trace id", err)
	}
	if !IsValidation(err) || IsNotFound(err) {
		t.Errorf("IsValidation %v, IsNotFound %v; want true, false", IsValidation(err), IsNotFound(err))
	}
}

// TestClientAllFollowsCursors: All passes each page's next back as the
// cursor parameter, keeps the query, stops at the last page or at the
// limit, and keeps the first page's other members.
func TestClientAllFollowsCursors(t *testing.T) {
	t.Parallel()
	const total = 7
	var queries []url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		queries = append(queries, q)
		after, _ := strconv.Atoi(q.Get("after"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		page := map[string]any{"version": 3}
		var items []int
		for i := after + 1; i <= total && len(items) < limit; i++ {
			items = append(items, i)
		}
		page["resources"] = items
		if len(items) == limit {
			page["next"] = strconv.Itoa(items[len(items)-1])
		}
		json.NewEncoder(w).Encode(page)
	}))
	defer srv.Close()
	c := New(srv.URL)

	cases := []struct {
		why   string
		limit int
		want  int
		pages int
	}{
		{"every page", 0, total, 3},
		{"stops at the limit", 4, 4, 2},
	}
	for _, tc := range cases {
		queries = nil
		p, err := c.All(context.Background(), "/v", url.Values{"limit": {"3"}, "x": {"y"}}, "resources", "after", tc.limit)
		if err != nil {
			t.Fatalf("%s: %v", tc.why, err)
		}
		if len(p.Items) != tc.want || len(queries) != tc.pages {
			t.Errorf("%s: %d items in %d requests, want %d in %d", tc.why, len(p.Items), len(queries), tc.want, tc.pages)
		}
		for i, it := range p.Items {
			if string(it) != strconv.Itoa(i+1) {
				t.Errorf("%s: item %d is %s", tc.why, i, it)
			}
		}
		for _, q := range queries {
			if q.Get("x") != "y" || q.Get("limit") != "3" {
				t.Errorf("%s: query %v lost the caller's parameters", tc.why, q)
			}
		}
		if string(p.Head["version"]) != "3" || p.Head["resources"] != nil || p.Head["next"] != nil {
			t.Errorf("%s: head %v, want the first page without items and cursor", tc.why, p.Head)
		}
	}
}

func TestClientEnvPathEscapes(t *testing.T) {
	t.Parallel()
	got := EnvPath("prod", "resources", "fs::File[web1,path=/etc/motd]", "actions")
	want := "/api/v1/environments/prod/resources/fs::File%5Bweb1%2Cpath=%2Fetc%2Fmotd%5D/actions"
	if got != want {
		t.Errorf("EnvPath = %s, want %s", got, want)
	}
}
