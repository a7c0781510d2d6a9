package pluginhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/plugin"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/testenv/wait"
)

// lifePlugin is testdata/lifeplugin built once for the test binary.
var lifePlugin struct {
	once sync.Once
	path string
	err  error
}

func lifeBinary(t testing.TB) []byte {
	t.Helper()
	lifePlugin.once.Do(func() {
		dir, err := os.MkdirTemp("", "lifeplugin")
		if err != nil {
			lifePlugin.err = err
			return
		}
		lifePlugin.path = filepath.Join(dir, "lifeplugin")
		out, err := exec.Command("go", "build", "-o", lifePlugin.path, "./testdata/lifeplugin").CombinedOutput()
		if err != nil {
			lifePlugin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if lifePlugin.err != nil {
		t.Fatal(lifePlugin.err)
	}
	b, err := os.ReadFile(lifePlugin.path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMain(m *testing.M) {
	code := m.Run()
	if lifePlugin.path != "" {
		os.RemoveAll(filepath.Dir(lifePlugin.path))
	}
	os.Exit(code)
}

// store is the artifacts a test's host fetches, by digest, and counts
// the fetches.
type store struct {
	mu      sync.Mutex
	blobs   map[string][]byte
	fetches int
}

func (s *store) put(b []byte) string {
	sum := sha256.Sum256(b)
	d := "sha256:" + hex.EncodeToString(sum[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blobs == nil {
		s.blobs = map[string][]byte{}
	}
	s.blobs[d] = b
	return d
}

func (s *store) fetch(_ context.Context, env, digest string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetches++
	b, ok := s.blobs[digest]
	if !ok {
		return nil, adapters.Permanent(fmt.Errorf("artifact %s not found in %s", digest, env))
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// variant is the plugin with n bytes appended: another digest, the same
// program (an ELF executable runs with bytes after its end).
func variant(b []byte, n int) []byte {
	return append(bytes.Clone(b), bytes.Repeat([]byte{'#'}, n)...)
}

func newTestHost(t *testing.T, opts Options) (*Host, *store) {
	t.Helper()
	s := &store{}
	opts.CacheDir = t.TempDir()
	opts.Fetch = s.fetch
	if opts.PollInterval == 0 {
		opts.PollInterval = 50 * time.Millisecond
	}
	opts.Log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := New(opts)
	t.Cleanup(func() { h.Close() })
	return h, s
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func lifeRef(digest string) ledger.Plugin {
	return ledger.Plugin{Name: "life", Runtime: RuntimeExec, Types: []string{"test::Life"},
		Artifacts: map[string]string{goosArch(): digest}}
}

func res(t testing.TB, name string, attrs map[string]any) adapters.Resource {
	id, err := resource.Parse("test::Life[agent1,name=" + name + "]")
	if err != nil {
		t.Fatal(err)
	}
	if attrs == nil {
		attrs = map[string]any{}
	}
	return adapters.Resource{ID: id, Attributes: attrs}
}

// pidOf observes a resource and returns the pid the plugin logged.
func pidOf(t *testing.T, h adapters.Handler) int {
	t.Helper()
	hc := adapters.NewContext()
	if _, err := h.Observe(context.Background(), hc, res(t, "pid", nil)); err != nil {
		t.Fatal(err)
	}
	for _, l := range hc.Logs() {
		if v, ok := l.Attrs["pid"]; ok {
			pid, err := strconv.Atoi(fmt.Sprint(v))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no pid in %v", hc.Logs())
	return 0
}

func alive(pid int) bool {
	// A zombie is not alive: its status says so.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	return err == nil && !strings.Contains(string(b), "State:\tZ")
}

// The first calls start the plugin once, however many arrive at once;
// later calls and handlers reuse it.
func TestStartOnceAndReuse(t *testing.T) {
	h, s := newTestHost(t, Options{})
	ref := lifeRef(s.put(lifeBinary(t)))
	var wg sync.WaitGroup
	pids := make([]int, 20)
	for i := range pids {
		wg.Go(func() {
			hd, err := h.Handler(context.Background(), "env1", ref, "test::Life")
			if err != nil {
				t.Error(err)
				return
			}
			pids[i] = pidOf(t, hd)
		})
	}
	wg.Wait()
	for _, pid := range pids[1:] {
		if pid != pids[0] {
			t.Fatalf("pids %v: want one process", pids)
		}
	}
	hd, err := h.Handler(context.Background(), "env1", ref, "test::Life")
	if err != nil {
		t.Fatal(err)
	}
	if pid := pidOf(t, hd); pid != pids[0] {
		t.Fatalf("a later handler runs in pid %d, want %d", pid, pids[0])
	}
	if st := h.Stats(); st.Starts != 1 || st.Live != 1 {
		t.Fatalf("stats %+v: want 1 start, 1 live", st)
	}
	if s.fetches != 1 {
		t.Fatalf("%d fetches, want 1", s.fetches)
	}
	// The cache: the artifact under its digest, executable by its owner only.
	fi, err := os.Stat(filepath.Join(h.opts.CacheDir, "sha256", strings.TrimPrefix(ref.Artifacts[goosArch()], "sha256:")))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o500 {
		t.Fatalf("cached artifact mode %v, want 0500", fi.Mode().Perm())
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pids[0]) {
		t.Fatalf("pid %d still runs after Close", pids[0])
	}
}

// A plugin that exits while a batch's calls are in flight: every call
// fails transient with the exit status and the plugin's last stderr
// lines, none is lost or hangs, and the next call starts it again.
func TestCrashFailsCallsInFlightTransient(t *testing.T) {
	h, s := newTestHost(t, Options{})
	hd, err := h.Handler(context.Background(), "env1", lifeRef(s.put(lifeBinary(t))), "test::Life")
	if err != nil {
		t.Fatal(err)
	}
	first := pidOf(t, hd)
	errs := make([]error, 20)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// Every call is in flight when call 7 ends the process.
			attrs := map[string]any{"delay_ms": 3000}
			if i == 7 {
				attrs = map[string]any{"delay_ms": 200, "exit": true}
			}
			errs[i] = hd.Create(ctx, adapters.NewContext(), res(t, fmt.Sprint("r", i), attrs))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			t.Errorf("call %d: no error", i)
			continue
		}
		if adapters.ClassOf(err) != adapters.ClassTransient {
			t.Errorf("call %d: class %q, want transient: %v", i, adapters.ClassOf(err), err)
		}
		for _, want := range []string{"plugin life (sha256:", "exit status 2", "lifeplugin: exiting in Create"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("call %d: %v: want %q in it", i, err, want)
			}
		}
	}
	second := pidOf(t, hd)
	if second == first {
		t.Fatalf("the same pid %d after the crash", first)
	}
	if st := h.Stats(); st.Starts != 2 || st.Crashes != 1 || st.Live != 1 {
		t.Fatalf("stats %+v: want 2 starts, 1 crash, 1 live", st)
	}
}

// A plugin whose resident memory passes MaxRSS is killed: its calls in
// flight fail transient, saying so; the next call starts it again.
func TestMemoryLimitKills(t *testing.T) {
	h, s := newTestHost(t, Options{MaxRSS: 64 << 20})
	hd, err := h.Handler(context.Background(), "env1", lifeRef(s.put(lifeBinary(t))), "test::Life")
	if err != nil {
		t.Fatal(err)
	}
	first := pidOf(t, hd)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = hd.Create(ctx, adapters.NewContext(), res(t, "big", map[string]any{"alloc_mb": 200}))
	if err == nil || adapters.ClassOf(err) != adapters.ClassTransient || !strings.Contains(err.Error(), "plugin life (sha256:") ||
		!strings.Contains(err.Error(), "exceeded its memory limit") {
		t.Fatalf("got %v, want a transient failure: plugin life … exceeded its memory limit", err)
	}
	wait.For(t, "the killed plugin to be gone", 20*time.Second, func() error { return wait.Unless(!alive(first), "pid %d alive", first) })
	if pid := pidOf(t, hd); pid == first {
		t.Fatal("the same process after the kill")
	}
	if st := h.Stats(); st.MemoryKills != 1 || st.Crashes != 0 || st.Starts != 2 {
		t.Fatalf("stats %+v: want 1 memory kill, no crash, 2 starts", st)
	}
}

// A call the plugin does not answer by its deadline plus CallGrace kills
// the plugin; the caller had its answer at the deadline, the other calls
// in flight fail transient, the next call starts it again.
func TestUnansweredCallKills(t *testing.T) {
	h, s := newTestHost(t, Options{CallGrace: 300 * time.Millisecond})
	hd, err := h.Handler(context.Background(), "env1", lifeRef(s.put(lifeBinary(t))), "test::Life")
	if err != nil {
		t.Fatal(err)
	}
	first := pidOf(t, hd)
	// A call without a deadline, in flight when the plugin is killed.
	other := make(chan error, 1)
	go func() {
		other <- hd.Create(context.Background(), adapters.NewContext(), res(t, "other", map[string]any{"hang": true}))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	err = hd.Create(ctx, adapters.NewContext(), res(t, "hung", map[string]any{"hang": true}))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the deadline", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("the caller waited %s past its deadline of 200 ms", d)
	}
	select {
	case err := <-other:
		if adapters.ClassOf(err) != adapters.ClassTransient || !strings.Contains(err.Error(), "did not answer a call") {
			t.Fatalf("the other call: %v, want transient: … did not answer a call", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the other call still waits 20 s after the deadline")
	}
	wait.For(t, "the killed plugin to be gone", 20*time.Second, func() error { return wait.Unless(!alive(first), "pid %d alive", first) })
	if pid := pidOf(t, hd); pid == first {
		t.Fatal("the same process after the kill")
	}
	if st := h.Stats(); st.TimeKills != 1 || st.Starts != 2 {
		t.Fatalf("stats %+v: want 1 time kill, 2 starts", st)
	}
}

// A call answered after its deadline but within the grace kills nothing.
func TestLateAnswerWithinGraceKillsNothing(t *testing.T) {
	h, s := newTestHost(t, Options{CallGrace: 5 * time.Second})
	hd, err := h.Handler(context.Background(), "env1", lifeRef(s.put(lifeBinary(t))), "test::Life")
	if err != nil {
		t.Fatal(err)
	}
	first := pidOf(t, hd)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	// The plugin sleeps 400 ms whatever its deadline says.
	err = hd.Create(ctx, adapters.NewContext(), res(t, "slow", map[string]any{"delay_ms": 400}))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the deadline", err)
	}
	time.Sleep(time.Second)
	if pid := pidOf(t, hd); pid != first {
		t.Fatalf("pid %d after a late answer, want %d", pid, first)
	}
	if st := h.Stats(); st.TimeKills != 0 || st.Starts != 1 {
		t.Fatalf("stats %+v: want no kill, 1 start", st)
	}
}

// A plugin without calls for IdleTimeout is stopped; the next call
// starts it again.
func TestIdleStop(t *testing.T) {
	h, s := newTestHost(t, Options{IdleTimeout: 300 * time.Millisecond})
	hd, err := h.Handler(context.Background(), "env1", lifeRef(s.put(lifeBinary(t))), "test::Life")
	if err != nil {
		t.Fatal(err)
	}
	first := pidOf(t, hd)
	wait.For(t, "the idle stop", 20*time.Second, func() error { return wait.Unless(h.Stats().Live == 0, "stats %+v", h.Stats()) })
	wait.For(t, "the idle plugin to be gone", 20*time.Second, func() error { return wait.Unless(!alive(first), "pid %d alive", first) })
	if pid := pidOf(t, hd); pid == first {
		t.Fatal("the same process after the idle stop")
	}
	if st := h.Stats(); st.IdleStops != 1 || st.Crashes != 0 || st.Starts != 2 {
		t.Fatalf("stats %+v: want 1 idle stop, no crash, 2 starts", st)
	}
}

// Over MaxPlugins, the least recently used idle plugin is stopped; with
// none idle, the call fails transient.
func TestMaxPlugins(t *testing.T) {
	h, s := newTestHost(t, Options{MaxPlugins: 2})
	bin := lifeBinary(t)
	var hds []adapters.Handler
	var pids []int
	for i := range 3 {
		hd, err := h.Handler(context.Background(), "env1", lifeRef(s.put(variant(bin, i))), "test::Life")
		if err != nil {
			t.Fatal(err)
		}
		hds = append(hds, hd)
		pids = append(pids, pidOf(t, hd))
	}
	wait.For(t, "the first plugin to be stopped", 20*time.Second, func() error { return wait.Unless(!alive(pids[0]), "pid %d alive", pids[0]) })
	if !alive(pids[1]) || !alive(pids[2]) {
		t.Fatal("a recently used plugin was stopped")
	}
	if st := h.Stats(); st.LRUStops != 1 || st.Live != 2 {
		t.Fatalf("stats %+v: want 1 LRU stop, 2 live", st)
	}
	// Both running plugins busy: a third cannot start.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, hd := range hds[1:] {
		wg.Go(func() { hd.Create(ctx, adapters.NewContext(), res(t, "busy", map[string]any{"alloc_mb": 1})) })
	}
	wait.For(t, "two calls in flight", 20*time.Second, func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		n := 0
		for _, sl := range h.slots {
			if sl.proc != nil {
				n += sl.proc.inflight
			}
		}
		return wait.Unless(n == 2, "%d in flight", n)
	})
	_, err := h.Handler(context.Background(), "env1", lifeRef(s.put(variant(bin, 0))), "test::Life")
	if adapters.ClassOf(err) != adapters.ClassTransient || !strings.Contains(err.Error(), "all of them busy") {
		t.Fatalf("got %v, want transient: … all of them busy", err)
	}
	cancel()
	wg.Wait()
}

// An artifact whose content is not its digest never runs: fetched, or
// changed in the cache before a start (restarts included).
func TestDigestMismatchRefused(t *testing.T) {
	bin := lifeBinary(t)
	t.Run("fetched", func(t *testing.T) {
		h, s := newTestHost(t, Options{})
		digest := s.put(bin)
		other := s.put(variant(bin, 1))
		s.blobs[digest] = s.blobs[other] // the store serves the wrong bytes
		_, err := h.Handler(context.Background(), "env1", lifeRef(digest), "test::Life")
		if adapters.ClassOf(err) != adapters.ClassPermanent {
			t.Fatalf("got %v, want permanent", err)
		}
		want := "plugin life: artifact " + digest + " has digest " + other + ": refusing to run it"
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want %q", err, want)
		}
		if st := h.Stats(); st.Starts != 0 {
			t.Fatalf("stats %+v: started", st)
		}
		entries, _ := os.ReadDir(filepath.Join(h.opts.CacheDir, "sha256"))
		if len(entries) != 0 {
			t.Fatalf("the cache keeps %v", entries)
		}
	})
	t.Run("cached, before a restart", func(t *testing.T) {
		h, s := newTestHost(t, Options{})
		digest := s.put(bin)
		hd, err := h.Handler(context.Background(), "env1", lifeRef(digest), "test::Life")
		if err != nil {
			t.Fatal(err)
		}
		pid := pidOf(t, hd)
		syscall.Kill(pid, syscall.SIGKILL)
		wait.For(t, "the plugin's exit to be seen", 20*time.Second, func() error { return wait.Unless(h.Stats().Live == 0, "stats %+v", h.Stats()) })
		path := filepath.Join(h.opts.CacheDir, "sha256", strings.TrimPrefix(digest, "sha256:"))
		if err := os.Chmod(path, 0o700); err != nil {
			t.Fatal(err)
		}
		changed := variant(bin, 3)
		if err := os.WriteFile(path, changed, 0o700); err != nil {
			t.Fatal(err)
		}
		err = hd.Create(context.Background(), adapters.NewContext(), res(t, "x", nil))
		sum := sha256.Sum256(changed)
		want := "plugin life: artifact " + digest + " has digest sha256:" + hex.EncodeToString(sum[:]) + ": refusing to run it"
		if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want permanent: %q", err, want)
		}
		if st := h.Stats(); st.Starts != 1 {
			t.Fatalf("stats %+v: started again", st)
		}
		// The changed file is gone from the cache: the next start fetches
		// the artifact again and verifies that.
		if err := hd.Create(context.Background(), adapters.NewContext(), res(t, "x", nil)); err != nil {
			t.Fatal(err)
		}
		if s.fetches != 2 {
			t.Fatalf("%d fetches, want 2", s.fetches)
		}
	})
}

// What a version names that this executor cannot run fails permanently,
// naming the plugin, before anything is fetched.
func TestRefusedRefs(t *testing.T) {
	h, s := newTestHost(t, Options{})
	digest := s.put([]byte("not fetched"))
	for _, tc := range []struct {
		reason string
		ref    ledger.Plugin
		typ    string
		want   string
	}{
		{"no artifact for this platform", ledger.Plugin{Name: "kv", Runtime: RuntimeExec, Types: []string{"kv::Entry"},
			Artifacts: map[string]string{"plan9/mips": digest}}, "kv::Entry", "plugin kv has no artifact for platform " + goosArch()},
		{"python3's platform is any", ledger.Plugin{Name: "ini", Runtime: RuntimePython3, Types: []string{"ini::Option"},
			Artifacts: map[string]string{goosArch(): digest}}, "ini::Option", "plugin ini has no artifact for platform any"},
		{"unknown runtime", ledger.Plugin{Name: "kv", Runtime: "jvm", Types: []string{"kv::Entry"},
			Artifacts: map[string]string{"any": digest}}, "kv::Entry", `plugin kv: unknown runtime "jvm"`},
		{"a type it does not serve", ledger.Plugin{Name: "kv", Runtime: RuntimeExec, Types: []string{"kv::Entry"},
			Artifacts: map[string]string{goosArch(): digest}}, "kv::Other", "plugin kv does not serve kv::Other"},
		{"malformed digest", ledger.Plugin{Name: "kv", Runtime: RuntimeExec, Types: []string{"kv::Entry"},
			Artifacts: map[string]string{goosArch(): "sha256:00"}}, "kv::Entry", `plugin kv: malformed digest "sha256:00"`},
	} {
		_, err := h.Handler(context.Background(), "env1", tc.ref, tc.typ)
		if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want permanent: %q", tc.reason, err, tc.want)
		}
	}
	if s.fetches != 0 {
		t.Fatalf("%d fetches", s.fetches)
	}
}

// Expire reaches every running plugin; Close stops them all, failing
// the calls in flight transient, and starts none after.
func TestExpireAndClose(t *testing.T) {
	h, s := newTestHost(t, Options{})
	bin := lifeBinary(t)
	var pids []int
	var hd adapters.Handler
	for i := range 2 {
		var err error
		hd, err = h.Handler(context.Background(), "env1", lifeRef(s.put(variant(bin, i))), "test::Life")
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pidOf(t, hd))
	}
	if err := h.Expire(context.Background(), []adapters.Scope{{Environment: "env1", Version: 3}}); err != nil {
		t.Fatal(err)
	}
	// A plugin without the "diff" capability: the engine's diff, through
	// the host's handler too.
	r := res(t, "d", map[string]any{"a": "x"})
	d := hd.(adapters.Differ).Diff(r, adapters.Observation{Exists: true, Attributes: map[string]any{"a": "y"}})
	if len(d) != 1 || d["a"].From != "y" || d["a"].To != "x" {
		t.Fatalf("diff %v", d)
	}
	inFlight := make(chan error, 1)
	go func() {
		inFlight <- hd.Create(context.Background(), adapters.NewContext(), res(t, "hung", map[string]any{"hang": true}))
	}()
	wait.For(t, "the call in flight", 20*time.Second, func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, sl := range h.slots {
			if sl.proc != nil && sl.proc.inflight > 0 {
				return nil
			}
		}
		return errors.New("no call in flight")
	})
	h.Close()
	if err := <-inFlight; adapters.ClassOf(err) != adapters.ClassTransient || !strings.Contains(err.Error(), "the executor is stopping") {
		t.Fatalf("the call in flight: %v, want transient: the executor is stopping …", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Fatalf("pid %d runs after Close", pid)
		}
	}
	_, err := h.Handler(context.Background(), "env1", lifeRef(s.put(bin)), "test::Life")
	if adapters.ClassOf(err) != adapters.ClassTransient {
		t.Fatalf("a handler after Close: %v, want transient", err)
	}
}

// A plugin started by hand says what it is and exits 1.
func TestStartedByHand(t *testing.T) {
	lifeBinary(t)
	out, err := exec.Command(lifePlugin.path).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("got %v, want exit status 1", err)
	}
	if want := "lifeplugin is an intend adapter plugin (it serves test::Life): an intend executor starts it"; !strings.Contains(string(out), want) {
		t.Fatalf("output %q, want %q", out, want)
	}
}

// Types starts the plugin and answers what its Describe says, whatever
// the ref's Types; the handler of one of them then reuses the process.
func TestTypes(t *testing.T) {
	h, s := newTestHost(t, Options{})
	ref := lifeRef(s.put(lifeBinary(t)))
	ref.Types = nil
	types, err := h.Types(context.Background(), "env1", ref)
	if err != nil || !slices.Equal(types, []string{"test::Life"}) {
		t.Fatalf("Types = %v, %v; want [test::Life]", types, err)
	}
	if st := h.Stats(); st.Starts != 1 || st.Live != 1 {
		t.Fatalf("stats %+v after Types: want 1 start, 1 live", st)
	}
	ref.Types = types
	hd, err := h.Handler(context.Background(), "env1", ref, "test::Life")
	if err != nil {
		t.Fatal(err)
	}
	pidOf(t, hd)
	if st := h.Stats(); st.Starts != 1 {
		t.Fatalf("stats %+v: the handler started the plugin again", st)
	}
	ref.Runtime = "java"
	if _, err := h.Types(context.Background(), "env1", ref); adapters.ClassOf(err) != adapters.ClassPermanent {
		t.Fatalf("Types of runtime java = %v, want a permanent error", err)
	}
}

// A Python plugin that does not start (here: its interpreter lacks
// python3-grpcio) fails transient with what it wrote on stderr and a
// hint about its interpreter, not about the executor's platform.
func TestPythonPluginThatDoesNotStart(t *testing.T) {
	python := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(python, []byte("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'grpc'\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h, s := newTestHost(t, Options{Python: python})
	digest := s.put([]byte("PK not really a zipapp"))
	ref := ledger.Plugin{Name: "ini", Runtime: RuntimePython3, Types: []string{"ini::Option"},
		Artifacts: map[string]string{"any": digest}}
	_, err := h.Handler(context.Background(), "env1", ref, "ini::Option")
	if adapters.ClassOf(err) != adapters.ClassTransient {
		t.Fatalf("got %v, want transient", err)
	}
	for _, want := range []string{"plugin ini (" + digest[:len("sha256:")+12] + "…): start:",
		"a Python zipapp run by " + python + " (with python3-grpcio and python3-protobuf)",
		"last stderr: ModuleNotFoundError: No module named 'grpc'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q in it", err, want)
		}
	}
	if strings.Contains(err.Error(), goosArch()) {
		t.Errorf("got %v: a Python plugin's platform is any", err)
	}
}

// A cache directory another local user may write is refused before
// anything runs from it: that user could swap a verified artifact
// between its hash and its exec (review of issue 30).
func TestCacheDirOthersMayWriteRefused(t *testing.T) {
	bin := lifeBinary(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"world-writable", func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}, "may be written by others (mode 0777)"},
		{"its sha256 directory group-writable", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "sha256"), 0o770); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(dir, "sha256"), 0o770); err != nil {
				t.Fatal(err)
			}
		}, "may be written by others (mode 0770)"},
		{"made by another user", func(t *testing.T, dir string) {
			if os.Geteuid() != 0 {
				t.Fatal("needs root to give the directory to another user: run the tests as root, as CI does")
			}
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "belongs to user id 65534"},
		{"a link", func(t *testing.T, dir string) {
			real := t.TempDir()
			if err := os.Symlink(real, filepath.Join(dir, "sha256")); err != nil {
				t.Fatal(err)
			}
		}, "is not a directory (a link?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, s := newTestHost(t, Options{})
			tc.setup(t, h.opts.CacheDir)
			_, err := h.Handler(context.Background(), "env1", lifeRef(s.put(bin)), "test::Life")
			if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want permanent: %q", err, tc.want)
			}
			if st := h.Stats(); st.Starts != 0 || s.fetches != 0 {
				t.Fatalf("stats %+v, %d fetches: want nothing fetched or started", st, s.fetches)
			}
		})
	}
}

