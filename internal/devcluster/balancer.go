package devcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Balancer is the load balancer in front of the server replicas, as a
// production cluster has one (a Kubernetes Service, an HAProxy): the CLI
// and the executors talk to one URL, and a replica that is down is
// skipped. Requests go round robin; a request whose connection to a
// replica is refused (nothing was sent, so any request may be retried) is
// sent to the next replica, and that replica is skipped for a second. A
// replica that dies while it answers a request fails that request (502):
// the client retries, as it would behind any load balancer.
//
// A request may choose its replica with the header ReplicaHeader; every
// answer says in that header which replica gave it.
type Balancer struct {
	backends []*url.URL
	next     atomic.Uint64
	proxy    *httputil.ReverseProxy

	mu   sync.Mutex
	down map[int]time.Time // backend index → skipped until
}

// ReplicaHeader on a request sends it to that replica only ("1" is
// server-1), without failover: a test (or a user reproducing what one
// replica does) makes one replica render a form and the other take it.
// On an answer it names the replica that gave it.
const ReplicaHeader = "X-Intend-Replica"

// downFor is how long a replica that refused a connection is skipped.
const downFor = time.Second

// NewBalancer balances over the base URLs of the replicas.
func NewBalancer(backends []string) (*Balancer, error) {
	b := &Balancer{down: map[int]time.Time{}}
	for _, s := range backends {
		u, err := url.Parse(s)
		if err != nil {
			return nil, err
		}
		b.backends = append(b.backends, u)
	}
	if len(b.backends) == 0 {
		return nil, errors.New("no backends")
	}
	b.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "balancer" // the transport picks the replica
			r.Out.Host = r.In.Host
			r.SetXForwarded()
		},
		Transport:     &failover{b: b, rt: http.DefaultTransport},
		FlushInterval: -1, // server-sent events stream through
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = fmt.Fprintf(w, `{"type":"about:blank","title":"Bad Gateway","status":502,"detail":%q}`,
				"no intend server replica answered: "+err.Error())
		},
	}
	return b, nil
}

func (b *Balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.proxy.ServeHTTP(w, r) }

// order returns the backends to try, round robin, those marked down last.
func (b *Balancer) order() []int {
	n := len(b.backends)
	start := int(b.next.Add(1) % uint64(n))
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	var up, down []int
	for i := range n {
		k := (start + i) % n
		if now.Before(b.down[k]) {
			down = append(down, k)
		} else {
			up = append(up, k)
		}
	}
	return append(up, down...)
}

func (b *Balancer) markDown(k int) {
	b.mu.Lock()
	b.down[k] = time.Now().Add(downFor)
	b.mu.Unlock()
}

// failover sends a request to the replicas in order until one accepts
// the connection.
type failover struct {
	b  *Balancer
	rt http.RoundTripper
}

func (f *failover) RoundTrip(r *http.Request) (*http.Response, error) {
	// A transport closes the body even when it could not connect: keep it
	// to send again.
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	order := f.b.order()
	if v := r.Header.Get(ReplicaHeader); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 || k > len(f.b.backends) {
			return nil, fmt.Errorf("%s %q: want a replica from 1 to %d", ReplicaHeader, v, len(f.b.backends))
		}
		order = []int{k - 1}
	}
	var err error
	for _, k := range order {
		out := r.Clone(r.Context())
		out.Header.Del(ReplicaHeader)
		if body != nil {
			out.Body = io.NopCloser(bytes.NewReader(body))
		}
		out.URL.Scheme, out.URL.Host = f.b.backends[k].Scheme, f.b.backends[k].Host
		var resp *http.Response
		resp, err = f.rt.RoundTrip(out)
		if err == nil {
			resp.Header.Set(ReplicaHeader, strconv.Itoa(k+1))
			return resp, nil
		}
		if !refused(err) {
			return nil, err
		}
		f.b.markDown(k)
	}
	return nil, err
}

// refused reports a connection that was never made: nothing was sent.
func refused(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &op) && op.Op == "dial")
}
