package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/internal/ledger"
)

// The runtimes of ledger.Plugin.Runtime.
const (
	// RuntimeExec: the artifact is an executable for the executor's
	// GOOS/GOARCH ("linux/amd64").
	RuntimeExec = "exec"
	// RuntimePython3: the artifact is a zipapp run by Options.Python;
	// its platform is "any".
	RuntimePython3 = "python3"
)

// Options configure a Host. Zero values take the defaults.
type Options struct {
	// CacheDir holds the artifacts (<CacheDir>/sha256/<hex>). Required.
	CacheDir string
	// Fetch streams an artifact of env from the record (the executor's
	// ledger). An error it classifies (adapters.Permanent, …) keeps its
	// class; any other is transient.
	Fetch func(ctx context.Context, env, digest string) (io.ReadCloser, error)
	// Python is the interpreter of python3 plugins: Debian's, never the
	// first python3 on PATH. Default /usr/bin/python3.
	Python string
	// IdleTimeout stops a plugin that has had no call for that long.
	// Default 10 minutes.
	IdleTimeout time.Duration
	// MaxRSS kills a plugin whose resident memory, its child processes'
	// included, passes it. Default 1 GiB.
	MaxRSS int64
	// MaxPlugins bounds the plugin processes; over it the least recently
	// used idle one is stopped. Default 32.
	MaxPlugins int
	// CallGrace: a call not answered by its deadline plus CallGrace kills
	// the plugin. Default 30 s.
	CallGrace time.Duration
	// StartTimeout bounds a plugin's start, from exec to its handshake
	// line. Default 1 minute.
	StartTimeout time.Duration
	// PollInterval is how often a plugin's memory and idleness are
	// checked. Default 1 s.
	PollInterval time.Duration
	// SocketDir is where go-plugin makes each plugin's private socket
	// directory. Default os.TempDir().
	SocketDir string
	// Log receives the plugins' output and the host's events.
	Log *slog.Logger
}

// Stats counts what the host did, for metrics.
type Stats struct {
	// Live is the number of plugin processes running.
	Live int
	// Starts counts processes started; Crashes those that exited without
	// being asked to; MemoryKills and TimeKills those the host killed
	// over MaxRSS or a call's deadline; IdleStops and LRUStops those it
	// stopped when idle or to make room.
	Starts, Crashes, MemoryKills, TimeKills, IdleStops, LRUStops int64
}

// key identifies a plugin process: one per artifact digest.
type key struct {
	name, runtime, digest string
}

// Host runs the adapter plugins of one executor process.
type Host struct {
	opts Options

	starts sync.WaitGroup // starts under way

	mu    sync.Mutex
	slots map[string]*slot // by digest
	// stopped holds the processes stopped in the background until they
	// exited, for Close to wait on.
	stopped map[*process]bool
	stats   Stats
	closed  bool
}

// slot is the process of one digest: running, starting, or neither.
type slot struct {
	proc     *process
	starting chan struct{} // closed when the start under way ends
	startErr error
}

