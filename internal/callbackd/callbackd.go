// Package callbackd delivers the LSM callbacks: the dispatcher that
// POSTs the events of the outbox (store.ClaimCallbackEvents) to the
// URLs registered for them, signed with the callbacks package, retried
// with backoff, given up on after Options.MaxAge or MaxAttempts, and
// pruned after Options.Retention. Every replica of the server may run
// one (docs/api.md, "Callbacks").
package callbackd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intendhq/intend/callbacks"
	"github.com/intendhq/intend/internal/store"
)

// Options tune the delivery of LSM callbacks (zero values: the
// defaults).
type Options struct {
	// Timeout bounds one POST, from connecting to the answer's headers
	// (default 10 s).
	Timeout time.Duration
	// MinBackoff is the wait after a first failed attempt (default 1 s);
	// each failure doubles it up to MaxBackoff (default 5 minutes), with
	// jitter (a wait is between half and all of it).
	MinBackoff, MaxBackoff time.Duration
	// MaxAge gives an event up (dead) once it failed this long after its
	// transfer (default 24 h); MaxAttempts after this many attempts (0:
	// no bound but MaxAge).
	MaxAge      time.Duration
	MaxAttempts int
	// Concurrency bounds the deliveries under way (default 16).
	Concurrency int
	// Poll is how often the dispatcher looks at the outbox when no
	// notification comes (default 1 s).
	Poll time.Duration
	// Retention is how long delivered events are kept, for the counts
	// of the API (default 7 days); dead ones are kept 4 times as long.
	Retention time.Duration
	// Disabled runs no dispatcher in this server (another replica
	// delivers).
	Disabled bool
	// AllowedHosts are the hosts callbacks may be registered for and
	// are delivered to (HostAllowed); empty: any. An event
	// for a host no longer allowed is given up on at once.
	AllowedHosts []string
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Timeout, 10*time.Second)
	def(&o.MinBackoff, time.Second)
	def(&o.MaxBackoff, 5*time.Minute)
	def(&o.MaxAge, 24*time.Hour)
	def(&o.Poll, time.Second)
	def(&o.Retention, 7*24*time.Hour)
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	return o
}

// leaseMargin is how much longer than a request's timeout a claim
// lasts: past it, another dispatcher takes the event over.
const leaseMargin = 30 * time.Second

// pruneEvery is how often a dispatcher prunes old events.
const pruneEvery = 10 * time.Minute

// Dispatcher delivers the LSM callbacks' outbox. Every replica may run
// one: claims (store.ClaimCallbackEvents) keep them apart, and a claim
// whose dispatcher died expires and is taken over.
type Dispatcher struct {
	store  *store.Store
	opts   Options
	log    *slog.Logger
	client *http.Client
	wake   chan struct{}
}

