package bounded

import (
	"context"
	"sync"
)

// fairSlots shares size compile slots among environments. A free slot
// goes to a compile at once when nobody waits; else the compile waits in
// its environment's queue (first come, first served within it). A slot
// that frees goes to the waiting environment with the fewest compiles
// running, the one whose oldest waiter came first among equals. So an
// environment with a long queue holds back another's compile until the
// first of its running compiles ends, not until its queue is empty: one
// compile, whose length the CPU time limit bounds.
//
// The slots are this process's: each server replica has its own workers
// and its own slots, and every compile (an upload, an autonomous compile,
// an instance's validation or export) waits in the replica that runs it
// (docs/architecture.md, "Bounded compiles").
type fairSlots struct {
	size int

	mu      sync.Mutex
	running map[string]int           // compiles running, by environment
	waiting map[string][]*slotWaiter // by environment, oldest first
	seq     uint64
}

// slotWaiter is one compile waiting for a slot.
type slotWaiter struct {
	seq     uint64        // its place in the order of arrival
	granted chan struct{} // closed when the slot is its
	done    bool          // granted (under fairSlots.mu)
}

// acquire waits for a slot for a compile of env, or until ctx ends.
func (f *fairSlots) acquire(ctx context.Context, env string) error {
	f.mu.Lock()
	if f.running == nil {
		f.running, f.waiting = map[string]int{}, map[string][]*slotWaiter{}
	}
	if f.busy() < f.size && len(f.waiting) == 0 {
		f.running[env]++
		f.mu.Unlock()
		return nil
	}
	f.seq++
	w := &slotWaiter{seq: f.seq, granted: make(chan struct{})}
	f.waiting[env] = append(f.waiting[env], w)
	f.mu.Unlock()
	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		defer f.mu.Unlock()
		if w.done {
			// Granted meanwhile: the slot goes on to the next.
			f.releaseLocked(env)
			return ctx.Err()
		}
		q := f.waiting[env]
		for i, x := range q {
			if x == w {
				q = append(q[:i], q[i+1:]...)
				break
			}
		}
		if len(q) == 0 {
			delete(f.waiting, env)
		} else {
			f.waiting[env] = q
		}
		return ctx.Err()
	}
}

// release gives back a slot of env's.
func (f *fairSlots) release(env string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseLocked(env)
}

func (f *fairSlots) releaseLocked(env string) {
	if f.running[env]--; f.running[env] <= 0 {
		delete(f.running, env)
	}
	for f.busy() < f.size && len(f.waiting) > 0 {
		next := f.next()
		q := f.waiting[next]
		w := q[0]
		if len(q) == 1 {
			delete(f.waiting, next)
		} else {
			f.waiting[next] = q[1:]
		}
		f.running[next]++
		w.done = true
		close(w.granted)
	}
}

// next is the waiting environment a free slot goes to: the fewest
// running, then the oldest waiter.
func (f *fairSlots) next() string {
	best, bestRunning, bestSeq, found := "", 0, uint64(0), false
	for env, q := range f.waiting {
		r := f.running[env]
		if !found || r < bestRunning || r == bestRunning && q[0].seq < bestSeq {
			best, bestRunning, bestSeq, found = env, r, q[0].seq, true
		}
	}
	return best
}

// counts are the slots in use and the compiles waiting.
func (f *fairSlots) counts() (running, waiting int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, q := range f.waiting {
		waiting += len(q)
	}
	return f.busy(), waiting
}

// busy is the number of slots in use.
func (f *fairSlots) busy() int {
	n := 0
	for _, r := range f.running {
		n += r
	}
	return n
}