// New returns a Host. Nothing starts before the first Handler call.
func New(opts Options) *Host {
	if opts.Python == "" {
		opts.Python = "/usr/bin/python3"
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 10 * time.Minute
	}
	if opts.MaxRSS <= 0 {
		opts.MaxRSS = 1 << 30
	}
	if opts.MaxPlugins <= 0 {
		opts.MaxPlugins = 32
	}
	if opts.CallGrace <= 0 {
		opts.CallGrace = 30 * time.Second
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = time.Minute
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Host{opts: opts, slots: map[string]*slot{}, stopped: map[*process]bool{}}
}

func goosArch() string { return runtime.GOOS + "/" + runtime.GOARCH }

// Handler returns the handler of resourceType served by plugin p, whose
// artifact is fetched from env when it is not cached. It starts the
// plugin when it does not run (to learn what it serves); each call of the
// handler uses the plugin's current process, starting it again when it
// exited or was stopped.
func (h *Host) Handler(ctx context.Context, env string, p ledger.Plugin, resourceType string) (adapters.Handler, error) {
	if !slices.Contains(p.Types, resourceType) {
		return nil, adapters.Permanent(fmt.Errorf("plugin %s does not serve %s", p.Name, resourceType))
	}
	k, err := keyOf(p)
	if err != nil {
		return nil, err
	}
	proc, err := h.acquire(ctx, env, k)
	if err != nil {
		return nil, err
	}
	defer h.release(proc)
	described, err := proc.proxy(resourceType)
	if err != nil {
		return nil, err
	}
	return newHandler(h, env, k, resourceType, described), nil
}

// Types starts plugin p when it does not run and returns the types it
// serves, as its Describe says (whatever p.Types says). It is for tools
// that run a plugin they have not recorded in a version yet
// (adapters/plugin/plugintest).
func (h *Host) Types(ctx context.Context, env string, p ledger.Plugin) ([]string, error) {
	k, err := keyOf(p)
	if err != nil {
		return nil, err
	}
	proc, err := h.acquire(ctx, env, k)
	if err != nil {
		return nil, err
	}
	defer h.release(proc)
	return proc.sess.Types(), nil
}

// keyOf returns the process key of p's artifact for this platform.
func keyOf(p ledger.Plugin) (key, error) {
	platform := goosArch()
	switch p.Runtime {
	case RuntimeExec:
	case RuntimePython3:
		platform = "any"
	default:
		return key{}, adapters.Permanent(fmt.Errorf("plugin %s: unknown runtime %q", p.Name, p.Runtime))
	}
	digest, ok := p.Artifacts[platform]
	if !ok {
		return key{}, adapters.Permanent(fmt.Errorf("plugin %s has no artifact for platform %s", p.Name, platform))
	}
	return key{name: p.Name, runtime: p.Runtime, digest: digest}, nil
}

// acquire returns the running process of k, started when there is none,
// counted in flight until release.
func (h *Host) acquire(ctx context.Context, env string, k key) (*process, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, adapters.Transient(errors.New("the executor is stopping its adapter plugins"))
		}
		s := h.slots[k.digest]
		if s == nil {
			s = &slot{}
			h.slots[k.digest] = s
		}
		if p := s.proc; p != nil && p.reasonless() {
			p.inflight++
			p.lastUsed = time.Now()
			h.mu.Unlock()
			return p, nil
		}
		if s.proc == nil && s.starting == nil {
			if err := h.makeRoomLocked(); err != nil {
				h.mu.Unlock()
				return nil, err
			}
			s.starting = make(chan struct{})
			h.starts.Add(1)
			go h.start(ctx, env, k, s)
		}
		starting, dying := s.starting, s.proc
		h.mu.Unlock()
		if starting == nil {
			// A process that is being killed: wait for its exit.
			select {
			case <-dying.exited:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		select {
		case <-starting:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		h.mu.Lock()
		err := s.startErr
		h.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// start starts the process of slot s, for every caller waiting on it.
// The start is not the first caller's: it outlives that caller's context
// (within StartTimeout and a fetch's own bounds).
func (h *Host) start(ctx context.Context, env string, k key, s *slot) {
	defer h.starts.Done()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.opts.StartTimeout+5*time.Minute)
	defer cancel()
	begin := time.Now()
	p, err := h.startProcess(ctx, env, k)
	h.mu.Lock()
	defer h.mu.Unlock()
	close(s.starting)
	s.starting = nil
	s.startErr = err
	if err != nil {
		h.opts.Log.Warn("adapter plugin did not start", "plugin", k.name, "digest", k.digest, "error", err)
		return
	}
	p.lastUsed = time.Now()
	s.proc = p
	h.stats.Starts++
	if h.closed {
		h.stopLocked(p, errors.New("the executor is stopping its adapter plugins"))
	}
	h.opts.Log.Info("adapter plugin started", "plugin", k.name, "digest", k.digest, "pid", p.pid,
		"types", p.sess.Types(), "duration", time.Since(begin))
}

// release ends a call of p.
func (h *Host) release(p *process) {
	h.mu.Lock()
	p.inflight--
	p.lastUsed = time.Now()
	h.mu.Unlock()
}

// forget drops p from its slot once it exited.
func (h *Host) forget(p *process) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.stopped, p)
	if s := h.slots[p.key.digest]; s != nil && s.proc == p {
		s.proc = nil
	}
}

// makeRoomLocked stops the least recently used idle process when a start
// would pass MaxPlugins; with none idle, the call fails transient.
func (h *Host) makeRoomLocked() error {
	n := 0
	var lru *process
	for _, s := range h.slots {
		if s.starting != nil {
			n++
		}
		if p := s.proc; p != nil {
			n++
			if p.inflight == 0 && !p.stopping && (lru == nil || p.lastUsed.Before(lru.lastUsed)) {
				lru = p
			}
		}
	}
	if n < h.opts.MaxPlugins {
		return nil
	}
	if lru == nil {
		return adapters.Transient(fmt.Errorf("the executor runs %d adapter plugins (its limit), all of them busy", n))
	}
	h.stats.LRUStops++
	h.stopLocked(lru, fmt.Errorf("plugin %s stopped to make room for another (at most %d run at once)", lru.key.label(), h.opts.MaxPlugins))
	return nil
}

// stopLocked takes p out of its slot and stops it in the background.
func (h *Host) stopLocked(p *process, reason error) {
	p.stopping = true
	h.stopped[p] = true
	if s := h.slots[p.key.digest]; s != nil && s.proc == p {
		s.proc = nil
	}
	go p.stop(reason)
}

// idleCheck stops p when it has had no call for IdleTimeout.
func (h *Host) idleCheck(p *process) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.stopping || p.inflight > 0 || time.Since(p.lastUsed) < h.opts.IdleTimeout {
		return
	}
	h.stats.IdleStops++
	h.opts.Log.Info("stopping idle adapter plugin", "plugin", p.key.name, "digest", p.key.digest, "pid", p.pid)
	h.stopLocked(p, fmt.Errorf("plugin %s stopped after %s without calls", p.key.label(), h.opts.IdleTimeout))
}

