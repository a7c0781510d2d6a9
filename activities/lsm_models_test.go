package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestModelTrees: a source is extracted once however many compiles use it
// at once; a failed extraction is tried again by the next caller; beyond
// keptModelTrees the least recently used tree is removed, but only when
// its last user is done.
func TestModelTrees(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	var m modelTrees
	var extracted atomic.Int32
	extract := func(tree string) error {
		extracted.Add(1)
		if err := os.MkdirAll(tree, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(tree, "main.cue"), []byte("package m\n"), 0o644)
	}
	ctx := context.Background()

	var wg sync.WaitGroup
	dirs := make([]string, 16)
	for i := range dirs {
		wg.Go(func() {
			mt, release, err := m.acquire(ctx, tmp, "h0", extract)
			if err != nil {
				t.Error(err)
				return
			}
			defer release()
			if _, err := os.Stat(filepath.Join(mt.Tree(), "main.cue")); err != nil {
				t.Error(err)
			}
			dirs[i] = mt.Tree()
		})
	}
	wg.Wait()
	if n := extracted.Load(); n != 1 {
		t.Fatalf("16 compiles of one source extracted it %d times, want 1", n)
	}
	for _, d := range dirs[1:] {
		if d != dirs[0] {
			t.Fatalf("compiles of one source used %s and %s", dirs[0], d)
		}
	}

	boom := errors.New("boom")
	if _, _, err := m.acquire(ctx, tmp, "bad", func(string) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failed extraction: %v, want boom", err)
	}
	mt, release, err := m.acquire(ctx, tmp, "bad", extract)
	if err != nil {
		t.Fatalf("the next caller of a failed source: %v", err)
	}
	release()

	// h0 is held while newer sources push it out: its tree stays until
	// released, then goes.
	h0, releaseH0, err := m.acquire(ctx, tmp, "h0", extract)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keptModelTrees {
		_, r, err := m.acquire(ctx, tmp, fmt.Sprintf("n%d", i), extract)
		if err != nil {
			t.Fatal(err)
		}
		r()
	}
	if _, err := os.Stat(h0.Tree()); err != nil {
		t.Fatalf("an evicted tree in use was removed: %v", err)
	}
	releaseH0()
	if _, err := os.Stat(h0.Tree()); !os.IsNotExist(err) {
		t.Fatalf("an evicted tree's last release left it: %v", err)
	}
	if _, err := os.Stat(mt.Tree()); !os.IsNotExist(err) {
		t.Fatalf("the tree of 'bad', evicted and unused, is still there: %v", err)
	}
	if !mt.needsFacts() {
		t.Fatal("a source no compile has seen must get the facts")
	}
	mt.learned(false)
	if mt.needsFacts() {
		t.Fatal("a model that declares no facts needs none")
	}
	m.close()
	entries, _ := os.ReadDir(tmp)
	if len(entries) != 0 {
		t.Fatalf("close left %d directories", len(entries))
	}
}
