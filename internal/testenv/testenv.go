// Package testenv gives integration tests the real services, started once
// per test binary: a throwaway PostgreSQL cluster holding a migrated
// template database, and a Temporal dev server configured by temporal.yaml.
//
// A package opts in from its TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// Each test then takes a database of its own (Database) and shares the dev
// server (Temporal), isolating itself there with names from UniqueName for
// workflow ids, task queues and environments.
//
// When a service cannot start (most often its binary is missing), Main
// prints what to install and exits 1: tests never skip for want of one.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/intendhq/intend/internal/devtemporal"
	"github.com/intendhq/intend/internal/pgcluster"
	"github.com/intendhq/intend/migrations"
)

// TemplateDB is the database, migrated to the newest schema, that every
// database from Database copies.
const TemplateDB = "intend_template"

const (
	startTimeout = 2 * time.Minute
	dbTimeout    = 30 * time.Second
	maxNameLen   = 40
)

var (
	cluster *pgcluster.Cluster
	server  *devtemporal.Server

	// dbSeq numbers databases. Copies of TemplateDB need no lock among
	// themselves: CREATE DATABASE only refuses a template that has open
	// sessions, and a copy in progress is not one.
	dbSeq   atomic.Int64
	nameSeq atomic.Int64
	mainRan atomic.Bool
)

// Main starts the services, runs the tests, stops the services and exits
// with the tests' status. Call it from TestMain and nowhere else.
func Main(m *testing.M) {
	mainRan.Store(true)
	os.Exit(run(m))
}

func run(m *testing.M) int {
	defer stop()
	if fuzzing(os.Args[1:]) {
		// A fuzzing run starts a coordinator and one worker process per
		// core, each through this TestMain; most fuzz targets need no
		// service, so they start on first use (start).
		return m.Run()
	}
	if err := start(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: the integration test services did not start "+
			"(`make tools` installs the PostgreSQL server and the pinned Temporal CLI):\n%v\n", err)
		return 1
	}
	return m.Run()
}

// fuzzing reports whether the test binary was started to fuzz (the go
// command's -test.fuzz, or -test.fuzzworker for a worker).
func fuzzing(args []string) bool {
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		if strings.HasPrefix(a, "test.fuzz=") || a == "test.fuzzworker" || strings.HasPrefix(a, "test.fuzzworker=") {
			return true
		}
	}
	return false
}

var (
	startOnce sync.Once
	startErr  error
	tmpDir    string
)

// start starts PostgreSQL and the Temporal dev server, once per process.
func start() error {
	startOnce.Do(func() { startErr = startServices() })
	return startErr
}

func startServices() error {
	dir, err := os.MkdirTemp("", "intend-testenv-")
	if err != nil {
		return err
	}
	tmpDir = dir
	// PostgreSQL runs as user postgres when we are root; it has to reach
	// the cluster below this directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var pgErr, temporalErr error
	var wg sync.WaitGroup
	wg.Go(func() { cluster, pgErr = startPostgres(ctx, filepath.Join(dir, "pg")) })
	wg.Go(func() { server, temporalErr = devtemporal.Start(ctx, devtemporal.Options{UIPort: -1}) })
	wg.Wait()
	return errors.Join(pgErr, temporalErr)
}

// started makes sure the services run: Main started them, or this is a
// fuzzing process that starts them now, at its first use.
func started() error {
	if !mainRan.Load() {
		return errors.New("the package's TestMain must call testenv.Main")
	}
	if err := start(); err != nil {
		return fmt.Errorf("the integration test services did not start "+
			"(`make tools` installs the PostgreSQL server and the pinned Temporal CLI): %w", err)
	}
	return nil
}

func startPostgres(ctx context.Context, dir string) (*pgcluster.Cluster, error) {
	c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir})
	if err != nil {
		return nil, err
	}
	if err := c.CreateDatabase(ctx, TemplateDB, ""); err != nil {
		return c, err
	}
	if _, _, err := migrations.Apply(ctx, c.URL(TemplateDB), -1); err != nil {
		return c, fmt.Errorf("migrate %s: %w", TemplateDB, err)
	}
	return c, nil
}

func stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if server != nil {
		if err := server.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		}
	}
	if cluster != nil {
		if err := cluster.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		}
	}
	if tmpDir != "" {
		os.RemoveAll(tmpDir)
	}
}

// ProcessDir returns a directory of this test process's own, removed
// when its TestMain ends: for what a test binary makes once (a built
// binary), which a temporary directory of its own would leave behind.
func ProcessDir(t testing.TB) string {
	t.Helper()
	if err := started(); err != nil {
		t.Fatal(err)
	}
	return tmpDir
}

// Database creates a database of the newest schema for t alone and returns
// its URL. It is dropped when t ends, open connections or not.
func Database(t testing.TB) string {
	t.Helper()
	if err := started(); err != nil {
		t.Fatalf("testenv.Database: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), dbTimeout)
	defer cancel()
	name := "t_" + strconv.FormatInt(dbSeq.Add(1), 10)
	if err := cluster.CreateDatabase(ctx, name, TemplateDB); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
		defer cancel()
		if err := cluster.DropDatabase(ctx, name); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	return cluster.URL(name)
}

// Temporal returns the shared dev server's client (do not close it), its
// frontend address and its namespace. Tests share the server: use
// UniqueName for workflow ids and task queues.
func Temporal(t testing.TB) (c client.Client, hostPort, namespace string) {
	t.Helper()
	if err := started(); err != nil {
		t.Fatalf("testenv.Temporal: %v", err)
	}
	return server.Client(), server.HostPort(), server.Namespace()
}

// UniqueName returns a name unique within the test binary and unlikely to
// clash beyond it, built from prefix and t's name for readable histories:
// lowercase letters, digits and single dashes, starting with a letter, at
// most 40 bytes. It suits environment names, workflow ids and task queues.
func UniqueName(t testing.TB, prefix string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	suffix := []byte("-" + strconv.FormatInt(nameSeq.Add(1), 36))
	for range 4 {
		suffix = append(suffix, alphabet[rand.IntN(len(alphabet))])
	}
	base := sanitize(prefix)
	if test := sanitize(strings.TrimPrefix(t.Name(), "Test")); test != "" {
		base = strings.Trim(base+"-"+test, "-")
	}
	if base == "" || base[0] < 'a' || base[0] > 'z' {
		base = strings.TrimSuffix("t-"+base, "-")
	}
	if room := maxNameLen - len(suffix); len(base) > room {
		base = strings.TrimRight(base[:room], "-")
	}
	return base + string(suffix)
}

// sanitize lowercases s and turns every run of other characters than
// [a-z0-9] into one dash, trimming dashes at the ends.
func sanitize(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	return b.String()
}
