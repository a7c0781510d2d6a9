package adapters

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable time source for the cache.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestCache() (*Cache, *clock) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := NewCache()
	c.now = clk.now
	return c, clk
}

// conn stands for a connection: it counts its closes.
type conn struct {
	id     int
	closed atomic.Int32
}

func closeConn(v any) { v.(*conn).closed.Add(1) }

func TestCacheMemoisesByKeyAndType(t *testing.T) {
	c, _ := newTestCache()
	hc := NewContext(WithCache(c))
	defer hc.Close()
	fills := 0
	get := func(host string, port int) *conn {
		t.Helper()
		v, err := Cached(hc, []any{host, port}, CacheOptions{}, func() (*conn, error) {
			fills++
			return &conn{id: fills}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, b := get("db1", 5432), get("db1", 5432)
	if a != b || fills != 1 {
		t.Fatalf("same arguments filled %d times (values %d, %d), want once", fills, a.id, b.id)
	}
	if get("db1", 5433) == a || get("db2", 5432) == a || fills != 3 {
		t.Fatalf("different arguments must fill their own value; fills = %d", fills)
	}
	// The same key for another result type is another value.
	s, err := Cached(hc, []any{"db1", 5432}, CacheOptions{}, func() (string, error) { return "banner", nil })
	if err != nil || s != "banner" {
		t.Fatalf("string under a key used for *conn: %q, %v", s, err)
	}
}

func TestCacheErrorsAreNotCached(t *testing.T) {
	c, _ := newTestCache()
	hc := NewContext(WithCache(c))
	defer hc.Close()
	calls := 0
	fill := func() (int, error) {
		calls++
		if calls == 1 {
			return 0, errors.New("connection refused")
		}
		return 42, nil
	}
	if _, err := Cached(hc, []any{"k"}, CacheOptions{}, fill); err == nil {
		t.Fatal("the first fill's error was not returned")
	}
	v, err := Cached(hc, []any{"k"}, CacheOptions{}, fill)
	if err != nil || v != 42 || calls != 2 {
		t.Fatalf("after a failed fill: %d, %v after %d calls; want a new fill giving 42", v, err, calls)
	}
}

func TestCacheTTLClosesAfterLastUser(t *testing.T) {
	c, clk := newTestCache()
	opts := CacheOptions{TTL: time.Minute, Close: closeConn}
	n := 0
	fill := func() (*conn, error) { n++; return &conn{id: n}, nil }

	busy := NewContext(WithCache(c)) // an attempt still using the value
	first, _ := Cached(busy, []any{"h"}, opts, fill)

	clk.add(2 * time.Minute)
	c.Expire(nil)
	if c.Len() != 0 {
		t.Fatalf("expired value still held (%d entries)", c.Len())
	}
	if first.closed.Load() != 0 {
		t.Fatal("close hook ran while an attempt still used the value")
	}
	other := NewContext(WithCache(c))
	second, _ := Cached(other, []any{"h"}, opts, fill)
	if second == first {
		t.Fatal("an expired value was handed out again")
	}
	busy.Close()
	busy.Close() // idempotent
	if got := first.closed.Load(); got != 1 {
		t.Fatalf("close hook ran %d times after the last user finished, want 1", got)
	}
	other.Close()
	if second.closed.Load() != 0 {
		t.Fatal("a live value was closed when its user finished")
	}
	c.Close()
	if second.closed.Load() != 1 || c.Len() != 0 {
		t.Fatalf("Cache.Close: hook ran %d times, %d entries left", second.closed.Load(), c.Len())
	}
}

func TestCacheForVersion(t *testing.T) {
	c, _ := newTestCache()
	opts := CacheOptions{ForVersion: true, Close: closeConn}
	n := 0
	fill := func() (*conn, error) { n++; return &conn{id: n}, nil }
	at := func(version int64) *conn {
		hc := NewContext(WithCache(c), WithScope(Scope{Environment: "env", Version: version}))
		defer hc.Close()
		v, err := Cached(hc, []any{"h"}, opts, fill)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v7, v8 := at(7), at(8)
	if v7 == v8 || at(7) != v7 {
		t.Fatal("a version-bound value must be per version and shared within it")
	}
	scopes := c.Scopes()
	if len(scopes) != 2 {
		t.Fatalf("Scopes() = %v, want versions 7 and 8", scopes)
	}
	c.Expire(func(s Scope) bool { return s.Version == 7 }) // version 7's deploy is over
	if v7.closed.Load() != 1 || v8.closed.Load() != 0 {
		t.Fatalf("after version 7 ended: closes v7=%d v8=%d, want 1 and 0", v7.closed.Load(), v8.closed.Load())
	}
	if at(8) != v8 || c.Len() != 1 {
		t.Fatal("version 8's value should have survived the end of version 7")
	}
}

func TestCacheConcurrentCallersShareOneFill(t *testing.T) {
	c, _ := newTestCache()
	var fills atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	got := make([]*conn, 8)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			hc := NewContext(WithCache(c))
			defer hc.Close()
			got[i], _ = Cached(hc, []any{"h"}, CacheOptions{}, func() (*conn, error) {
				fills.Add(1)
				<-release // a slow dial
				return &conn{}, nil
			})
		}(i)
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if fills.Load() != 1 {
		t.Fatalf("%d fills for one key, want 1", fills.Load())
	}
	for _, v := range got {
		if v != got[0] || v == nil {
			t.Fatal("callers got different values")
		}
	}
}

func TestCacheUnencodableKey(t *testing.T) {
	hc := NewContext(WithCache(NewCache()))
	defer hc.Close()
	_, err := Cached(hc, []any{func() {}}, CacheOptions{}, func() (int, error) { return 1, nil })
	if ClassOf(err) != ClassPermanent {
		t.Fatalf("a key that is not JSON: %v, want a permanent error", err)
	}
}
