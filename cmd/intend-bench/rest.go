package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/intendhq/intend/client"
)

// The REST benchmark (issue 29): -rest N rest::Object resources spread
// round robin over -rest-agents agents, against a real HTTP server
// (nginx's WebDAV) behind a proxy that answers every call after
// -rest-delay, with -rest-in-flight requests in flight in all (the
// adapter's limits.in_flight, per agent and endpoint, is that ÷ the
// agents).
var (
	restN        int
	restAgents   int
	restDelay    time.Duration
	restInFlight int
)

// restAgent is the agent of object i (-rest sets -agents to -rest-agents).
func restAgent(i int) string { return benchAgent(i) }

// restVersion is a version of n objects at endpoint, each with value v.
func restVersion(endpoint string, n, perAgent, v int) []byte {
	type res struct {
		ID         string         `json:"id"`
		Attributes map[string]any `json:"attributes"`
	}
	rs := make([]res, n)
	for i := range rs {
		name := fmt.Sprintf("o%06d", i)
		agent := restAgent(i)
		rs[i] = res{ID: "rest::Object[" + agent + ",name=" + name + "]", Attributes: map[string]any{
			"name":     name,
			"endpoint": endpoint,
			"path":     "/objects/" + agent + "/" + name + ".json",
			"body":     map[string]any{"name": name, "replicas": v, "labels": map[string]any{"tier": "bench"}},
			"limits":   map[string]any{"in_flight": perAgent},
		}}
	}
	b, _ := json.Marshal(map[string]any{"resources": rs})
	return b
}

// benchREST deploys restN objects (every call: a GET that finds nothing,
// then a PUT), repairs them (a GET each, nothing to change), and updates
// them all (a GET and a PUT each), each against the ideal: the calls the
// server answered × the delay ÷ the requests in flight.
func benchREST(ctx context.Context, c *client.Client, pgURL, dir, where string, out io.Writer) ([]row, error) {
	// The server's files in memory where there is a tmpfs: it shares the
	// machine's cores with intend, and spends less of them so.
	davDir := filepath.Join(dir, "nginx")
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if davDir, err = os.MkdirTemp("/dev/shm", "intend-bench-nginx-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(davDir)
	}
	dav, err := startDAV(ctx, davDir)
	if err != nil {
		return nil, err
	}
	defer dav.Stop()
	proxy, err := startSlowProc(dav.URL, restDelay)
	if err != nil {
		return nil, err
	}
	defer proxy.Stop()
	agents := max(restAgents, 1)
	perAgent := max(restInFlight/agents, 1)
	inFlight := perAgent * agents
	fmt.Fprintf(out, "%d rest::Object resources over %d agents (limits.in_flight %d each: %d in flight), "+
		"nginx WebDAV behind a proxy answering every call after %v, %s, Temporal %s; load %s\n",
		restN, agents, perAgent, inFlight, restDelay, where, engine, loadavg())
	var rows []row
	// perObject is the calls a phase makes per object: a GET, and a PUT
	// where the object is missing or differs.
	phase := func(name string, v int, perObject int64) error {
		before, err := proxy.Stats()
		if err != nil {
			return err
		}
		var ver client.VersionInfo
		if name != "repair" {
			if ver, err = c.ExportVersion(ctx, "bench", restVersion(proxy.URL, restN, perAgent, v)); err != nil {
				return err
			}
		}
		cpu0 := treeCPU()
		t0 := time.Now()
		var run client.DeployRun
		if name == "repair" {
			req, err := c.Deploy(ctx, "bench", "full")
			if err != nil {
				return err
			}
			run, err = c.WaitRequest(ctx, "bench", req.ID, 10*time.Minute, nil)
			if err != nil {
				return err
			}
		} else if run, err = releaseAndWait(ctx, c, ver.Version); err != nil {
			return err
		}
		measured := time.Since(t0)
		cpu1 := treeCPU()
		cpu := cpuRow("", cpu0, cpu1)
		var used time.Duration
		for _, k := range []string{"intend", "postgres", "temporal"} {
			used += max(cpu1[k]-cpu0[k], 0)
		}
		after, err := proxy.Stats()
		if err != nil {
			return err
		}
		calls := after.Calls - before.Calls
		if run.Deployed != restN || calls != perObject*int64(restN) {
			return fmt.Errorf("%s: %+v with %d calls, want %d deployed with %d calls", name, run, calls, restN, perObject*int64(restN))
		}
		ideal := time.Duration(calls) * restDelay / time.Duration(inFlight)
		if err := breakdown(ctx, pgURL, run.WorkflowID, out); err != nil {
			return err
		}
		rows = append(rows,
			row{"REST " + name + ": calls answered", fmt.Sprint(calls), fmt.Sprintf("peak %d in flight at the server", after.Peak)},
			row{"REST " + name + ": ideal", ideal.Round(time.Millisecond).String(), fmt.Sprintf("calls × %v ÷ %d in flight", restDelay, inFlight)},
			row{"REST " + name + ": measured, release → all recorded", measured.Round(time.Millisecond).String(),
				fmt.Sprintf("ratio %.2f to the ideal", measured.Seconds()/ideal.Seconds())},
			row{"REST " + name + ": CPU of intend, PostgreSQL and Temporal", cpu.value,
				fmt.Sprintf("%s; %.0f µs per resource", cpu.note, float64(used.Microseconds())/float64(restN))},
		)
		return nil
	}
	for _, p := range []struct {
		name      string
		v         int
		perObject int64
	}{{"create", 1, 2}, {"repair", 1, 1}, {"update", 2, 2}} {
		if err := phase(p.name, p.v, p.perObject); err != nil {
			return nil, err
		}
	}
	return rows, nil
}
