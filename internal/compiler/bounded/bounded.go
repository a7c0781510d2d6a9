// Package bounded runs model compiles in child processes, each compile
// under a time limit and a memory limit, so that a model that loops or
// explodes (a few lines of CUE can double a string until it takes
// gigabytes) fails with an error naming the limit while the server stays
// up.
//
// CUE evaluation cannot be interrupted and Go cannot bound the memory of
// one goroutine, so the bound is a process: a worker is the server's own
// binary started with INTEND_COMPILE_WORKER=1 (this package's init makes
// any binary that links it a worker then). The server keeps a few workers
// alive and sends them compiles one at a time over a pipe; a worker keeps
// its compiler cache between compiles (the lifecycle engine's warm cache).
// A compile over its time is killed with its worker; a worker whose heap
// passes the memory limit, or whose compile passes its CPU time limit,
// exits at once; either way the next compile gets a fresh worker. A
// worker also keeps the models it built (compiler.Models) and the
// inventories it was sent, so that the next compile of the same source
// for the same environment is sent only what changed (inventory.go).
//
// The workers are shared by every environment, so the pool hands a free
// one to the environment with the fewest compiles running (first come
// among equals): one environment's queue of compiles delays another's
// compile by at most one compile, the first to finish.
package bounded

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/project"
)

// The variables a worker is started with.
const (
	envWorker = "INTEND_COMPILE_WORKER"        // "1": this process is a worker
	envMemory = "INTEND_COMPILE_WORKER_MEMORY" // its memory limit, in bytes
	envCache  = "INTEND_COMPILE_WORKER_CACHE"  // resources its cache holds
	// EnvProfile, set in the server's environment, makes every worker
	// write CPU profiles to <value>.<pid>.<n>, one each 5 seconds (a
	// worker is killed, never stopped): for profiling the compiles,
	// `go tool pprof <binary> <value>.*` adds them up.
	EnvProfile = "INTEND_COMPILE_WORKER_CPUPROFILE"
)

// A worker's exit status when its memory limit, or its compile's CPU time
// limit, was passed.
const (
	exitMemory = 3
	exitCPU    = 4
)

func init() {
	if os.Getenv(envWorker) == "1" {
		os.Exit(serveMain())
	}
}

// DefaultMemory is the memory limit of a compile unless configured.
const DefaultMemory int64 = 1 << 30

// Pool runs compiles on up to Workers child processes.
type Pool struct {
	// Memory limits each worker's heap, in bytes (DefaultMemory if 0).
	Memory int64
	// Workers bounds the compiles run at once (default 2).
	Workers int
	// CacheResources bounds each worker's compiler cache (0: no cache).
	CacheResources int
	// Binary is the executable to start (default: this one).
	Binary string
	Log    *slog.Logger

	once  sync.Once
	mu    sync.Mutex
	idle  []*worker
	slots fairSlots

	// noDelta sends every inventory in full (tests compare).
	noDelta bool
	// fulls and deltas count the inventories sent in full and as
	// deltas, resends the deltas a worker asked to have in full, and
	// changes the entries the deltas carried.
	fulls, deltas, resends, changes atomic.Int64
}

func (p *Pool) init() {
	p.once.Do(func() {
		if p.Workers <= 0 {
			p.Workers = 2
		}
		if p.Memory <= 0 {
			p.Memory = DefaultMemory
		}
		if p.Log == nil {
			p.Log = slog.Default()
		}
		p.slots.size = p.Workers
	})
}

// Compile implements compiler.Runner: it compiles opts in a worker within
// job's limits (a *compiler.LimitError past one of them or past the memory
// limit), once a worker is free for job.Environment (see fairSlots).
// opts.Cache asks for the worker's cache, keyed by opts.SourceKey; the
// Cache value itself stays in this process unused.
func (p *Pool) Compile(ctx context.Context, opts compiler.Options, job compiler.Job) (*compiler.Result, error) {
	p.init()
	if err := p.slots.acquire(ctx, job.Environment); err != nil {
		return nil, err
	}
	defer p.slots.release(job.Environment)
	key := invKey{Env: job.Environment, Source: opts.SourceKey, Focused: opts.Focus != nil}
	w, err := p.take(key)
	if err != nil {
		return nil, err
	}
	res, err := p.send(ctx, w, key, opts, job)
	if w.alive() {
		p.mu.Lock()
		p.idle = append(p.idle, w)
		p.mu.Unlock()
	}
	return res, err
}

