package compiler

import (
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"

	"github.com/intendhq/intend/internal/project"
)

// Models keeps built models between compiles of the same source
// (Options.SourceKey), so that a compile worker of the lifecycle engine
// loads, parses and builds a model once per source instead of once per
// compile (with one instance among many, a third of its CPU). What it
// keeps is pure per source and directory: the project, the CUE files
// parsed with the standard library overlaid, the model built from them,
// the attributes of the standard types it uses and its service entities
// as extracted for the catalog (with their errors; not when the facts are
// filled in, which the entities could read). Everything else, the
// facts, the instances and their evaluations, is the compile's own: a
// compile fills the built model into new values and never changes it.
//
// A built model is used by one compile at a time (CUE values are not
// safe for concurrent evaluation); a Models holds at most max of them,
// dropping the least recently used, and builds a model again after
// maxModelUses compiles, so that what CUE keeps of each compile in its
// context (labels are global; anything else is its own) stays bounded.
type Models struct {
	mu      sync.Mutex
	max     int
	tick    uint64
	entries map[modelKey]*builtModel
	builds  int
}

// maxModelUses is how many compiles use one built model before it is
// built again.
const maxModelUses = 1000

type modelKey struct{ source, root string }

// builtModel is one model, as loadModel builds it.
type builtModel struct {
	mu      sync.Mutex // held by the compile using it
	used    uint64     // Models.tick when last taken
	uses    int
	proj    project.Project
	root    string
	cue     *cue.Context
	value   cue.Value
	files   map[string]*ast.File
	std     map[string]*build.Instance
	allowed map[string]map[string]bool
	// entities are the model's service entities as extracted, by name.
	entities map[string]*extracted
}

// NewModels returns a cache of at most n built models (at least 1).
func NewModels(n int) *Models {
	return &Models{max: max(n, 1), entries: map[modelKey]*builtModel{}}
}

// Builds is how many models were built for compiles that asked the
// cache (a compile that took one from it builds none).
func (m *Models) Builds() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.builds
}

// Clear drops every built model (one in use stays its compile's).
func (m *Models) Clear() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.entries)
}

// take returns the built model of source at root, locked for the caller
// (unlock releases it), or nil.
func (m *Models) take(source, root string) *builtModel {
	m.mu.Lock()
	b := m.entries[modelKey{source, root}]
	if b != nil {
		if b.uses >= maxModelUses {
			delete(m.entries, modelKey{source, root})
			b = nil
		} else {
			m.tick++
			b.used = m.tick
			b.uses++
		}
	}
	if b == nil {
		m.builds++
	}
	m.mu.Unlock()
	if b != nil {
		b.mu.Lock()
	}
	return b
}

// put keeps b, locked by its builder, for the next compiles of source at
// root.
func (m *Models) put(source, root string, b *builtModel) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.entries) >= m.max {
		var oldest modelKey
		first := true
		for k, e := range m.entries {
			if first || e.used < m.entries[oldest].used {
				oldest, first = k, false
			}
		}
		delete(m.entries, oldest)
	}
	m.tick++
	b.used, b.uses = m.tick, 1
	m.entries[modelKey{source, root}] = b
}
