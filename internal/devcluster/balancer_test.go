package devcluster_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/intendhq/intend/internal/devcluster"
)

// TestBalancerReplicaHeader: requests go round robin, a request naming a
// replica in X-Intend-Replica goes to that one only, and every answer
// names the replica that gave it (the console's walk across replicas
// relies on it to make one replica render a form and the other take it).
func TestBalancerReplicaHeader(t *testing.T) {
	var backends []string
	for _, name := range []string{"one", "two"} {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(devcluster.ReplicaHeader) != "" {
				t.Errorf("%s got the balancer's own header", name)
			}
			_, _ = io.WriteString(w, name)
		}))
		t.Cleanup(s.Close)
		backends = append(backends, s.URL)
	}
	b, err := devcluster.NewBalancer(backends)
	if err != nil {
		t.Fatal(err)
	}
	get := func(replica string) (int, string, string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if replica != "" {
			r.Header.Set(devcluster.ReplicaHeader, replica)
		}
		w := httptest.NewRecorder()
		b.ServeHTTP(w, r)
		return w.Code, w.Body.String(), w.Header().Get(devcluster.ReplicaHeader)
	}
	seen := map[string]string{}
	for range 4 {
		_, body, from := get("")
		seen[body] = from
	}
	if seen["one"] != "1" || seen["two"] != "2" {
		t.Errorf("round robin answered from %v, want one from 1 and two from 2", seen)
	}
	for range 3 {
		if code, body, from := get("2"); code != http.StatusOK || body != "two" || from != "2" {
			t.Errorf("pinned to 2: %d %q from %q", code, body, from)
		}
	}
	if code, _, _ := get("3"); code != http.StatusBadGateway {
		t.Errorf("pinned to a replica there is not: %d, want 502", code)
	}
}
