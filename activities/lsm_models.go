package activities

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// keptModelTrees is how many extracted model sources the lifecycle engine
// keeps: the newest and a few before it, for the compiles still running
// with them when a new one arrives.
const keptModelTrees = 4

// modelTrees keeps the model sources the lifecycle engine compiles with,
// extracted once per source hash, and what their compiles taught about
// them. A source is content-addressed and never changes, so every
// validation, export and dry-run of the same source shares one directory:
// before, each read the archive from PostgreSQL and extracted it to a
// fresh directory (a create → up did it twice), and read every fact of the
// environment even for a model that declares none (with 1,000 instances
// of 3 files, 3,000 rows a compile; P7, docs/benchmarks.md).
type modelTrees struct {
	mu    sync.Mutex
	trees map[string]*modelTree
	order []string // least recently used first
}

// modelTree is one extracted source.
type modelTree struct {
	hash  string
	dir   string // the temporary directory; the tree is dir/tree
	ready chan struct{}
	err   error // the extraction's, once ready
	refs  int
	gone  bool // evicted: the last release removes dir

	mu sync.Mutex
	// facts: 0 unknown (no compile yet), 1 the model declares no facts,
	// 2 it does.
	facts int
}

// Tree is the extracted model's root.
func (t *modelTree) Tree() string { return filepath.Join(t.dir, "tree") }

// needsFacts says whether a compile of the source needs the environment's
// facts: unless a compile has shown that the model declares none.
func (t *modelTree) needsFacts() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.facts != 1
}

// learned records whether the model declares facts.
func (t *modelTree) learned(declares bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.facts = 1
	if declares {
		t.facts = 2
	}
}

// acquire returns the extracted tree of the source hash, extracting it
// with extract (into the directory it is given) when no caller has, and a
// release to call when done with it. A failed extraction is not kept: the
// next caller tries again.
func (m *modelTrees) acquire(ctx context.Context, tempDir, hash string, extract func(tree string) error) (*modelTree, func(), error) {
	m.mu.Lock()
	t := m.trees[hash]
	if t == nil {
		dir, err := os.MkdirTemp(tempDir, "intend-lsm-")
		if err != nil {
			m.mu.Unlock()
			return nil, nil, fmt.Errorf("model source directory: %w", err)
		}
		t = &modelTree{hash: hash, dir: dir, ready: make(chan struct{})}
		if m.trees == nil {
			m.trees = map[string]*modelTree{}
		}
		m.trees[hash] = t
		t.refs++
		m.touch(hash)
		evicted := m.evict()
		m.mu.Unlock()
		m.removeAll(evicted)
		t.err = extract(t.Tree())
		close(t.ready)
		if t.err != nil {
			m.drop(t)
		}
	} else {
		t.refs++
		m.touch(hash)
		m.mu.Unlock()
	}
	release := func() { m.release(t) }
	select {
	case <-t.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if t.err != nil {
		release()
		return nil, nil, t.err
	}
	return t, release, nil
}

// touch makes hash the most recently used. m.mu is held.
func (m *modelTrees) touch(hash string) {
	m.order = slices.DeleteFunc(m.order, func(h string) bool { return h == hash })
	m.order = append(m.order, hash)
}

// evict forgets the least recently used trees beyond keptModelTrees and
// returns the directories nobody uses any more. m.mu is held.
func (m *modelTrees) evict() []string {
	var dirs []string
	for len(m.order) > keptModelTrees {
		t := m.trees[m.order[0]]
		m.order = m.order[1:]
		delete(m.trees, t.hash)
		t.gone = true
		if t.refs == 0 {
			dirs = append(dirs, t.dir)
		}
	}
	return dirs
}

// drop forgets a tree whose extraction failed.
func (m *modelTrees) drop(t *modelTree) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.trees[t.hash] == t {
		delete(m.trees, t.hash)
		m.order = slices.DeleteFunc(m.order, func(h string) bool { return h == t.hash })
		t.gone = true
	}
}

// release ends a use of t; the last use of an evicted tree removes it.
func (m *modelTrees) release(t *modelTree) {
	m.mu.Lock()
	t.refs--
	remove := t.gone && t.refs == 0
	m.mu.Unlock()
	if remove {
		m.removeAll([]string{t.dir})
	}
}

func (m *modelTrees) removeAll(dirs []string) {
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// close removes every tree (the worker is stopping).
func (m *modelTrees) close() {
	m.mu.Lock()
	var dirs []string
	for _, t := range m.trees {
		t.gone = true
		if t.refs == 0 {
			dirs = append(dirs, t.dir)
		}
	}
	m.trees, m.order = nil, nil
	m.mu.Unlock()
	m.removeAll(dirs)
}
