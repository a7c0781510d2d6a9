package rest_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/intendhq/intend/internal/rabbittest"
)

// The servers the tests run against are started once per test binary, by
// the first test that needs one (shared), and stopped when the binary's
// tests are over.
var (
	sharedMu    sync.Mutex
	sharedVals  = map[string]any{}
	sharedErrs  = map[string]error{}
	sharedStops []func()
)

func TestMain(m *testing.M) {
	code := m.Run()
	sharedMu.Lock()
	for i := len(sharedStops) - 1; i >= 0; i-- {
		sharedStops[i]()
	}
	sharedMu.Unlock()
	os.Exit(code)
}

// shared returns the server named key, started by start on first use and
// stopped (by the stop function start returns) when the test binary ends.
// A start that failed fails every test that asks for it, with its error,
// without starting it again. Use it for any server of these tests (one
// key per server: "rabbitmq", "etcd", ...).
func shared[T any](t testing.TB, key string, start func() (T, func(), error)) T {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if err, ok := sharedErrs[key]; ok {
		t.Fatalf("%s: %v", key, err)
	}
	if v, ok := sharedVals[key]; ok {
		return v.(T)
	}
	v, stop, err := start()
	if err != nil {
		sharedErrs[key] = err
		t.Fatalf("%s: %v", key, err)
	}
	sharedVals[key] = v
	if stop != nil {
		sharedStops = append(sharedStops, stop)
	}
	return v
}

// rabbitPasswordEnv holds the RabbitMQ administrator's password for the
// whole test binary; resources name it as a secret reference.
const rabbitPasswordEnv = "INTEND_SECRET_TEST_RABBITMQ_ADMIN"

// rabbit returns the test binary's RabbitMQ server.
func rabbit(t testing.TB) *rabbittest.RabbitMQ {
	t.Helper()
	return shared(t, "rabbitmq", func() (*rabbittest.RabbitMQ, func(), error) {
		r, err := rabbittest.Start(context.Background(), rabbittest.Options{})
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(os.Stderr, "rest tests: RabbitMQ %s answered after %s\n", r.API(), r.StartTime.Round(1e7))
		os.Setenv(rabbitPasswordEnv, r.Password)
		return r, r.Stop, nil
	})
}