// The memory limit counts the plugin's child processes too, and the kill
// takes them with it: a plugin that has a child hold the memory does not
// escape MaxRSS (review of issue 30).
func TestMemoryLimitCountsChildren(t *testing.T) {
	h, s := newTestHost(t, Options{MaxRSS: 64 << 20})
	hd, err := h.Handler(context.Background(), "env1", lifeRef(s.put(lifeBinary(t))), "test::Life")
	if err != nil {
		t.Fatal(err)
	}
	first := pidOf(t, hd)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hc := adapters.NewContext()
	err = hd.Create(ctx, hc, res(t, "big-child", map[string]any{"child_alloc_mb": 200}))
	if err == nil || adapters.ClassOf(err) != adapters.ClassTransient || !strings.Contains(err.Error(), "exceeded its memory limit") {
		t.Fatalf("got %v, want a transient failure: plugin life … exceeded its memory limit", err)
	}
	wait.For(t, "the killed plugin to be gone", 20*time.Second, func() error { return wait.Unless(!alive(first), "pid %d alive", first) })
	for _, l := range hc.Logs() {
		if v, ok := l.Attrs["child_pid"]; ok {
			pid, _ := strconv.Atoi(fmt.Sprint(v))
			wait.For(t, "the plugin's child to be gone", 20*time.Second, func() error { return wait.Unless(!alive(pid), "pid %d alive", pid) })
		}
	}
	if st := h.Stats(); st.MemoryKills != 1 {
		t.Fatalf("stats %+v: want 1 memory kill", st)
	}
}

