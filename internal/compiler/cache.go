package compiler

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"sync/atomic"
)

// Cache keeps the resources of service instances between compiles, so
// that compiling the model with one instance changed among thousands
// evaluates one (P8: a few milliseconds) and merges the others' cached
// outputs. An entry is keyed by everything the evaluation reads: the
// model (Options.SourceKey), the facts (when the model declares them; a
// model that does not cannot read them), the entity, the instance id and its
// attributes. Only instances that compiled without an error are kept. A
// Cache is safe for concurrent compiles; when it holds more than its bound
// of resources it starts over.
type Cache struct {
	mu        sync.Mutex
	max       int
	resources int
	entries   map[[sha256.Size]byte]cacheEntry
	hits      int
	// outputs is how many resources the last compile with the cache
	// produced: the next one sizes its tables for as many (with 10,000
	// instances, growing them took a third of a validation).
	outputs atomic.Int64
}

// cacheEntry is what an instance's evaluation left: its resources and its
// evaluated parameter.
type cacheEntry struct {
	resources []Resource
	parameter json.RawMessage
}

// NewCache returns a cache that holds at most maxResources resources.
func NewCache(maxResources int) *Cache {
	return &Cache{max: maxResources, entries: map[[sha256.Size]byte]cacheEntry{}}
}

// Hits is how many instances compiles took from the cache.
func (c *Cache) Hits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}

func (c *Cache) get(key [sha256.Size]byte) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if ok {
		c.hits++
	}
	return e, ok
}

func (c *Cache) put(key [sha256.Size]byte, e cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; ok {
		return
	}
	if c.resources+len(e.resources) > c.max {
		c.entries = map[[sha256.Size]byte]cacheEntry{}
		c.resources = 0
	}
	c.entries[key] = e
	c.resources += len(e.resources)
}

// cacheKeyer builds the keys of one compile.
type cacheKeyer struct {
	prefix []byte // source key and facts
}

// newCacheKeyer keys by the model and, when the model reads facts (it
// declares them), by the facts.
func newCacheKeyer(source string, readsFacts bool, facts map[string]map[string]json.RawMessage) (*cacheKeyer, error) {
	h := sha256.New()
	h.Write([]byte(source))
	h.Write([]byte{0})
	if readsFacts {
		b, err := json.Marshal(facts) // maps marshal in key order
		if err != nil {
			return nil, err
		}
		h.Write(b)
	}
	return &cacheKeyer{prefix: h.Sum(nil)}, nil
}

func (k *cacheKeyer) key(entity, id string, attrs json.RawMessage) [sha256.Size]byte {
	h := sha256.New()
	h.Write(k.prefix)
	for _, s := range []string{entity, id} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(attrs)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
