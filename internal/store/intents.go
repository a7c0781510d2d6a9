package store

import (
	"context"
	"errors"
	"sync"
)

// IntentHead is BatchHead for an executor's intents, which need not be
// told that the batch is still there: RecordIntents is told by the
// foreign key of resource_intents (ErrNotFound, the same answer). A
// batch's head never changes (its agent, its run's version, action and
// reason are written once, and a run's number is never used again), so
// once BatchHead has read it, the next intents of the batch are checked
// against what it read, without a statement: in a chain, where one
// resource acts at a time, each pays its intent's round trip before it
// acts, and the head's statement was one of the four (issue 28, P5).
func (s *Store) IntentHead(ctx context.Context, envID string, run int64, seq int, resourceIDs []string) (BatchHead, error) {
	key := batchKey{envID, run, seq}
	if h, ok := s.heads.get(key); ok {
		if all, kept := s.batches.get(key); kept {
			h.Hashes = make(map[string][]byte, len(resourceIDs))
			for _, id := range resourceIDs {
				if hash, ok := all[id]; ok {
					h.Hashes[id] = hash
				}
			}
			return h, nil
		}
	}
	h, err := s.BatchHead(ctx, envID, run, seq, resourceIDs)
	if err != nil {
		s.heads.drop(key)
		return h, err
	}
	kept := h
	kept.Hashes = nil
	s.heads.put(key, kept)
	return h, nil
}

// forgetBatch drops what the store keeps of a batch found gone.
func (s *Store) forgetBatch(envID string, run int64, seq int, err error) {
	if errors.Is(err, ErrNotFound) {
		key := batchKey{envID, run, seq}
		s.heads.drop(key)
		s.batches.drop(key)
	}
}

// batchHeadsKept bounds the heads batchHeads keeps (about 200 bytes
// each): more batches than batchHashes keeps the ids of, which IntentHead
// needs as well.
const batchHeadsKept = 4096

// batchHeads keeps the heads (without hashes) of the batches IntentHead
// read last, the oldest dropped first past batchHeadsKept.
type batchHeads struct {
	mu    sync.Mutex
	m     map[batchKey]BatchHead
	order []batchKey // oldest first
}

func (c *batchHeads) get(k batchKey) (BatchHead, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[k]
	return h, ok
}

func (c *batchHeads) put(k batchKey, h BatchHead) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[batchKey]BatchHead{}
	}
	if _, ok := c.m[k]; ok {
		return
	}
	c.m[k] = h
	c.order = append(c.order, k)
	for len(c.order) > batchHeadsKept {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
}

func (c *batchHeads) drop(k batchKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		delete(c.m, k)
		for i, o := range c.order {
			if o == k {
				c.order = append(c.order[:i], c.order[i+1:]...)
				break
			}
		}
	}
}