// Queue reports the compiles running and those waiting for a worker.
func (p *Pool) Queue() (running, waiting int) {
	p.init()
	return p.slots.counts()
}

// send has w compile opts: the inventory as a delta from what w kept of
// key, or in full when it keeps nothing of it (or asks for it again).
func (p *Pool) send(ctx context.Context, w *worker, key invKey, opts compiler.Options, job compiler.Job) (*compiler.Result, error) {
	cur := &inventory{Facts: opts.Facts, Instances: opts.Instances, InstanceVersions: opts.InstanceVersions, Related: opts.Related}
	// The lifecycle engine's compiles (those with the cache: validations
	// and exports, one inventory changing a little from one to the next)
	// are kept; not an upload's, a preview's chunk or an autonomous
	// compile's, which would take their slots. Nor an empty inventory,
	// unless it is what a kept one became.
	retain := opts.Cache != nil && key.Source != "" && !p.noDelta && (!cur.empty() || w.sent.has(key))
	for {
		req := request{Dir: opts.Dir, SourceKey: opts.SourceKey, UseCache: opts.Cache != nil && opts.SourceKey != "",
			Focus: opts.Focus, CPU: job.CPU, Env: key.Env}
		var was *kept
		if retain {
			w.gen++
			req.Gen = w.gen
			if was = w.sent.get(key); was != nil {
				req.Delta = diffInventory(was.gen, was.inv, cur)
			}
		}
		if req.Delta == nil {
			req.Facts, req.Instances, req.InstanceVersions, req.Related = cur.Facts, cur.Instances, cur.InstanceVersions, cur.Related
			p.fulls.Add(1)
		} else {
			p.deltas.Add(1)
			p.changes.Add(int64(req.Delta.changes()))
		}
		// A resend is answered at once, nothing compiled: the limit
		// holds for the compile.
		res, held, err := w.compile(ctx, req, job.Timeout, p.Memory)
		switch {
		case errors.Is(err, errResend):
			// The worker lacks the generation the delta applies to:
			// the whole inventory, once.
			p.resends.Add(1)
			w.sent.drop(key)
			if was == nil {
				return nil, errors.New("the compile worker asked again for an inventory sent in full")
			}
			continue
		case !w.alive() || !retain:
		case !held:
			w.sent.drop(key)
		case was != nil:
			applyInventory(was.inv, req.Delta, true)
			was.gen = req.Gen
		default:
			w.sent.put(key, req.Gen, copyInventory(cur))
		}
		return res, err
	}
}

// take returns an idle worker: the one that keeps key's inventory if
// there is one (it is sent what changed), else one that last compiled
// its source (its cache is warm), else any; or starts one.
func (p *Pool) take(key invKey) (*worker, error) {
	p.mu.Lock()
	pick, best := -1, -1
	for i, w := range p.idle {
		if !w.alive() {
			continue
		}
		score := 0
		switch {
		case key.Source != "" && w.sent.has(key):
			score = 2
		case key.Source != "" && w.lastKey == key.Source:
			score = 1
		}
		if score > best {
			pick, best = i, score
		}
	}
	var w *worker
	if pick >= 0 {
		w = p.idle[pick]
		p.idle = append(p.idle[:pick], p.idle[pick+1:]...)
	}
	// Dead ones go.
	live := p.idle[:0]
	for _, x := range p.idle {
		if x.alive() {
			live = append(live, x)
		}
	}
	p.idle = live
	p.mu.Unlock()
	if w != nil {
		return w, nil
	}
	return p.start()
}

// Close stops the idle workers (busy ones stop when their compile is
// done or killed, and every worker dies with this process).
func (p *Pool) Close() {
	p.init()
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, w := range idle {
		w.stop()
	}
}

// request is one compile, as a worker reads it.
type request struct {
	Dir       string                                `json:"dir"`
	Facts     map[string]map[string]json.RawMessage `json:"facts,omitempty"`
	Instances map[string]map[string]json.RawMessage `json:"instances,omitempty"`
	// InstanceVersions: compiler.Options.InstanceVersions.
	InstanceVersions map[string]map[string]int             `json:"instance_versions,omitempty"`
	Related          map[string]map[string]json.RawMessage `json:"related,omitempty"`
	SourceKey        string                                `json:"source_key,omitempty"`
	UseCache         bool                                  `json:"use_cache,omitempty"`
	Focus            *compiler.Focus                       `json:"focus,omitempty"`
	// CPU is the CPU time the compile may use (0: no limit).
	CPU time.Duration `json:"cpu,omitempty"`
	// Env is the environment the compile is for: with SourceKey, the
	// key of the inventory the worker keeps (inventory.go).
	Env string `json:"env,omitempty"`
	// Gen, when not 0, asks the worker to keep this compile's inventory
	// as generation Gen of its key.
	Gen uint64 `json:"gen,omitempty"`
	// Delta, instead of Facts, Instances, InstanceVersions and Related,
	// is the inventory as a change of the one the worker keeps.
	Delta *delta `json:"delta,omitempty"`
}

