package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/internal/ledger"
)

// Identity is who an executor is, as it reports itself.
type Identity struct {
	// Name is unique per environment; by default <hostname>-<pid>.
	Name     string
	Hostname string
	PID      int
	Version  string
	Embedded bool
}

// NewIdentity returns the identity of this process: its hostname and pid,
// and name, or <hostname>-<pid> when name is empty.
func NewIdentity(name, version string, embedded bool) Identity {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	id := Identity{Name: name, Hostname: host, PID: os.Getpid(), Version: version, Embedded: embedded}
	if id.Name == "" {
		id.Name = fmt.Sprintf("%s-%d", host, id.PID)
	}
	return id
}

// Reporter keeps an executor's registration current: it reports the
// agents the executor serves to each environment, every heartbeat and
// whenever Wake is called, so GET .../agents and .../executors show who
// serves what. Stopped records a clean shutdown.
type Reporter struct {
	// Registry records the reports: the store for the embedded
	// executor, the intend server's executor API for the others.
	Registry ledger.Registry
	Identity Identity
	// Served returns the agents served, by environment name.
	Served func() map[string][]string
	// Pool is the executor's pool (empty: the default); with the agents,
	// it tells the server which task queue the executor polls.
	Pool string
	// Every is the heartbeat period (default ledger.Heartbeat).
	Every time.Duration
	Log   *slog.Logger

	once     sync.Once
	wake     chan struct{}
	mu       sync.Mutex
	reported map[string]bool // environments reported to
}

func (r *Reporter) init() {
	r.once.Do(func() {
		r.wake = make(chan struct{}, 1)
		r.reported = map[string]bool{}
		if r.Every <= 0 {
			r.Every = ledger.Heartbeat
		}
		if r.Log == nil {
			r.Log = slog.Default()
		}
	})
}

// Report reports the executor to every environment it serves, now.
func (r *Reporter) Report(ctx context.Context) error {
	r.init()
	served := r.Served()
	envs := make([]string, 0, len(served))
	for env := range served {
		envs = append(envs, env)
	}
	sort.Strings(envs)
	var errs []error
	for _, env := range envs {
		r.mu.Lock()
		first := !r.reported[env]
		r.mu.Unlock()
		rep := ledger.ExecutorReport{Name: r.Identity.Name, Hostname: r.Identity.Hostname, PID: r.Identity.PID,
			Version: r.Identity.Version, Agents: served[env], Embedded: r.Identity.Embedded, Pool: r.Pool, First: first}
		if err := r.Registry.ReportExecutor(ctx, env, rep); err != nil {
			errs = append(errs, err)
			continue
		}
		r.mu.Lock()
		r.reported[env] = true
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Wake makes Run report at once (Serve of a new agent calls it).
func (r *Reporter) Wake() {
	r.init()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run reports every heartbeat, and when woken, until ctx is done. Failed
// reports are logged: the executor goes on serving, and the next report
// catches up.
func (r *Reporter) Run(ctx context.Context) {
	r.init()
	t := time.NewTicker(r.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
		if err := r.Report(ctx); err != nil && ctx.Err() == nil {
			r.Log.Warn("executor registration failed", "executor", r.Identity.Name, "error", err)
		}
	}
}

// Stopped marks the executor stopped in every environment it reported to.
// It uses a context of its own, since it runs when the executor's is done.
func (r *Reporter) Stopped(ctx context.Context) error {
	r.init()
	r.mu.Lock()
	envs := make([]string, 0, len(r.reported))
	for env := range r.reported {
		envs = append(envs, env)
	}
	r.mu.Unlock()
	if len(envs) == 0 {
		return nil
	}
	sort.Strings(envs)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return r.Registry.StopExecutor(ctx, r.Identity.Name, envs)
}

// CacheSweepEvery is how often SweepCache expires the adapters' cache.
const CacheSweepEvery = 30 * time.Second

// WakeGap is the least time between two sweeps that wakes ask for: a wake
// within it is served when it has passed.
const WakeGap = time.Second

// SweepCache expires values of the adapters' cache every period (default
// CacheSweepEvery) until ctx is done: those past their TTL, and those bound
// to a version (adapters.CacheOptions.ForVersion) that no open deploy run
// of their environment deploys any more. A value on wake (see Wake) asks
// for a sweep now, at most one per WakeGap: the executor wakes it when a
// batch of a version the cache holds no values of starts, so that values
// of the versions before it (a device's sessions, which hold its few
// session slots) are closed once their deploy is over, not up to a period
// later. The caller closes the cache after ctx is done.
func SweepCache(ctx context.Context, c *adapters.Cache, reg ledger.Registry, every time.Duration, log *slog.Logger, wake <-chan struct{}) {
	if every <= 0 {
		every = CacheSweepEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var last time.Time
	var gap <-chan time.Time // a wake waiting for WakeGap to pass
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
			if d := time.Until(last.Add(WakeGap)); d > 0 {
				if gap == nil {
					gap = time.After(d)
				}
				continue
			}
		case <-gap:
			gap = nil
		}
		last = time.Now()
		if err := SweepOnce(ctx, c, reg); err != nil && ctx.Err() == nil && log != nil {
			log.Warn("adapter cache: version expiry skipped", "error", err)
		}
	}
}

// Wake asks the SweepCache reading wake for a sweep, without waiting: a
// sweep already asked for serves this one too.
func Wake(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// SweepOnce expires the cache's values once (see SweepCache). When
// the registry cannot say which versions are still deployed, it expires by
// TTL only and returns the error.
func SweepOnce(ctx context.Context, c *adapters.Cache, reg ledger.Registry) error {
	scopes := c.Scopes()
	if len(scopes) == 0 {
		c.Expire(nil)
		return nil
	}
	envs := map[string]bool{}
	var ids []string
	for _, s := range scopes {
		if !envs[s.Environment] {
			envs[s.Environment] = true
			ids = append(ids, s.Environment)
		}
	}
	open, err := reg.OpenRunVersions(ctx, ids)
	if err != nil {
		c.Expire(nil)
		return err
	}
	// Only the scopes asked about can be over: a value cached since then
	// waits for the next sweep.
	asked := make(map[adapters.Scope]bool, len(scopes))
	for _, s := range scopes {
		asked[s] = true
	}
	c.Expire(func(s adapters.Scope) bool { return asked[s] && !open[s.Environment][s.Version] })
	return nil
}
