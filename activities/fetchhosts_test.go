package activities

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/fetchhosts"
	"github.com/intendhq/intend/internal/store"
)

// fakeResolver answers every name with its addresses.
type fakeResolver map[string]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

// countingListener accepts connections on 127.0.0.1 and counts them.
func countingListener(t *testing.T) (net.Listener, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return ln, &n
}

// TestCompileRefusesInternalHosts: an autonomous compile does not fetch
// from the server's own loopback, link-local (cloud metadata) or private
// addresses, by address or by a name that resolves to one, unless
// --compile-fetch-hosts lists them; nor from a host the list does not
// name. git is not run: nothing connects. (A repo_url was fetched from
// wherever it pointed: blind SSRF from the server's network position.)
func TestCompileRefusesInternalHosts(t *testing.T) {
	t.Parallel()
	ln, conns := countingListener(t)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	dns := fakeResolver{"metadata.attacker.example": "169.254.169.254", "loop.attacker.example": "127.0.0.1",
		"git.example.com": "93.184.215.14"}
	only := func(list ...string) *fetchhosts.Policy {
		p, err := fetchhosts.Parse(list)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	type refusal struct {
		name, url string
		hosts     *fetchhosts.Policy
		message   string
	}
	cases := []refusal{
		{"https to loopback", "https://127.0.0.1:" + port + "/model.git", nil, "loopback address 127.0.0.1"},
		{"git to loopback", "git://127.0.0.1:" + port + "/model.git", nil, "loopback address 127.0.0.1"},
		{"ssh to IPv6 loopback", "ssh://git@[::1]:" + port + "/model.git", nil, "loopback address ::1"},
		{"scp-like to loopback", "git@127.0.0.1:model.git", nil, "loopback address 127.0.0.1"},
		{"a name of loopback", "https://loop.attacker.example:" + port + "/model.git", nil, "loopback address 127.0.0.1"},
		{"a name of the metadata address", "https://metadata.attacker.example/latest/meta-data", nil, "link-local address 169.254.169.254"},
		{"a private address", "https://10.0.0.7/model.git", nil, "private address 10.0.0.7"},
		{"a host the list does not name", "https://git.example.com/model.git", only("github.com"), "is not on the list (github.com)"},
		{"a listed name of loopback, its address not listed", "https://loop.attacker.example:" + port + "/model.git",
			only("loop.attacker.example"), "loopback address 127.0.0.1"},
	}
	// The cases run in parallel within a group, and the listener's count
	// is read once they all ended.
	t.Run("cases", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				s := newStoredSetup(t, tc.url, func(c *Compiler) { c.Resolver, c.FetchHosts = dns, tc.hosts })
				in := s.start(t)
				if f := s.fetch(t, in); !f.Failed {
					t.Fatalf("fetch = %+v, want failed", f)
				}
				comp, _ := s.errors(t, in.ID)
				if comp.Status != store.CompileFailed || !strings.Contains(string(comp.Errors), tc.message) ||
					!strings.Contains(string(comp.Errors), "--compile-fetch-hosts") {
					t.Errorf("errors %s, want failed saying %q and naming the flag", comp.Errors, tc.message)
				}
			})
		}
	})
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connections reached the loopback listener", n)
	}
}

// TestFetchIsPinnedAndNotRedirected: over https, git connects to the
// addresses the check resolved (not to what DNS answers it a moment
// later), and does not follow a redirect (to an internal host, here
// another loopback server the list does not allow by name).
func TestFetchIsPinnedAndNotRedirected(t *testing.T) {
	var hits, redirected atomic.Int64
	target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirected.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(target.Close)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, target.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	// git trusts the test servers' certificate (valid for example.com and
	// 127.0.0.1).
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_SSL_CAINFO", ca)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	hosts, err := fetchhosts.Parse([]string{"example.com", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	// example.com resolves, for the check, to the test server: only a
	// pinned connection reaches it (the real example.com is elsewhere, or
	// unreachable from here).
	s := newStoredSetup(t, "https://example.com:"+port+"/model.git", func(c *Compiler) {
		c.Resolver, c.FetchHosts, c.GitTimeout = fakeResolver{"example.com": "127.0.0.1"}, hosts, 30*time.Second
	})
	in := s.start(t)
	if f := s.fetch(t, in); !f.Failed {
		t.Fatalf("fetch = %+v, want failed", f)
	}
	comp, _ := s.errors(t, in.ID)
	if hits.Load() == 0 {
		t.Errorf("git did not connect to the address checked (not pinned): errors %s", comp.Errors)
	}
	if n := redirected.Load(); n != 0 {
		t.Errorf("git followed the redirect (%d requests): errors %s", n, comp.Errors)
	}
}
