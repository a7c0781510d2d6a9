// Package lsmevents tells the event streams of service instances (GET
// .../service_inventory/{entity}/{id}/events) that an instance has a new
// version, without a database connection per stream: one Hub per server
// holds one PostgreSQL connection that LISTENs on store.TransferChannel
// and wakes the streams of the instance a notification names; a fallback
// poll (one query for every instance streamed) wakes the streams whose
// instance moved past what they delivered, so that a lost notification
// (the listener reconnecting, a notification queue overflow) only delays
// an event. A stream, once woken, reads the log itself: the hub carries no
// data, and a wake-up that finds nothing new costs one small query.
package lsmevents

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intendhq/intend/internal/store"
)

// DefaultPoll is how often the hub polls for versions its listener may
// have missed.
const DefaultPoll = 2 * time.Second

// Hub fans transfer notifications out to subscriptions. Safe for
// concurrent use; Run makes it listen and poll.
type Hub struct {
	store *store.Store
	log   *slog.Logger
	// poll is the fallback poll's period.
	poll time.Duration

	mu   sync.Mutex
	subs map[string]map[*Subscription]struct{} // by instance id
	// listening: the listener's LISTEN is in place (for Listening).
	listening atomic.Bool
	// done is closed by Close: the streams end.
	done      chan struct{}
	closeOnce sync.Once
}

// New returns a hub over st; poll is the fallback poll's period (0:
// DefaultPoll).
func New(st *store.Store, log *slog.Logger, poll time.Duration) *Hub {
	if log == nil {
		log = slog.Default()
	}
	if poll <= 0 {
		poll = DefaultPoll
	}
	return &Hub{store: st, log: log, poll: poll, subs: map[string]map[*Subscription]struct{}{}, done: make(chan struct{})}
}

// Subscription is one stream's interest in an instance. C receives a
// value when the instance may have a version after the one Seen last
// recorded (a wake-up may find nothing new).
type Subscription struct {
	C          <-chan struct{}
	c          chan struct{}
	instanceID string
	seen       atomic.Int64
	hub        *Hub
}

// Subscribe registers interest in instanceID's versions after seen.
// Close the subscription when done.
func (h *Hub) Subscribe(instanceID string, seen int64) *Subscription {
	c := make(chan struct{}, 1)
	s := &Subscription{C: c, c: c, instanceID: instanceID, hub: h}
	s.seen.Store(seen)
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subs[instanceID]
	if m == nil {
		m = map[*Subscription]struct{}{}
		h.subs[instanceID] = m
	}
	m[s] = struct{}{}
	return s
}

// Done is closed when the hub closes (the server shuts down): the stream
// ends.
func (s *Subscription) Done() <-chan struct{} { return s.hub.done }

// Close tells every stream to end (the server shuts down, and its
// streams would hold the shutdown up). Run stops with its context.
func (h *Hub) Close() { h.closeOnce.Do(func() { close(h.done) }) }

// Seen records the newest version the stream delivered (for the poll).
func (s *Subscription) Seen(version int64) { s.seen.Store(version) }

// Close ends the subscription.
func (s *Subscription) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.subs[s.instanceID]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(h.subs, s.instanceID)
		}
	}
}

func (s *Subscription) wake() {
	select {
	case s.c <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// Subscribers counts the open subscriptions.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.subs {
		n += len(m)
	}
	return n
}

// Listening reports whether the listener's LISTEN is in place.
func (h *Hub) Listening() bool { return h.listening.Load() }

// notify wakes the subscriptions of the instance a notification names
// whose streams have not delivered its version.
func (h *Hub) notify(t store.TransferNotice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[t.InstanceID] {
		if s.seen.Load() < t.Version {
			s.wake()
		}
	}
}

// wakeAll wakes every subscription (the listener reconnected: what was
// committed meanwhile was not notified to it).
func (h *Hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.subs {
		for s := range m {
			s.wake()
		}
	}
}

// Run listens and polls until ctx ends. A listener that fails is
// reconnected after a pause (1 s doubling to 30 s); meanwhile the poll
// carries the streams.
func (h *Hub) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { h.pollLoop(ctx) })
	delay := time.Second
	for ctx.Err() == nil {
		start := time.Now()
		err := h.store.ListenTransfers(ctx, func() {
			h.listening.Store(true)
			h.wakeAll()
		}, h.notify)
		h.listening.Store(false)
		if ctx.Err() != nil {
			break
		}
		if time.Since(start) > time.Minute {
			delay = time.Second
		}
		h.log.Warn("service instance events: the transfer listener failed; the fallback poll carries the streams",
			"error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
	wg.Wait()
}

// pollLoop wakes, every poll period, the subscriptions whose instance has
// a version after what they delivered.
func (h *Hub) pollLoop(ctx context.Context) {
	t := time.NewTicker(h.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.pollOnce(ctx)
	}
}

func (h *Hub) pollOnce(ctx context.Context) {
	h.mu.Lock()
	ids := make([]string, 0, len(h.subs))
	for id := range h.subs {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	versions, err := h.store.InstanceVersions(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("service instance events: poll", "error", err)
		}
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, v := range versions {
		for s := range h.subs[id] {
			if s.seen.Load() < v {
				s.wake()
			}
		}
	}
}
