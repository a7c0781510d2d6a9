package server_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestEmbeddedAgentsAreBounded: agent names are not free workers. An
// author who releases many agent names gets at most MaxEmbeddedAgents of
// them served by the environment's embedded executor, and the agents no
// released version names any more stop being served (before, every name
// ever released became a worker for good).
func TestEmbeddedAgentsAreBounded(t *testing.T) {
	c, _, _ := startValidated(t, server.Config{EmbeddedExecutor: true, MaxEmbeddedAgents: 5,
		ReconcileEvery: time.Second, SchedulerPoll: time.Second})
	env := servertest.NewEnvironment(t, c, "agents", nil)
	dir := t.TempDir()
	release := func(n int) {
		var rs []map[string]any
		for i := range n {
			p := filepath.Join(dir, fmt.Sprintf("f%02d", i))
			rs = append(rs, map[string]any{"id": fmt.Sprintf("fs::File[a%02d,path=%s]", i, p),
				"attributes": map[string]any{"path": p, "content": "x\n"}})
		}
		b, err := json.Marshal(map[string]any{"resources": rs})
		if err != nil {
			t.Fatal(err)
		}
		servertest.Release(t, c, env, b)
	}
	served := func() []string {
		for _, e := range servertest.Executors(t, c, env) {
			if e.Embedded && e.Live {
				return e.Agents
			}
		}
		return nil
	}
	waitServed := func(want []string) {
		t.Helper()
		wait.For(t, fmt.Sprintf("the embedded executor to serve %v", want), 60*time.Second, func() error {
			got := served()
			return wait.Unless(slices.Equal(got, want), "the embedded executor serves %v, want %v", got, want)
		})
	}
	release(40)
	waitServed([]string{"a00", "a01", "a02", "a03", "a04"})
	release(2)
	waitServed([]string{"a00", "a01"})
	var e []client.Executor
	for _, x := range servertest.Executors(t, c, env) {
		if x.Embedded && x.Live {
			e = append(e, x)
		}
	}
	if len(e) != 1 {
		t.Errorf("live embedded executors of the environment: %+v, want one", e)
	}
}
