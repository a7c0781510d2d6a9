// Package pgcluster runs a PostgreSQL cluster from the local server binaries:
// a throwaway one for tests (fsync off, in a temporary directory) or a
// persistent one for embedded mode (data/deploy/pg), which is reused across
// restarts.
//
// The cluster listens on 127.0.0.1 only and trusts every local connection as
// the superuser "postgres"; it is for development and tests, never for
// production data.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/childproc"
)

// Options configures Start.
type Options struct {
	// Dir holds the cluster: data/ (the data directory), run/ (the unix
	// socket) and postgres.log. Required. A data directory already there is
	// reused, so a persistent cluster restarts on its own data.
	Dir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
	// Fsync keeps PostgreSQL's durability settings. Tests leave it false:
	// fsync, synchronous_commit and full_page_writes are turned off, which
	// is several times faster and loses data only on an OS crash.
	Fsync bool
	// Log receives the server log; nil appends it to Dir/postgres.log.
	Log io.Writer
	// MaxConnections is max_connections; 0 means 200.
	MaxConnections int
	// KeepOnParentDeath lets the server outlive this process. By default
	// the kernel kills it when this process dies (Linux only), so a test
	// binary killed by a timeout leaks no server.
	KeepOnParentDeath bool
	// BinDir holds initdb and postgres; "" means FindBinDir.
	BinDir string
	// Password, when set, makes a new cluster require it of every
	// connection (scram-sha-256) instead of trusting local ones, as a
	// production server does; URL then carries it.
	Password string
	// Settings are more server settings, "name=value" each (passed as
	// postgres -c), e.g. shared_preload_libraries=pg_stat_statements.
	Settings []string
}

// Cluster is a running PostgreSQL server started by Start. Its methods are
// safe for concurrent use.
type Cluster struct {
	password string
	dir      string
	dataDir  string
	port     int
	cmd      *exec.Cmd
	logFile  *os.File
	tail     *childproc.Tail

	exited  chan struct{} // closed when the postmaster has exited
	waitErr error         // set before exited is closed

	stopOnce sync.Once
	stopErr  error
}

const (
	startTimeout   = 30 * time.Second
	stopTimeout    = 30 * time.Second
	pollInterval   = 50 * time.Millisecond
	defaultMaxConn = 200
	portAttempts   = 3
	logTailBytes   = 4 << 10
	maxSocketPath  = 107 // sizeof(sun_path) - 1 on Linux
	socketFileName = ".s.PGSQL.65535"
)

var errPortInUse = errors.New("port already in use")

// Start initialises the data directory under opts.Dir if it is not there
// yet, starts postgres and waits until it accepts connections.
//
// When running as root, PostgreSQL refuses to run, so Start runs initdb and
// postgres as the system user "postgres": it chowns opts.Dir to that user
// and adds the search (o+x) bit to any ancestor of opts.Dir the user could
// not otherwise traverse.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("pgcluster: Options.Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	bin := opts.BinDir
	if bin == "" {
		if bin, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	owner, err := serverOwner()
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, dataDir: filepath.Join(dir, "data"), password: opts.Password}
	if err := c.prepare(ctx, bin, owner, opts.Fsync); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}

	if opts.Log == nil {
		f, err := os.OpenFile(filepath.Join(dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("pgcluster: open log: %w", err)
		}
		c.logFile = f
		opts.Log = f
	}
	for attempt := 1; ; attempt++ {
		port := opts.Port
		if port == 0 {
			if port, err = childproc.FreePort("127.0.0.1"); err != nil {
				c.closeLog()
				return nil, fmt.Errorf("pgcluster: %w", err)
			}
		}
		err = c.start(ctx, bin, owner, port, opts)
		if errors.Is(err, errPortInUse) && opts.Port == 0 && attempt < portAttempts {
			// Another process took the free port between our probe and
			// postgres binding it; pick another.
			continue
		}
		if err != nil {
			c.closeLog()
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
		return c, nil
	}
}

// prepare creates the directory tree and runs initdb unless the data
// directory is already initialised.
func (c *Cluster) prepare(ctx context.Context, bin string, owner *runAs, fsync bool) error {
	for _, d := range []string{c.dir, c.socketDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if owner != nil {
		if err := makeTraversable(filepath.Dir(c.dir), owner); err != nil {
			return err
		}
		// The directory may have been created 0700 by os.MkdirTemp or
		// t.TempDir; its new owner needs to enter it.
		if err := os.Chmod(c.dir, 0o755); err != nil {
			return err
		}
		if err := chownTree(c.dir, owner); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		return removeStalePID(c.dataDir)
	}
	// No PG_VERSION: nothing or an interrupted initdb is there, and initdb
	// refuses a non-empty directory.
	if err := os.RemoveAll(c.dataDir); err != nil {
		return err
	}
	err := c.initdb(ctx, bin, owner, fsync, "--locale=C.UTF-8")
	if err != nil {
		// Not every libc ships C.UTF-8 (macOS); the C locale works anywhere.
		if rmErr := os.RemoveAll(c.dataDir); rmErr != nil {
			return rmErr
		}
		if err2 := c.initdb(ctx, bin, owner, fsync, "--no-locale"); err2 != nil {
			return errors.Join(err, err2)
		}
	}
	return nil
}

func (c *Cluster) initdb(ctx context.Context, bin string, owner *runAs, fsync bool, locale string) error {
	args := []string{"-D", c.dataDir, "-U", "postgres", "-A", "trust", "--encoding=UTF8", locale}
	if c.password != "" {
		pw := filepath.Join(c.dir, "pwfile")
		if err := os.WriteFile(pw, []byte(c.password+"\n"), 0o600); err != nil {
			return err
		}
		defer os.Remove(pw)
		if owner != nil {
			if err := os.Chown(pw, int(owner.uid), int(owner.gid)); err != nil {
				return err
			}
		}
		args[5] = "scram-sha-256"
		args = append(args, "--pwfile="+pw)
	}
	if !fsync {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), args...)
	cmd.Dir = c.dir // initdb complains when it cannot return to the caller's cwd
	cmd.SysProcAttr = sysProcAttr(owner, false)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb %s: %w\n%s", locale, err, tailOf(out))
	}
	return nil
}