// New makes a dispatcher of st's outbox; Run runs it.
func New(st *store.Store, opts Options, log *slog.Logger) *Dispatcher {
	opts = opts.withDefaults()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	return &Dispatcher{store: st, opts: opts, log: log, wake: make(chan struct{}, 1),
		client: &http.Client{
			Timeout:   opts.Timeout,
			Transport: tr,
			// A redirect is an answer, not a 2xx: following one would
			// send the event where no one registered it.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
}

// Nudge makes the dispatcher look at the outbox now.
func (d *Dispatcher) Nudge() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the deliveries under way.
func (d *Dispatcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { d.listen(ctx) })
	wg.Go(func() { d.prune(ctx) })
	slots := make(chan struct{}, d.opts.Concurrency)
	poll := time.NewTicker(d.opts.Poll)
	defer poll.Stop()
	for {
		if free := cap(slots) - len(slots); free > 0 {
			// A claim that commits while ctx ends would hold its
			// events until their leases expire: claim regardless, and
			// give them back when stopping.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			batch, err := d.store.ClaimCallbackEvents(cctx, free, d.opts.Timeout+leaseMargin)
			cancel()
			if err != nil {
				d.log.Warn("callbacks: claim events", "error", err)
			}
			if ctx.Err() != nil {
				for _, ev := range batch {
					d.giveBack(ev, "intend server stopped before the delivery")
				}
				return
			}
			for _, ev := range batch {
				slots <- struct{}{}
				wg.Go(func() {
					defer func() { <-slots; d.Nudge() }()
					d.deliver(ctx, ev)
				})
			}
			if err == nil && len(batch) == free {
				continue // more may be due
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-poll.C:
		}
	}
}

// listen nudges the dispatcher on every commit that wrote outbox rows
// (on any replica), reconnecting after a failure; the poll covers the
// gaps.
func (d *Dispatcher) listen(ctx context.Context) {
	for {
		err := d.store.ListenCallbacks(ctx, d.Nudge)
		if ctx.Err() != nil {
			return
		}
		d.log.Warn("callbacks: listen for transfers (polling meanwhile)", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// prune deletes delivered and dead events past their retention, and
// makes due parked events that nothing released (a safety net).
func (d *Dispatcher) prune(ctx context.Context) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		n, err := d.store.PruneCallbackEvents(ctx, d.opts.Retention, 4*d.opts.Retention)
		switch {
		case err != nil && ctx.Err() == nil:
			d.log.Warn("callbacks: prune events", "error", err)
		case n > 0:
			d.log.Info("callbacks: pruned events", "deleted", n)
		}
		n, err = d.store.UnparkCallbackEvents(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			d.log.Warn("callbacks: look for parked events", "error", err)
		case n > 0:
			d.log.Warn("callbacks: made parked events due that nothing released", "events", n)
			d.Nudge()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// deliver POSTs one event and records the outcome. The outcome is
// recorded even when ctx ends (the server stops) so that a delivered
// event is not sent again for nothing.
func (d *Dispatcher) deliver(ctx context.Context, ev store.CallbackDelivery) {
	status, err := d.post(ctx, ev)
	refused := errors.Is(err, errHostRefused)
	rec := context.WithoutCancel(ctx)
	rec, cancel := context.WithTimeout(rec, 10*time.Second)
	defer cancel()
	log := d.log.With("callback", ev.CallbackID, "instance_id", ev.InstanceID, "version", ev.Version,
		"event_id", ev.EventID, "attempt", ev.Attempts)
	if err == nil {
		if err := d.store.CallbackDelivered(rec, ev, status); err != nil {
			log.Warn("callbacks: record a delivery (it will be sent again)", "error", err)
		}
		return
	}
	if ctx.Err() != nil {
		// Stopping: not the receiver's failure.
		d.giveBack(ev, "intend server stopped during the delivery")
		return
	}
	dead := refused || time.Since(ev.CreatedAt) >= d.opts.MaxAge || (d.opts.MaxAttempts > 0 && ev.Attempts >= d.opts.MaxAttempts)
	next := time.Now().Add(backoff(ev.Attempts, d.opts.MinBackoff, d.opts.MaxBackoff))
	if dead {
		log.Warn("callbacks: gave an event up", "error", err)
	} else {
		log.Info("callbacks: delivery failed, will retry", "error", err, "next_attempt", next)
	}
	if err := d.store.CallbackFailed(rec, ev, status, err.Error(), next, dead); err != nil {
		log.Warn("callbacks: record a failed delivery", "error", err)
	}
}

// giveBack releases a claim, due at once, so that another dispatcher
// (or this one, restarted) need not wait for its lease to expire. The
// attempt counts: the receiver may have the event.
func (d *Dispatcher) giveBack(ev store.CallbackDelivery, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.store.CallbackFailed(ctx, ev, 0, why, time.Now(), false); err != nil {
		d.log.Warn("callbacks: give back a claim (it expires instead)", "event_id", ev.EventID, "error", err)
	}
}

// post sends the event once: nil for a 2xx answer, else why not (with
// the HTTP status when there was an answer).
func (d *Dispatcher) post(ctx context.Context, ev store.CallbackDelivery) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ev.URL, bytes.NewReader(ev.Payload))
	if err != nil {
		return 0, fmt.Errorf("bad url: %w", err)
	}
	if !HostAllowed(req.URL.Hostname(), d.opts.AllowedHosts) {
		return 0, errHostRefused
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "intend-callbacks/1")
	req.Header.Set(callbacks.EventIDHeader, ev.EventID)
	req.Header.Set(callbacks.TimestampHeader, ts)
	req.Header.Set(callbacks.SignatureHeader, callbacks.Sign(ev.Secret, ts, ev.Payload))
	req.Header.Set(callbacks.AttemptHeader, strconv.Itoa(ev.Attempts))
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, deliveryError(err, d.opts.Timeout)
	}
	defer resp.Body.Close()
	// A little of the answer explains a refusal; the rest is drained
	// (bounded) so the connection can be reused.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return resp.StatusCode, nil
	}
	msg := "HTTP " + strconv.Itoa(resp.StatusCode)
	if len(head) > 0 {
		msg += ": " + string(bytes.ToValidUTF8(bytes.TrimSpace(head), []byte("?")))
	}
	return resp.StatusCode, errors.New(msg)
}

// deliveryError says why a request got no answer, without the URL (the
// API shows the error to readers of the environment).
func deliveryError(err error, timeout time.Duration) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return fmt.Errorf("no answer within %s", timeout)
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok {
		return fmt.Errorf("%s: %v", oe.Op, oe.Err)
	}
	return err
}

// errHostRefused refuses a delivery to a host no longer allowed.
var errHostRefused = errors.New("the host is not among the allowed callback hosts (--lsm-callback-hosts)")

// backoff is the wait after the attempt-th failed attempt: min doubled
// per attempt up to max, then between half and all of it.
func backoff(attempt int, min, max time.Duration) time.Duration {
	d := min
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d/2 + rand.N(d/2+1)
}

// HostAllowed reports whether host is one that allowed admits: an
// entry is a host name or IP address (equal, without case), or
// ".example.com" (any host under example.com). Empty allowed admits any.
// The API checks a registration's URL with it, the dispatcher every
// delivery.
func HostAllowed(host string, allowed []string) bool {
	if len(allowed) == 0 {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	for _, a := range allowed {
		a = strings.ToLower(strings.TrimSuffix(a, "."))
		if ip := net.ParseIP(a); ip != nil {
			a = ip.String()
		}
		if host == a || strings.HasPrefix(a, ".") && strings.HasSuffix(host, a) {
			return true
		}
	}
	return false
}
