package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"syscall"
	"time"

	intend "github.com/intendhq/intend"
	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/devtemporal"
	"github.com/intendhq/intend/internal/pgcluster"
	"github.com/intendhq/intend/internal/tracing"
	"github.com/intendhq/intend/server"
)

// stack is what `intend deploy` runs on its data directory: PostgreSQL,
// a Temporal dev server and an intend server with its executor.
type stack struct {
	pg               *pgcluster.Cluster
	ts               *devtemporal.Server
	srv              *server.Server
	token, tokenFile string
}

// stackOptions are what the stack starts with: its data directory, the
// server's logger and tracing.
type stackOptions struct {
	dataDir string
	log     *slog.Logger
	tracing *tracing.Provider
}

// startStack starts the stack on its data directory, saying so on out.
// On an error it stops what it started.
func startStack(ctx context.Context, out io.Writer, o stackOptions) (st *stack, err error) {
	dataDir := o.dataDir
	st = &stack{}
	defer func() {
		if err != nil {
			st.stop(ctx)
			st = nil
		}
	}()
	cfg, err := intend.TemporalDevConfig()
	if err != nil {
		return st, err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return st, err
	}
	began := time.Now()
	fmt.Fprintf(out, "→ starting PostgreSQL in %s\n", filepath.Join(dataDir, "pg"))
	if st.pg, err = pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dataDir, "pg"), Fsync: true}); err != nil {
		return st, fmt.Errorf("start PostgreSQL: %w", err)
	}
	if err := st.pg.EnsureDatabase(ctx, "intend"); err != nil {
		return st, err
	}

	fmt.Fprintf(out, "→ starting Temporal dev server (namespace %s)\n", cfg.Namespace)
	// The ports of temporal.yaml when they are free, others otherwise.
	port, err := childproc.PortOr(cfg.IP, cfg.Port)
	if err != nil {
		return st, err
	}
	uiPort, err := childproc.PortOr(cfg.IP, cfg.UIPort)
	if err != nil {
		return st, err
	}
	if st.ts, err = devtemporal.Start(ctx, devtemporal.Options{
		DBFile: filepath.Join(dataDir, "temporal.db"), Port: port, UIPort: uiPort, Config: cfg,
	}); err != nil {
		return st, fmt.Errorf("start Temporal: %w", err)
	}

	// The CLI's default server address when it is free, so that intend
	// commands reach this server without --server; another port if not.
	if st.token, st.tokenFile, err = deployToken(dataDir); err != nil {
		return st, err
	}
	scfg := server.Config{
		BootstrapToken: st.token, Tracing: o.tracing,
		Listen: defaultListen, DatabaseURL: st.pg.URL("intend"),
		TemporalAddress: st.ts.HostPort(), TemporalNamespace: st.ts.Namespace(), TemporalUI: st.ts.UIAddress(),
		EmbeddedExecutor: true, Log: o.log, ReconcileEvery: 5 * time.Second,
		DataDir: filepath.Join(dataDir, "server"),
		// The command compiles again with the facts a deploy reported.
		NoFactsCompiles: true,
	}
	// One user on one machine: the executor (a child process, as always)
	// runs the resources as the user who runs intend deploy.
	if u, err := user.Current(); err == nil {
		scfg.ExecutorUser, scfg.ExecutorIsInvoker = u.Uid, true
	}
	st.srv, err = server.Start(ctx, scfg)
	if errors.Is(err, syscall.EADDRINUSE) {
		scfg.Listen = "127.0.0.1:0"
		st.srv, err = server.Start(ctx, scfg)
	}
	if err != nil {
		return st, err
	}
	fmt.Fprintf(out, "→ intend server on %s (started in %s)\n", st.base(), time.Since(began).Round(time.Millisecond))
	return st, nil
}

// base is the intend server's URL.
func (st *stack) base() string { return "http://" + st.srv.Addr() }

// stop stops what started, last first: the server (its workers finish
// the tasks in hand), the dev server at once (devtemporal.StopNow: all is
// recorded by then), PostgreSQL.
func (st *stack) stop(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if st.srv != nil {
		st.srv.Shutdown(ctx)
	}
	if st.ts != nil {
		_ = st.ts.StopNow()
	}
	if st.pg != nil {
		_ = st.pg.Stop(ctx)
	}
}

// early starts the stack while the model compiles, when its data
// directory holds one already (a deploy run again): PostgreSQL, Temporal
// and the server take half a second to start, the compile of a large
// model more. What it prints waits until the compile succeeded; a broken
// model stops it again. A first deploy (no data directory yet) compiles
// first, so a broken model creates nothing.
type early struct {
	done chan struct{}
	out  bytes.Buffer
	st   *stack
	err  error
}

// startEarly starts the stack in the background if dataDir has one, and
// returns nil otherwise (whose methods then start it when asked).
func startEarly(ctx context.Context, o stackOptions) *early {
	if _, err := os.Stat(filepath.Join(o.dataDir, "pg")); err != nil {
		return nil
	}
	e := &early{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		e.st, e.err = startStack(ctx, &e.out, o)
	}()
	return e
}

// stack returns the stack once started, having copied what it printed
// to out; without an early start (e is nil) it starts it now.
func (e *early) stack(ctx context.Context, out io.Writer, o stackOptions) (*stack, error) {
	if e == nil {
		return startStack(ctx, out, o)
	}
	<-e.done
	_, _ = out.Write(e.out.Bytes())
	return e.st, e.err
}

// cancel stops the stack started early, if any (the model did not
// compile).
func (e *early) cancel(ctx context.Context) {
	if e == nil {
		return
	}
	<-e.done
	if e.st != nil {
		e.st.stop(ctx)
	}
}