// start runs the postmaster on port and waits until it accepts connections.
func (c *Cluster) start(ctx context.Context, bin string, owner *runAs, port int, opts Options) error {
	maxConn := opts.MaxConnections
	if maxConn == 0 {
		maxConn = defaultMaxConn
	}
	args := []string{
		"-D", c.dataDir,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=" + strconv.Itoa(maxConn),
	}
	if len(filepath.Join(c.socketDir(), socketFileName)) <= maxSocketPath {
		args = append(args, "-k", c.socketDir())
	} else {
		// A unix socket path longer than sun_path makes postgres fail;
		// TCP is all we use anyway.
		args = append(args, "-c", "unix_socket_directories=")
	}
	if !opts.Fsync {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, s := range opts.Settings {
		args = append(args, "-c", s)
	}

	c.tail = &childproc.Tail{Max: logTailBytes}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Dir = c.dir
	cmd.Stdout = io.MultiWriter(c.tail, opts.Log)
	cmd.Stderr = cmd.Stdout
	// Backends inherit the log pipe; do not wait forever for them.
	cmd.WaitDelay = 10 * time.Second
	cmd.SysProcAttr = sysProcAttr(owner, !opts.KeepOnParentDeath)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	c.cmd, c.port = cmd, port
	c.exited = make(chan struct{})
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()

	if err := c.waitReady(ctx); err != nil {
		select {
		case <-c.exited:
		default:
			childproc.Kill(cmd.Process, c.exited)
		}
		tail := c.tail.String()
		if strings.Contains(tail, "could not bind") || strings.Contains(tail, "already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return fmt.Errorf("%w\npostgres log (tail):\n%s", err, tail)
	}
	return nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var lastErr error
	for {
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited during start: %v", c.waitErr)
		default:
		}
		attemptCtx, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(attemptCtx, c.URL("postgres"))
		cancelAttempt()
		if err == nil {
			return conn.Close(ctx)
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres not accepting connections on port %d: %w (last error: %v)", c.port, ctx.Err(), lastErr)
		case <-c.exited:
		case <-time.After(pollInterval):
		}
	}
}

// URL returns the connection URL of database dbname as the superuser.
func (c *Cluster) URL(dbname string) string {
	if c.password != "" {
		return fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable", url.PathEscape(c.password), c.port, dbname)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, dbname)
}

// Port returns the TCP port the server listens on at 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Dir returns the directory holding the cluster (Options.Dir, absolute).
func (c *Cluster) Dir() string { return c.dir }

// CreateDatabase creates database name as a copy of template ("" means
// PostgreSQL's default, template1). PostgreSQL refuses to copy a template
// while any session is connected to it (it waits up to 5 s for them to
// leave); concurrent copies of one template do not conflict.
func (c *Cluster) CreateDatabase(ctx context.Context, name, template string) error {
	sql := "create database " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		sql += " template " + pgx.Identifier{template}.Sanitize()
	}
	if err := c.exec(ctx, sql); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// EnsureDatabase creates database name unless it exists already.
func (c *Cluster) EnsureDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "select exists (select 1 from pg_database where datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "create database "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// DropDatabase drops database name if it exists, terminating its
// connections.
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	if err := c.exec(ctx, "drop database if exists "+pgx.Identifier{name}.Sanitize()+" with (force)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

func (c *Cluster) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// Stop shuts the server down: a fast shutdown (SIGINT: roll back open
// transactions, checkpoint), then SIGKILL if it has not exited after 30 s or
// when ctx is done. Stop is idempotent.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		c.stopErr = c.stop(ctx)
		c.closeLog()
	})
	return c.stopErr
}

func (c *Cluster) stop(ctx context.Context) error {
	select {
	case <-c.exited:
		return fmt.Errorf("pgcluster: postgres had already exited: %v\n%s", c.waitErr, c.tail.String())
	default:
	}
	// SIGINT asks the postmaster for a fast shutdown.
	if !childproc.Stop(ctx, c.cmd.Process, os.Interrupt, c.exited, stopTimeout) {
		return errors.New("pgcluster: postgres did not shut down in time and was killed")
	}
	return nil
}

func (c *Cluster) closeLog() {
	if c.logFile != nil {
		_ = c.logFile.Close()
	}
}

func (c *Cluster) socketDir() string { return filepath.Join(c.dir, "run") }

// removeStalePID removes postmaster.pid left by a server that was killed.
// postgres does that itself unless the recorded pid now belongs to another
// live process, which is common in containers where pids are reused.
func removeStalePID(dataDir string) error {
	path := filepath.Join(dataDir, "postmaster.pid")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return os.Remove(path)
	}
	if processAlive(pid) && isPostgres(pid) {
		// Leave it: postgres will report that the cluster is in use.
		return nil
	}
	return os.Remove(path)
}

// isPostgres reports whether pid runs postgres; when that cannot be told
// (no /proc) it says yes, so a live server is never displaced.
func isPostgres(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	return strings.Contains(string(b), "postgres")
}

func tailOf(b []byte) string {
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
	}
	return string(b)
}