// A plugin starts with none of the executor's variables (its secrets,
// INTEND_*), only PATH, LANG, TMPDIR and go-plugin's handshake ones, in
// the temporary directory, with /dev/null as its standard input.
func TestPluginEnvironment(t *testing.T) {
	t.Setenv("INTEND_SECRET_DB", "hunter2")
	t.Setenv("INTEND_EXECUTOR_TOKEN", "intend_x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "k")
	h, s := newTestHost(t, Options{})
	hd, err := h.Handler(context.Background(), "env1", lifeRef(s.put(lifeBinary(t))), "test::Life")
	if err != nil {
		t.Fatal(err)
	}
	hc := adapters.NewContext()
	if _, err := hd.Observe(context.Background(), hc, res(t, "env", nil)); err != nil {
		t.Fatal(err)
	}
	var env, cwd, stdin string
	for _, l := range hc.Logs() {
		if v, ok := l.Attrs["env"]; ok {
			env, cwd, stdin = fmt.Sprint(v), fmt.Sprint(l.Attrs["cwd"]), fmt.Sprint(l.Attrs["stdin"])
		}
	}
	for _, kv := range strings.Split(env, "\n") {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH", k == "LANG", k == "TMPDIR", strings.HasPrefix(k, "PLUGIN_"), k == plugin.MagicCookieKey:
		default:
			t.Errorf("the plugin's environment has %s", k)
		}
	}
	if cwd != os.TempDir() || stdin != "/dev/null" {
		t.Errorf("the plugin runs in %q with standard input %q, want %q and /dev/null", cwd, stdin, os.TempDir())
	}
}
