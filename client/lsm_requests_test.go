package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/intendhq/intend/client"
)

// TestLSMHelpers: each /lsm helper sends its method, path (escaped),
// environment header and body, and decodes the instance answered.
func TestLSMHelpers(t *testing.T) {
	t.Parallel()
	type seen struct{ method, path, env, body string }
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = seen{r.Method, r.URL.RequestURI(), r.Header.Get("X-Intend-Environment"), string(b)}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"i1","service_entity":"vm","state":"up","version":7}`)
	}))
	defer srv.Close()
	c := client.New(srv.URL)
	ctx := context.Background()
	attrs := map[string]any{"name": "web", "memory": 4}
	for _, tc := range []struct {
		name string
		call func() (client.ServiceInstance, error)
		want seen
	}{
		{"create", func() (client.ServiceInstance, error) {
			return c.CreateInstance(ctx, "prod", "vm", client.CreateInstanceRequest{Attributes: attrs, EntityVersion: 2})
		}, seen{"POST", "/lsm/v1/service_inventory/vm", "prod", `{"attributes":{"memory":4,"name":"web"},"service_entity_version":2}`}},
		{"update", func() (client.ServiceInstance, error) {
			return c.UpdateInstance(ctx, "prod", "vm", "web 1", client.UpdateInstanceRequest{CurrentVersion: 6, Attributes: attrs})
		}, seen{"PATCH", "/lsm/v1/service_inventory/vm/web%201", "prod", `{"current_version":6,"attributes":{"memory":4,"name":"web"}}`}},
		{"set state", func() (client.ServiceInstance, error) {
			return c.SetInstanceState(ctx, "prod", "vm", "web", client.SetStateRequest{CurrentVersion: 6, TargetState: "creating"})
		}, seen{"POST", "/lsm/v1/services/vm/web/state", "prod", `{"current_version":6,"target_state":"creating"}`}},
		{"delete", func() (client.ServiceInstance, error) { return c.DeleteInstance(ctx, "prod", "vm", "web", 6) },
			seen{"DELETE", "/lsm/v1/service_inventory/vm/web?current_version=6", "prod", ""}},
		{"read", func() (client.ServiceInstance, error) {
			v, err := c.Instance(ctx, "prod", "vm", "web")
			return v.ServiceInstance, err
		}, seen{"GET", "/lsm/v1/service_inventory/vm/web", "prod", ""}},
	} {
		inst, err := tc.call()
		if err != nil || inst.ID != "i1" || inst.Version != 7 {
			t.Errorf("%s: %+v %v", tc.name, inst, err)
		}
		if got.method != tc.want.method || got.path != tc.want.path || got.env != tc.want.env || !sameJSON(got.body, tc.want.body) {
			t.Errorf("%s sent %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// sameJSON compares two JSON texts by value ("" for no body).
func sameJSON(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
