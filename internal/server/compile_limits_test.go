package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/exectest"
	"github.com/intendhq/intend/internal/server"
)

// TestModelsThatExplode: the model (each line doubles a string;
// 28 lines ask for 1 GiB) and one that computes for minutes, uploaded as
// an environment's model: each is a 422 naming the limit it hit, the
// server's own memory does not grow, and it goes on serving (a good model
// uploads next).
func TestModelsThatExplode(t *testing.T) {
	c, _, _ := exectest.StartServer(t, server.Config{EmbeddedExecutor: true, CompileMemory: 256 << 20,
		CompileTimeout: 3 * time.Second})
	ctx := context.Background()
	env := newEnv(t, c, "boom", nil)

	var doubling strings.Builder
	doubling.WriteString("package main\n\na0: \"abcd\"\n")
	for i := 1; i <= 28; i++ {
		fmt.Fprintf(&doubling, "a%d: a%d + a%d\n", i, i-1, i-1)
	}
	const slow = "package main\n\nimport \"list\"\n\nx: list.Sum([for i in list.Range(0, 200000, 1) {i * 2}])\n"

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, tc := range []struct{ why, model, want string }{
		{"1 GiB of string", doubling.String(), "memory limit of 256 MiB"},
		{"minutes of arithmetic", slow, "time limit of 3s"},
	} {
		start := time.Now()
		err := uploadModel(t, c, env, tc.model)
		var p *api.Problem
		if !errors.As(err, &p) || p.Status != 422 || p.Type != api.TypeValidation || !strings.Contains(p.Detail, tc.want) {
			t.Errorf("%s: %v, want a 422 naming the %s", tc.why, err, tc.want)
		}
		t.Logf("%s: %v after %v", tc.why, err, time.Since(start).Round(time.Millisecond))
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 64<<20 {
		t.Errorf("the server's heap grew by %d MiB over the two compiles, want them out of its process", grew>>20)
	}
	if err := c.Do(ctx, http.MethodGet, "/healthz", nil, nil); err != nil {
		t.Fatalf("the server after the compiles: %v", err)
	}
	if err := uploadModel(t, c, env, catalogModel); err != nil {
		t.Fatalf("a good model after the bad ones: %v", err)
	}
}
