package adapters

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"
)

// DefaultCacheTTL is how long a cached value lives when CacheOptions.TTL is
// zero.
const DefaultCacheTTL = 10 * time.Minute

// CacheOptions says how long a cached value lives and how to dispose of it.
type CacheOptions struct {
	// TTL bounds the value's life from when it was filled; zero means
	// DefaultCacheTTL.
	TTL time.Duration
	// ForVersion also expires the value when the deploy of the version the
	// attempt belongs to is over (in the executor: when no open run of that
	// environment deploys that version any more). A value cached for
	// version 7 is never handed to an attempt of version 8.
	ForVersion bool
	// Close, if set, is called once with the value when it expires, after
	// the last attempt using it has finished (see Context.Close). Use it to
	// close connections.
	Close func(value any)
}

// Cache memoises values across attempts and resources in one executor
// process, the way seed 004's @cache does: the key is the caller's
// arguments, and a value expires by time or with the deploy of a version,
// running its close hook. Concurrent callers of the same key wait for one
// fill. The zero value is not usable; use NewCache.
type Cache struct {
	mu      sync.Mutex
	entries map[string]*cacheEntry
	now     func() time.Time
}

type cacheEntry struct {
	key     string
	ready   chan struct{} // closed when filled
	value   any
	err     error
	expires time.Time
	scope   *Scope // set for ForVersion entries
	close   func(any)
	users   int  // attempts holding the value (released by Context.Close)
	expired bool // removed from the map; close when users drops to zero
	closed  bool
}

// Scope is what an attempt belongs to: an environment and the version it
// deploys. The executor sets it on every Context.
type Scope struct {
	Environment string
	Version     int64
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{entries: map[string]*cacheEntry{}, now: time.Now}
}

// defaultCache serves contexts created without a cache (NewContext in
// tests); its values expire by time only, swept on access.
var defaultCache = NewCache()

// Cached returns the value cached under key (the arguments of the call it
// memoises: a host, a port, a user, …) or fills it by calling fill.
// Values are per result type T, so the same key may be used for different
// things. Errors are not cached. The attempt holds the value until its
// Context is closed, so a close hook never runs under a user.
//
// The key is encoded as JSON; it stays in the executor's memory only, so it
// may include a secret (a password for a connection).
func Cached[T any](hc *Context, key []any, opts CacheOptions, fill func() (T, error)) (T, error) {
	var zero T
	k, err := json.Marshal(key)
	if err != nil {
		return zero, Permanent(fmt.Errorf("cache key: %w", err))
	}
	c := hc.cache
	if c == nil {
		c = defaultCache
	}
	full := reflect.TypeFor[T]().String() + "\x00" + string(k)
	var scope *Scope
	if opts.ForVersion {
		s := hc.Scope()
		scope = &s
		full += fmt.Sprintf("\x00%s\x00%d", s.Environment, s.Version)
	}
	e, filler := c.acquire(full, opts, scope)
	hc.hold(c, e)
	if filler {
		v, ferr := fill()
		c.filled(e, v, ferr)
	}
	<-e.ready
	if e.err != nil {
		return zero, e.err
	}
	v, ok := e.value.(T)
	if !ok {
		return zero, fmt.Errorf("cache: value under %s is %T", full, e.value)
	}
	return v, nil
}

// acquire returns the live entry for key, creating it (filler = true) when
// there is none, and marks the caller as one of its users.
func (c *Cache) acquire(key string, opts CacheOptions, scope *Scope) (*cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.expireLocked(now, nil)
	if e, ok := c.entries[key]; ok {
		e.users++
		return e, false
	}
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	e := &cacheEntry{key: key, ready: make(chan struct{}), expires: now.Add(ttl), scope: scope, close: opts.Close, users: 1}
	c.entries[key] = e
	return e, true
}

func (c *Cache) filled(e *cacheEntry, v any, err error) {
	c.mu.Lock()
	e.value, e.err = v, err
	if err != nil && c.entries[e.key] == e {
		delete(c.entries, e.key) // errors are not cached
		e.expired, e.closed = true, true
	}
	c.mu.Unlock()
	close(e.ready)
}

// release drops one user of e, closing it if it expired meanwhile.
func (c *Cache) release(e *cacheEntry) {
	c.mu.Lock()
	e.users--
	run := c.closableLocked(e)
	c.mu.Unlock()
	run()
}

// closableLocked marks e closed and returns its close hook to run outside
// the lock, if e expired and nobody uses it; otherwise a no-op.
func (c *Cache) closableLocked(e *cacheEntry) func() {
	if !e.expired || e.users > 0 || e.closed {
		return func() {}
	}
	e.closed = true
	if e.close == nil || e.err != nil {
		return func() {}
	}
	v, hook := e.value, e.close
	return func() { hook(v) }
}

// expireLocked removes the entries past their TTL, and those for which
// done reports their version's deploy is over; it returns the close hooks
// to run. Hooks of entries in use run when their last user releases them.
func (c *Cache) expireLocked(now time.Time, done func(Scope) bool) []func() {
	var hooks []func()
	for k, e := range c.entries {
		if now.Before(e.expires) && (e.scope == nil || done == nil || !done(*e.scope)) {
			continue
		}
		select {
		case <-e.ready:
		default:
			continue // still filling; its filler holds it
		}
		delete(c.entries, k)
		e.expired = true
		hooks = append(hooks, c.closableLocked(e))
	}
	return hooks
}

// Expire removes what is past its TTL and, when done is not nil, the
// version-bound values whose version's deploy done reports as over, and
// runs their close hooks (now, or when their last user is done). The
// executor calls it periodically.
func (c *Cache) Expire(done func(Scope) bool) {
	c.mu.Lock()
	hooks := c.expireLocked(c.now(), done)
	c.mu.Unlock()
	for _, h := range hooks {
		h()
	}
}

// Scopes returns the distinct scopes of the version-bound values held, so
// the executor can ask which of them are over.
func (c *Cache) Scopes() []Scope {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[Scope]bool{}
	var out []Scope
	for _, e := range c.entries {
		if e.scope != nil && !seen[*e.scope] {
			seen[*e.scope] = true
			out = append(out, *e.scope)
		}
	}
	return out
}

// Close expires every value and runs the close hooks (those in use run
// when released). The executor calls it on shutdown.
func (c *Cache) Close() {
	c.mu.Lock()
	var hooks []func()
	for k, e := range c.entries {
		select {
		case <-e.ready:
		default:
			continue
		}
		delete(c.entries, k)
		e.expired = true
		hooks = append(hooks, c.closableLocked(e))
	}
	c.mu.Unlock()
	for _, h := range hooks {
		h()
	}
}

// Len returns the number of values held.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
