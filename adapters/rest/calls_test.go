package rest_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/intendhq/intend/adapters"
)

// TestCallsPerAttempt counts the requests reaching RabbitMQ (through a
// recording reverse proxy in front of the real server) per attempt on a
// vhost: a create is a GET and a PUT, a no-op a GET, and a full update of
// an object whose URL its identity gives a GET and a PUT: the object is
// not read again before the PUT, since nothing of it goes into the body.
// Against an API 20 ms away, each call saved is 20 ms per resource.
func TestCallsPerAttempt(t *testing.T) {
	t.Parallel()
	target, err := url.Parse(rabbit(t).API())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []string
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method)
		mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	defer front.Close()
	vhost := uniq("calls")
	vh := func(description string) adapters.Resource {
		return object("vhost-"+vhost, rabbitAttrs(t, map[string]any{
			"endpoint": front.URL, // the proxy adds the API's path
			"path":     "/vhosts/" + vhost,
			"body":     map[string]any{"description": description},
		}))
	}
	step := func(r adapters.Resource, op adapters.Operation, want ...string) {
		t.Helper()
		mu.Lock()
		calls = nil
		mu.Unlock()
		mustApply(t, r, false, op)
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(calls, want) {
			t.Errorf("%s: requests %v, want %v", op, calls, want)
		}
	}
	step(vh("one"), adapters.OpCreate, "GET", "PUT")
	step(vh("one"), adapters.OpNone, "GET")
	step(vh("two"), adapters.OpUpdate, "GET", "PUT")
	step(purged(vh("two")), adapters.OpDelete, "GET", "DELETE")
}