// response is a compile's outcome, as a worker writes it.
type response struct {
	Result *result         `json:"result,omitempty"`
	Errors compiler.Errors `json:"errors,omitempty"`
	// Project is intend.yaml's error, when it does not load.
	Project *project.Error `json:"project,omitempty"`
	// Err is another error that is not the model's (an unreadable
	// directory).
	Err string `json:"err,omitempty"`
	// Kept: the worker keeps the compile's inventory as its request's
	// generation.
	Kept bool `json:"kept,omitempty"`
	// Resend: the worker does not keep the generation the delta applies
	// to, and compiled nothing; the inventory must come in full.
	Resend bool `json:"resend,omitempty"`
}

// errResend is a worker's answer to a delta it cannot apply.
var errResend = errors.New("the compile worker asks for the whole inventory")

// result is compiler.Result on the wire: Origin is not part of a
// resource's JSON, so it travels beside it.
type result struct {
	Project    project.Project                       `json:"project"`
	Resources  []compiler.Resource                   `json:"resources"`
	Origins    []string                              `json:"origins"`
	Instances  int                                   `json:"instances"`
	Undefined  int                                   `json:"undefined"`
	Services   []lsm.Entity                          `json:"services"`
	Previous   []lsm.Entity                          `json:"previous_services,omitempty"`
	Pools      []lsm.Pool                            `json:"pools,omitempty"`
	Parameters map[string]map[string]json.RawMessage `json:"parameters,omitempty"`
	Took       time.Duration                         `json:"took"`
	Facts      bool                                  `json:"declares_facts,omitempty"`
}

func toWire(r *compiler.Result) *result {
	w := &result{Project: r.Project, Resources: r.Resources, Instances: r.Instances, Undefined: r.Undefined,
		Services: r.Services, Previous: r.PreviousServices, Pools: r.Pools, Parameters: r.Parameters, Took: r.Took, Facts: r.DeclaresFacts,
		Origins: make([]string, len(r.Resources))}
	for i, res := range r.Resources {
		w.Origins[i] = res.Origin
	}
	return w
}

func (w *result) toResult() *compiler.Result {
	r := &compiler.Result{Project: w.Project, Resources: w.Resources, Instances: w.Instances, Undefined: w.Undefined,
		Services: w.Services, PreviousServices: w.Previous, Pools: w.Pools, Parameters: w.Parameters, Took: w.Took, DeclaresFacts: w.Facts}
	for i := range r.Resources {
		if i < len(w.Origins) {
			r.Resources[i].Origin = w.Origins[i]
		}
	}
	return r
}

// worker is one child process.
type worker struct {
	cmd     *exec.Cmd
	enc     *json.Encoder
	dec     *json.Decoder
	stderr  *childproc.Tail
	exited  chan struct{}
	lastKey string
	// sent is what this worker keeps of each inventory it was sent, and
	// gen the last generation given (inventory.go); its compile's.
	sent retained
	gen  uint64

	mu   sync.Mutex
	dead bool
}

func (p *Pool) start() (*worker, error) {
	bin := p.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("compile worker: %w", err)
		}
	}
	cmd := exec.Command(bin)
	// Nothing of the server's environment (its database URL, tokens)
	// reaches the process that evaluates a model.
	cmd.Env = []string{envWorker + "=1", envMemory + "=" + strconv.FormatInt(p.Memory, 10),
		envCache + "=" + strconv.Itoa(p.CacheResources)}
	for _, k := range []string{"PATH", "TMPDIR", "HOME", "LANG", "GOMAXPROCS", "GOCOVERDIR", EnvProfile} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	// It dies with the server, and a kill takes whatever it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	childproc.DieWithParent(cmd.SysProcAttr)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w := &worker{cmd: cmd, enc: json.NewEncoder(in), dec: json.NewDecoder(bufio.NewReaderSize(out, 1<<16)),
		stderr: &childproc.Tail{Max: 4096}, exited: make(chan struct{})}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a compile worker: %w", err)
	}
	go func() {
		_ = cmd.Wait()
		w.mu.Lock()
		w.dead = true
		w.mu.Unlock()
		close(w.exited)
	}()
	return w, nil
}

