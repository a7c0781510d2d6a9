package netconf

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/netconf/session"
)

// device is one session to one device, shared by the resources of a
// version's deploy through the cache, and the transactions on it.
type device struct {
	key  string
	sess *session.Session
	done func() // releases the session's slot
	once sync.Once

	mu        sync.Mutex
	queue     []*edit
	leading   bool
	observers int
	expected  map[string]time.Time // resources observed to need a change, not yet submitted
	changed   chan struct{}        // closed and replaced on every change of the above
}

// edit is one resource's edit, waiting for its transaction.
type edit struct {
	id      string
	config  []byte
	confirm int
	delete  bool
	err     error
	done    chan struct{}
}

// commits counts the commits of this process (for tests).
var commits atomic.Int64

// hook, set by tests, is called at points of a transaction: "commit"
// after the edits, before the commit; "confirm" after a confirmed commit,
// before its confirmation.
var hook func(point string)

func at(point string) {
	if hook != nil {
		hook(point)
	}
}

// expectTTL bounds how long an observed change is waited for (a dry-run
// observes and never edits).
const expectTTL = 2 * time.Second

// sessions holds the slots and generations of each device's sessions.
var sessions = struct {
	sync.Mutex
	slots map[string]chan struct{}
	gen   map[string]int
}{slots: map[string]chan struct{}{}, gen: map[string]int{}}

func (s *spec) addr() string { return s.address }

// deviceKey names the device and the credentials, never in clear.
func (s *spec) deviceKey() string {
	h := sha256.Sum256([]byte(s.password + "\x00" + s.privateKey))
	return s.addr() + "\x00" + s.user + "\x00" + s.hostKey + "\x00" + hex.EncodeToString(h[:8])
}

// device returns the session to the device, dialled once per version
// and shared. A session found dead (the device went away since) is
// dropped and dialled again once: a device that is back serves this
// attempt; one still gone makes it unavailable.
func (h Config) device(ctx context.Context, hc *adapters.Context, s *spec) (*device, error) {
	key := s.deviceKey()
	for try := 0; ; try++ {
		sessions.Lock()
		gen := sessions.gen[key]
		sessions.Unlock()
		d, err := adapters.Cached(hc, []any{"netconf", key, gen}, adapters.CacheOptions{
			TTL: 10 * time.Minute, ForVersion: true,
			Close: func(v any) { v.(*device).close() },
		}, func() (*device, error) { return h.dial(ctx, s, key) })
		if err != nil {
			return nil, err
		}
		err = d.sess.Err()
		if err == nil {
			return d, nil
		}
		d.drop(gen)
		if try > 0 {
			return nil, unavailable(fmt.Errorf("netconf session to %s: %w", s.addr(), err))
		}
	}
}

func (h Config) dial(ctx context.Context, s *spec, key string) (*device, error) {
	max := h.MaxSessions
	if max <= 0 {
		max = DefaultMaxSessions
	}
	sessions.Lock()
	slots := sessions.slots[key]
	if slots == nil {
		slots = make(chan struct{}, max)
		sessions.slots[key] = slots
	}
	sessions.Unlock()
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, adapters.Transient(fmt.Errorf("waiting for one of the %d sessions to %s: %w", max, s.addr(), ctx.Err()))
	}
	sess, err := session.Dial(ctx, session.Config{Addr: s.addr(), User: s.user, Password: s.password,
		PrivateKey: []byte(s.privateKey), HostKey: s.hostKey})
	if err != nil {
		<-slots
		if errors.Is(err, session.ErrUnreachable) {
			return nil, unavailable(fmt.Errorf("netconf %s: %w", s.addr(), err))
		}
		return nil, adapters.Permanent(fmt.Errorf("netconf %s: %w", s.addr(), err))
	}
	return &device{key: key, sess: sess, done: func() { <-slots }, expected: map[string]time.Time{}, changed: make(chan struct{})}, nil
}

// drop closes a dead session now and makes the next attempt dial anew.
func (d *device) drop(gen int) {
	sessions.Lock()
	if sessions.gen[d.key] == gen {
		sessions.gen[d.key] = gen + 1
	}
	sessions.Unlock()
	d.close()
}