func (h *Host) count(f func(*Stats)) {
	h.mu.Lock()
	f(&h.stats)
	h.mu.Unlock()
}

// Stats returns what the host did so far and the processes it runs now.
func (h *Host) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.stats
	for _, s := range h.slots {
		if s.proc != nil {
			st.Live++
		}
	}
	return st
}

// live returns the running processes.
func (h *Host) live() []*process {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ps []*process
	for _, s := range h.slots {
		if s.proc != nil {
			ps = append(ps, s.proc)
		}
	}
	return ps
}

// Expire tells every running plugin which scopes still have a deploy
// open, so that it closes what it cached for the others.
func (h *Host) Expire(ctx context.Context, open []adapters.Scope) error {
	var errs []error
	for _, p := range h.live() {
		if err := p.sess.Expire(ctx, open); err != nil {
			errs = append(errs, fmt.Errorf("plugin %s: expire: %w", p.key.label(), err))
		}
	}
	return errors.Join(errs...)
}

// Close stops every plugin (calls in flight fail transient) and waits
// for their exit. The host starts none after.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.starts.Wait() // a start that ends now stops its process itself
	h.mu.Lock()
	var ps []*process
	for _, s := range h.slots {
		if s.proc != nil {
			ps = append(ps, s.proc)
			s.proc.stopping = true
			s.proc = nil
		}
	}
	var stopping []*process
	for p := range h.stopped {
		stopping = append(stopping, p)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { p.stop(errors.New("the executor is stopping its adapter plugins")) })
	}
	wg.Wait()
	// And those stopped before (idle, LRU, a start that ended in Close).
	for _, p := range stopping {
		<-p.exited
	}
	return nil
}