func (w *worker) alive() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.dead
}

// stop kills the worker and waits for it.
func (w *worker) stop() {
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	<-w.exited
}

// compile sends one compile and waits for its answer, at most limit;
// kept says whether the worker keeps its inventory (as req.Gen).
func (w *worker) compile(ctx context.Context, req request, limit time.Duration, memory int64) (_ *compiler.Result, kept bool, _ error) {
	w.lastKey = req.SourceKey
	type answer struct {
		resp response
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		if err := w.enc.Encode(req); err != nil {
			done <- answer{err: err}
			return
		}
		var a answer
		a.err = w.dec.Decode(&a.resp)
		done <- a
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case a := <-done:
		if a.err != nil {
			// The worker died under the compile: its memory limit, or
			// a crash.
			w.stop()
			state := w.cmd.ProcessState
			msg := w.stderr.String()
			if state != nil && state.ExitCode() == exitMemory || strings.Contains(msg, "out of memory") {
				return nil, false, &compiler.LimitError{Kind: "memory", Limit: bytesText(memory)}
			}
			if state != nil && state.ExitCode() == exitCPU {
				return nil, false, &compiler.LimitError{Kind: "cpu", Limit: req.CPU.String()}
			}
			return nil, false, fmt.Errorf("the compile worker died: %v: %s", a.err, strings.TrimSpace(msg))
		}
		kept := a.resp.Kept
		switch {
		case a.resp.Resend:
			return nil, false, errResend
		case len(a.resp.Errors) > 0:
			return nil, kept, a.resp.Errors
		case a.resp.Project != nil:
			return nil, kept, a.resp.Project
		case a.resp.Err != "":
			return nil, kept, errors.New(a.resp.Err)
		case a.resp.Result == nil:
			return nil, kept, errors.New("the compile worker answered nothing")
		}
		return a.resp.Result.toResult(), kept, nil
	case <-timer.C:
		w.stop()
		return nil, false, &compiler.LimitError{Kind: "time", Limit: limit.String()}
	case <-ctx.Done():
		w.stop()
		return nil, false, ctx.Err()
	}
}

// serveMain is a worker's main: compiles read from stdin, answered on
// stdout, until stdin closes.
func serveMain() int {
	memory, _ := strconv.ParseInt(os.Getenv(envMemory), 10, 64)
	if memory <= 0 {
		memory = DefaultMemory
	}
	cacheSize, _ := strconv.Atoi(os.Getenv(envCache))
	// The collector works harder as the heap nears the limit; the watch
	// below ends the process past it.
	debug.SetMemoryLimit(memory)
	go watchMemory(memory, 5*time.Millisecond)
	if path := os.Getenv(EnvProfile); path != "" {
		go profile(fmt.Sprintf("%s.%d", path, os.Getpid()), 5*time.Second)
	}
	var cache *compiler.Cache
	if cacheSize > 0 {
		cache = compiler.NewCache(cacheSize)
	}
	cpu := &cpuWatch{}
	go cpu.watch(5 * time.Millisecond)
	// The inventories it keeps between compiles take at most an eighth
	// of its memory: maxRetained of a 32nd each.
	if err := serve(os.Stdin, os.Stdout, cache, cpu, int(memory/32)); err != nil {
		fmt.Fprintln(os.Stderr, "intend compile worker:", err)
		return 1
	}
	return 0
}

// profile writes CPU profiles to path.0, path.1, ..., each of every
// period, until the process ends.
func profile(path string, every time.Duration) {
	for n := 0; ; n++ {
		f, err := os.Create(fmt.Sprintf("%s.%d", path, n))
		if err != nil {
			fmt.Fprintln(os.Stderr, "intend compile worker: profile:", err)
			return
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "intend compile worker: profile:", err)
			f.Close()
			return
		}
		time.Sleep(every)
		pprof.StopCPUProfile()
		f.Close()
	}
}