func (d *device) close() {
	d.once.Do(func() {
		_ = d.sess.Close()
		d.done()
	})
}

// unavailable marks err as the device being unreachable.
func unavailable(err error) error { return adapters.Unavailable(err) }

// classify gives a device's error its class: an rpc-error is permanent
// (its text names error-path and error-message), a lock another session
// holds transient, a device gone unavailable.
func (d *device) classify(err error) error {
	var rpc session.RPCErrors
	switch {
	case session.IsLockDenied(err):
		return adapters.Transient(err)
	case errors.Is(err, session.ErrUnreachable):
		return unavailable(err)
	case errors.As(err, &rpc), errors.Is(err, session.ErrHostile):
		return adapters.Permanent(err)
	}
	return adapters.Transient(err)
}

// persistID names a confirmed commit: unguessable, so that no other
// session confirms it by chance.
func persistID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "intend-" + hex.EncodeToString(b)
}

func (d *device) notifyLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *device) observing(n int) {
	d.mu.Lock()
	d.observers += n
	d.notifyLocked()
	d.mu.Unlock()
}

// expect notes that a resource was observed to need a change: a
// transaction starting now waits a little for its edit.
func (d *device) expect(id string) {
	d.mu.Lock()
	d.expected[id] = time.Now()
	d.notifyLocked()
	d.mu.Unlock()
}

// apply submits an edit and waits for the transaction that carries it.
// The first submitter leads: it waits for the edits in flight (the
// device's resources being observed, or observed to need a change),
// at most Gather, then runs every edit queued in one transaction, and
// goes on while edits arrive.
func (d *device) apply(ctx context.Context, hc *adapters.Context, h Config, id string, config []byte, confirm int, del bool) error {
	e := &edit{id: id, config: config, confirm: confirm, delete: del, done: make(chan struct{})}
	d.mu.Lock()
	delete(d.expected, id)
	d.queue = append(d.queue, e)
	d.notifyLocked()
	lead := !d.leading
	d.leading = true
	d.mu.Unlock()
	if lead {
		d.lead(ctx, hc, h)
	}
	select {
	case <-e.done:
		return e.err
	case <-ctx.Done():
		return adapters.Transient(fmt.Errorf("waiting for the device's transaction: %w", ctx.Err()))
	}
}

