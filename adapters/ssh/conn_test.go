package ssh

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/sshtest"
)

// cachedConn returns the connection the cache holds for r's host.
func cachedConn(t *testing.T, cache *adapters.Cache, r adapters.Resource) *conn {
	t.Helper()
	spec, errs := parseConn(r)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	hc := adapters.NewContext(adapters.WithCache(cache))
	defer hc.Close()
	c, err := adapters.Cached(hc, spec.cacheKey(), adapters.CacheOptions{}, func() (*conn, error) {
		t.Fatalf("no connection is cached for %s", spec.name())
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *conn) dialCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dials
}

// TestKilledConnectionIsRedialled: when the server side of a cached
// connection dies, the connection is noticed dead and the next attempt
// dials again instead of failing on the dead client. Both ways of noticing
// are checked: the client's own end of the connection (after it has seen
// it), and the keepalive sent before reusing a connection that sat unused.
func TestKilledConnectionIsRedialled(t *testing.T) {
	srv := sshtest.Start(t)
	file, _, _ := fs.Handlers(target{})
	cases := []struct {
		name   string
		reason string
		// wait, when true, waits until the client noticed the end of the
		// connection; otherwise the keepalive must notice it.
		wait bool
	}{
		{"noticed", "a connection that ended is not handed out again", true},
		{"probed", "a connection that does not answer a keepalive is not handed out", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cache := adapters.NewCache()
			defer cache.Close()
			path := filepath.Join(t.TempDir(), "f")
			attrs := srv.Attrs()
			attrs["path"] = path
			attrs["content"] = "x"
			r := adapters.Resource{ID: resource.ID{Type: FileType, Agent: "a", Attribute: "path", Value: path}, Attributes: attrs}
			run := func(what string) adapters.Outcome {
				t.Helper()
				hc := adapters.NewContext(adapters.WithCache(cache))
				defer hc.Close()
				out, err := adapters.Run(context.Background(), file, hc, r, false)
				if err != nil {
					t.Fatalf("%s (%s): %v", what, c.reason, err)
				}
				return out
			}
			run("first attempt")
			conn := cachedConn(t, cache, r)
			conn.mu.Lock()
			done := conn.done
			if !c.wait {
				conn.probeAfter = 0 // probe before every reuse
			}
			conn.mu.Unlock()
			if n := srv.KillConnections(t); n == 0 {
				t.Fatalf("no sshd process served the connection")
			}
			if c.wait {
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("the client did not notice within 10s that its connection ended")
				}
			}
			if out := run("attempt after the connection was killed"); out.Action != "none" {
				t.Errorf("action %q, want none", out.Action)
			}
			if n := conn.dialCount(); n != 2 {
				t.Errorf("dials = %d, want 2: one at first, one after the connection died", n)
			}
			if out := run("third attempt"); out.Action != "none" {
				t.Errorf("action %q, want none", out.Action)
			}
			if n := conn.dialCount(); n != 2 {
				t.Errorf("dials = %d after a third attempt, want the live connection reused", n)
			}
		})
	}
}

// TestConnectionsShared: attempts on the same host with the same key and
// host-key policy share one connection; another policy gets its own, and
// the cache's close hook closes them.
func TestConnectionsShared(t *testing.T) {
	srv := sshtest.Start(t)
	file, _, _ := fs.Handlers(target{})
	cache := adapters.NewCache()
	dir := t.TempDir()
	mk := func(name string, known bool) adapters.Resource {
		attrs := srv.Attrs()
		if known {
			delete(attrs, "host_key")
			attrs["known_hosts"] = srv.KnownHosts
		}
		path := filepath.Join(dir, name)
		attrs["path"], attrs["content"] = path, name
		return adapters.Resource{ID: resource.ID{Type: FileType, Agent: "a", Attribute: "path", Value: path}, Attributes: attrs}
	}
	rs := []adapters.Resource{mk("a", false), mk("b", false), mk("c", true)}
	for _, r := range rs {
		hc := adapters.NewContext(adapters.WithCache(cache))
		if _, err := adapters.Run(context.Background(), file, hc, r, false); err != nil {
			t.Fatal(err)
		}
		hc.Close()
	}
	if n := cache.Len(); n != 2 {
		t.Errorf("cached connections = %d, want 2 (a and b share one; c verifies the host another way)", n)
	}
	a, c := cachedConn(t, cache, rs[0]), cachedConn(t, cache, rs[2])
	if a == c || a.dialCount() != 1 || c.dialCount() != 1 {
		t.Errorf("connections a=%p (%d dials) c=%p (%d dials), want two, dialled once each", a, a.dialCount(), c, c.dialCount())
	}
	a.mu.Lock()
	done := a.done
	a.mu.Unlock()
	cache.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the connection is still open after the cache closed it")
	}
}