// serve answers compiles until in closes, each within its CPU time limit
// (cpu; nil: none), keeping the models it builds for compiles that use
// the cache, and the inventories it is asked to keep, each of at most
// keepBytes (inventory.go).
func serve(in io.Reader, out io.Writer, cache *compiler.Cache, cpu *cpuWatch, keepBytes int) error {
	dec := json.NewDecoder(bufio.NewReaderSize(in, 1<<16))
	bw := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(bw)
	var models *compiler.Models
	if cache != nil {
		models = compiler.NewModels(maxRetained)
	}
	var held retained
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		var resp response
		key := invKey{Env: req.Env, Source: req.SourceKey, Focused: req.Focus != nil}
		inv := &inventory{Facts: req.Facts, Instances: req.Instances, InstanceVersions: req.InstanceVersions, Related: req.Related}
		switch {
		case req.Delta != nil:
			k := held.get(key)
			if k == nil || k.gen != req.Delta.Base || req.Gen == 0 {
				held.drop(key)
				resp.Resend = true
				if err := answer(enc, bw, resp); err != nil {
					return err
				}
				continue
			}
			applyInventory(k.inv, req.Delta, false)
			k.gen, inv = req.Gen, k.inv
			resp.Kept = true
		case req.Gen != 0 && req.SourceKey != "":
			held.put(key, req.Gen, inv)
			resp.Kept = true
		}
		if resp.Kept && inv.size() > keepBytes {
			held.drop(key)
			resp.Kept = false
		}
		opts := compiler.Options{Dir: req.Dir, Facts: inv.Facts, Instances: inv.Instances, InstanceVersions: inv.InstanceVersions,
			Related: inv.Related, SourceKey: req.SourceKey, Focus: req.Focus}
		if req.UseCache {
			opts.Cache, opts.Models = cache, models
		}
		if cpu != nil {
			cpu.arm(req.CPU)
		}
		res, err := compiler.Compile(context.Background(), opts)
		if cpu != nil {
			cpu.disarm()
		}
		var errs compiler.Errors
		var pe *project.Error
		switch {
		case err == nil:
			resp.Result = toWire(res)
		case errors.As(err, &errs):
			resp.Errors = errs
		case errors.As(err, &pe):
			resp.Project = pe
		default:
			resp.Err = err.Error()
		}
		// What a worker keeps between compiles must leave the next
		// compile, maybe another environment's, its memory: past a
		// quarter of the limit live, it keeps nothing (and says so:
		// the next compile sends its inventory in full).
		if liveHeap() > int64(keepBytes)*8 {
			held.clear()
			resp.Kept = false
			if models != nil {
				models.Clear()
			}
		}
		if err := answer(enc, bw, resp); err != nil {
			return err
		}
	}
}

// liveHeap is the heap the last collection found live, in bytes.
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// answer writes resp.
func answer(enc *json.Encoder, bw *bufio.Writer, resp response) error {
	if err := enc.Encode(resp); err != nil {
		return err
	}
	return bw.Flush()
}

// watchMemory ends the process with exitMemory once the memory its heap
// and stacks hold passes limit.
func watchMemory(limit int64, every time.Duration) {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	for range time.Tick(every) {
		metrics.Read(samples)
		var used uint64
		for _, s := range samples {
			if s.Value.Kind() == metrics.KindUint64 {
				used += s.Value.Uint64()
			}
		}
		if int64(used) > limit {
			fmt.Fprintf(os.Stderr, "intend compile worker: memory limit of %s passed (%s in use)\n",
				bytesText(limit), bytesText(int64(used)))
			os.Exit(exitMemory)
		}
	}
}

// cpuWatch ends the process with exitCPU once the compile in hand has
// used more than its CPU time (user and system, every thread's: the
// collector's too) since it was armed. The compile's CPU time is the
// process's since it started: a worker compiles one at a time, and its
// only other work is the two watches' ticks.
type cpuWatch struct {
	// deadline is the process CPU time, in nanoseconds, past which the
	// compile in hand stops; 0: none in hand, or no limit.
	deadline atomic.Int64
	limit    atomic.Int64 // the compile's limit, for the message
}

// arm starts the CPU time limit of a compile (0: none).
func (c *cpuWatch) arm(limit time.Duration) {
	if limit <= 0 {
		return
	}
	c.limit.Store(int64(limit))
	c.deadline.Store(int64(processCPU() + limit))
}

// disarm ends it.
func (c *cpuWatch) disarm() { c.deadline.Store(0) }

// watch checks the deadline every period, for ever.
func (c *cpuWatch) watch(every time.Duration) {
	for range time.Tick(every) {
		if d := c.deadline.Load(); d > 0 && int64(processCPU()) > d {
			fmt.Fprintf(os.Stderr, "intend compile worker: CPU time limit of %s passed\n", time.Duration(c.limit.Load()))
			os.Exit(exitCPU)
		}
	}
}

// processCPU is the CPU time this process used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bytesText is n in MiB or GiB.
func bytesText(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
