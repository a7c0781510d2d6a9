package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/executor"
)

// externals runs k executors per agent of the benchmark (benchAgents), or
// with -pool k executors serving every agent (one pool), as
// `intend executor` does on another host (in this process, through the
// intend server's executor API, with an executor token and no database
// credentials), after keeping every agent out of the server's embedded
// executor. It returns once they have registered; they stop when ctx is
// done. opts are given to every executor, after the built-in adapters.
func externals(ctx context.Context, c *client.Client, serverURL, temporalAddr, namespace, env string, k int, opts ...executor.Option) error {
	if err := c.Do(ctx, http.MethodPatch, "/api/v1/environments/"+env,
		map[string]any{"settings": map[string]any{"autostart_agents": []string{}}}, nil); err != nil {
		return err
	}
	agentsOf := benchAgents()
	if env != "bench" {
		agentsOf = []string{"bench"} // the chain's resources
	}
	// A token has at most 64 live executors in an environment: one token
	// per agent, as one per host would be (pooled: one for the pool).
	groups := make([][]string, len(agentsOf))
	for j, a := range agentsOf {
		groups[j] = []string{a}
	}
	if pooled {
		groups = [][]string{agentsOf}
	}
	tokens := make([]string, len(groups))
	for j, g := range groups {
		var tok struct {
			Secret string `json:"token"`
		}
		if err := c.Do(ctx, http.MethodPost, "/api/v1/tokens", map[string]any{"name": fmt.Sprintf("bench-executor-%s-%d", env, j),
			"role": "executor", "environments": []string{env}, "agents": g}, &tok); err != nil {
			return err
		}
		tokens[j] = tok.Secret
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for i := range k * len(groups) {
		cfg := executor.DefaultConfig()
		cfg.Environment, cfg.Agents, cfg.Name = env, groups[i%len(groups)], fmt.Sprintf("bench-%s-%d", env, i)
		cfg.Server.URL, cfg.Server.Token = serverURL, tokens[i%len(groups)]
		cfg.Temporal.Address, cfg.Temporal.Namespace = temporalAddr, namespace
		go func() {
			if err := executor.Run(ctx, cfg, append([]executor.Option{executor.WithBuiltins(), executor.WithLogger(log)}, opts...)...); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "intend-bench: executor %s: %v\n", cfg.Name, err)
			}
		}()
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		execs, err := c.Executors(ctx, env)
		if err != nil {
			return err
		}
		live := 0
		for _, e := range execs {
			if e.Live {
				live++
			}
		}
		if live >= k*len(groups) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d external executors registered in %s within 60 s", live, k*len(groups), env)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