func (d *device) lead(ctx context.Context, hc *adapters.Context, h Config) {
	gather := h.Gather
	if gather <= 0 {
		gather = DefaultGather
	}
	for {
		d.wait(ctx, gather)
		d.mu.Lock()
		batch := d.queue
		d.queue = nil
		if len(batch) == 0 {
			d.leading = false
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
		d.run(ctx, hc, batch)
		for _, e := range batch {
			close(e.done)
		}
	}
}

// wait returns when no resource of the device is being observed or
// expected to send an edit, or after at most max.
func (d *device) wait(ctx context.Context, max time.Duration) {
	timer := time.NewTimer(max)
	defer timer.Stop()
	for {
		d.mu.Lock()
		now := time.Now()
		pending := d.observers > 0
		for id, at := range d.expected {
			if now.Sub(at) > expectTTL {
				delete(d.expected, id)
			} else {
				pending = true
			}
		}
		ch := d.changed
		d.mu.Unlock()
		if !pending {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// run applies a batch in one transaction; when that fails for another
// reason than the device or its lock, it applies each edit in its own
// transaction, so that each error lands on its own resource.
func (d *device) run(ctx context.Context, hc *adapters.Context, batch []*edit) {
	err := d.transaction(ctx, hc, batch)
	if err == nil || len(batch) == 1 || adapters.ClassOf(err) != adapters.ClassPermanent {
		for _, e := range batch {
			e.err = err
		}
		return
	}
	hc.Info("the device refused the transaction of several resources: applying them one by one",
		"resources", len(batch), "error", err.Error())
	for _, e := range batch {
		e.err = d.transaction(ctx, hc, []*edit{e})
	}
}

// transaction edits the candidate and commits it (a confirmed commit,
// then its confirmation) where the device has :candidate, the running
// datastore otherwise, under locks, discarding the candidate's changes
// on failure.
func (d *device) transaction(ctx context.Context, hc *adapters.Context, batch []*edit) (err error) {
	s := d.sess
	candidate := s.Has(":candidate")
	target := session.Running
	locks := []session.Datastore{session.Running}
	if candidate {
		target = session.Candidate
		locks = append(locks, session.Candidate)
	}
	for i, ds := range locks {
		err := s.Lock(ctx, ds)
		var rpc session.RPCErrors
		if err != nil && ds == session.Candidate && errors.As(err, &rpc) && rpc.HasTag("resource-denied") {
			// The candidate holds changes no lock protects (RFC 6241
			// refuses its lock then): those of a session that ended
			// on a device that keeps them, or of one editing without
			// a lock. Running is ours: they are not committed with
			// ours, but discarded.
			hc.Warn("the candidate held uncommitted changes of another session: discarding them", "error", err.Error())
			if derr := s.DiscardChanges(ctx); derr == nil {
				err = s.Lock(ctx, ds)
			}
		}
		if err != nil {
			for _, held := range locks[:i] {
				_ = s.Unlock(context.WithoutCancel(ctx), held)
			}
			return d.classify(fmt.Errorf("lock %s: %w", ds, err))
		}
	}
	defer func() {
		for i := len(locks) - 1; i >= 0; i-- {
			if uerr := s.Unlock(context.WithoutCancel(ctx), locks[i]); uerr != nil && err == nil {
				hc.Warn("unlock failed", "datastore", string(locks[i]), "error", uerr.Error())
			}
		}
	}()
	if candidate {
		// What an earlier session left in the candidate is not ours to
		// commit.
		if err := s.DiscardChanges(ctx); err != nil {
			return d.classify(fmt.Errorf("discard-changes: %w", err))
		}
	}
	fail := func(err error) error {
		if candidate {
			if derr := s.DiscardChanges(context.WithoutCancel(ctx)); derr != nil {
				hc.Warn("discard-changes failed", "error", derr.Error())
			}
		}
		return d.classify(err)
	}
	var opt session.EditOptions
	if !candidate && s.Has(":rollback-on-error") {
		opt.ErrorOption = "rollback-on-error"
	}
	confirm := 0
	for _, e := range batch {
		if err := s.EditConfig(ctx, target, e.config, opt); err != nil {
			var rpc session.RPCErrors
			if e.delete && errors.As(err, &rpc) && rpc.HasTag("data-missing") {
				continue // already gone
			}
			return fail(fmt.Errorf("edit-config %s: %w", target, err))
		}
		if e.confirm > 0 && (confirm == 0 || e.confirm < confirm) {
			confirm = e.confirm
		}
	}
	if !candidate {
		return nil
	}
	at("commit")
	if confirm > 0 && (s.Has(":confirmed-commit:1.1") || s.Has(":confirmed-commit")) {
		opt := session.CommitOptions{Confirmed: true, Timeout: time.Duration(confirm) * time.Second}
		confirming := session.CommitOptions{}
		if s.Has(":confirmed-commit:1.1") {
			// With persist, the session's end does not cancel the
			// confirmed commit: the timeout rolls it back. Without it,
			// netconfd 2.13 cancels the commit when the session ends
			// and fails to restore running, still locked by the ended
			// session: the change would stay.
			opt.Persist = persistID()
			confirming.PersistID = opt.Persist
		}
		if err := s.Commit(ctx, opt); err != nil {
			return fail(fmt.Errorf("confirmed commit: %w", err))
		}
		// The device still answers: confirm. Should it not, it rolls
		// back by itself when the timeout passes.
		at("confirm")
		if err := s.Commit(ctx, confirming); err != nil {
			return d.classify(fmt.Errorf("confirming commit: %w", err))
		}
	} else if err := s.Commit(ctx, session.CommitOptions{}); err != nil {
		return fail(fmt.Errorf("commit: %w", err))
	}
	commits.Add(1)
	return nil
}
