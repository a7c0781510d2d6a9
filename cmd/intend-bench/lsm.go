package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	apiclient "github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/workflows"
)

// lsmModel is a model whose service entity svc (lsm.simple) refines into
// three files under root, named after the instance.
func lsmModel(root string) string {
	return `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#Svc: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name: =~"^[a-z0-9]+$" @lsm(rw)
		size: *1 | int & >=1 @lsm(rw+)
	}
	output: {
		a: fs.#File & {path: "` + root + `/\(parameter.name).a", content: "size=\(parameter.size)\n"}
		b: fs.#File & {path: "` + root + `/\(parameter.name).b", content: "size=\(parameter.size)\n"}
		c: fs.#File & {path: "` + root + `/\(parameter.name).c", content: "size=\(parameter.size)\n"}
	}
}

services: svc: #Svc
`
}

const (
	lsmEnv       = "lsm"
	lsmInventory = "/lsm/v1/service_inventory/svc"
	lsmSingles   = 20
	lsmUpdates   = 10
)

// benchLSM is P7: n service instances created at once through the REST
// API until all are up, then single creates on the idle environment.
// breakdown, when not nil, is called once all n are up.
func benchLSM(ctx context.Context, c *apiclient.Client, files string, n, lsmParallel int, breakdown func(ctx context.Context, singles bool)) ([]row, error) {
	if _, err := c.EnsureEnvironment(ctx, "bench", lsmEnv); err != nil {
		return nil, err
	}
	root := filepath.Join(files, "lsm")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	if err := uploadModel(ctx, c, lsmEnv, lsmModel(root)); err != nil {
		return nil, fmt.Errorf("upload the model: %w", err)
	}

	// 1,000 creates at once, lsmParallel at a time, then wait for all up.
	cpu0 := treeCPU()
	t0 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, lsmParallel)
	var createdAt time.Duration
	for range lsmParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := lsmCreate(ctx, c, fmt.Sprintf("i%05d", i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	createdAt = time.Since(t0)
	for {
		up, bad, err := lsmCount(ctx, c)
		if err != nil {
			return nil, err
		}
		if bad > 0 {
			return nil, fmt.Errorf("%d instances failed or were rejected", bad)
		}
		if up == n {
			break
		}
		// Ten minutes, and 0.3 s an instance beyond 1,000
		// (10,000 take their time).
		if wait := 10*time.Minute + time.Duration(max(0, n-1000))*300*time.Millisecond; time.Since(t0) > wait {
			return nil, fmt.Errorf("%d of %d instances up after %v", up, n, wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
	all := time.Since(t0)
	cpuAll := cpuRow(fmt.Sprintf("CPU of the process tree, P7's %s creates → all up", fmtInt(n)), cpu0, treeCPU())
	if breakdown != nil {
		breakdown(ctx, false)
	}

	// Single creates on the idle environment: create → up.
	lat := make([]time.Duration, lsmSingles)
	for i := range lat {
		t := time.Now()
		inst, err := lsmCreate(ctx, c, fmt.Sprintf("s%05d", i))
		if err != nil {
			return nil, err
		}
		for {
			var got apiclient.ServiceInstance
			if err := lsmCall(ctx, c, http.MethodGet, lsmInventory+"/"+inst.ID, nil, &got); err != nil {
				return nil, err
			}
			if got.State == "up" {
				break
			}
			if got.State == "rejected" || got.State == "failed" {
				return nil, fmt.Errorf("instance %s is %s", inst.ID, got.State)
			}
			if time.Since(t) > time.Minute {
				return nil, fmt.Errorf("instance %s not up after a minute: %s", inst.ID, got.State)
			}
			time.Sleep(10 * time.Millisecond)
		}
		lat[i] = time.Since(t)
	}
	slices.Sort(lat)
	p50, worst := lat[len(lat)/2], lat[len(lat)-1]
	if breakdown != nil {
		breakdown(ctx, true)
	}

	// Updates among the n live instances, one at a time: PATCH → up.
	ulat := make([]time.Duration, min(lsmUpdates, n))
	for i := range ulat {
		var inst apiclient.ServiceInstance
		name := fmt.Sprintf("i%05d", i)
		if err := lsmCall(ctx, c, http.MethodGet, lsmInventory+"/"+name, nil, &inst); err != nil {
			return nil, err
		}
		t := time.Now()
		var upd apiclient.ServiceInstance
		if err := lsmCall(ctx, c, http.MethodPatch, lsmInventory+"/"+inst.ID,
			map[string]any{"current_version": inst.Version, "attributes": map[string]any{"size": 2}}, &upd); err != nil {
			return nil, err
		}
		for {
			var got apiclient.ServiceInstance
			if err := lsmCall(ctx, c, http.MethodGet, lsmInventory+"/"+inst.ID, nil, &got); err != nil {
				return nil, err
			}
			if got.State == "up" && got.Version > upd.Version {
				break
			}
			if got.State == "update_failed" || got.State == "update_rejected" || got.State == "failed" {
				return nil, fmt.Errorf("update of %s: %s", name, got.State)
			}
			if time.Since(t) > time.Minute {
				return nil, fmt.Errorf("update of %s not up after a minute: %s", name, got.State)
			}
			time.Sleep(10 * time.Millisecond)
		}
		ulat[i] = time.Since(t)
	}
	slices.Sort(ulat)
	return []row{
		{fmt.Sprintf("P7 %s service instances (3 files each) created at once → all up", fmtInt(n)), all.Round(time.Millisecond).String(),
			fmt.Sprintf("creates answered in %v, %d at a time (bar ≤ 30 s for 1,000)", createdAt.Round(time.Millisecond), lsmParallel)},
		cpuAll,
		{"P7 one instance create → up, idle", p50.Round(time.Millisecond).String(),
			fmt.Sprintf("p50 of %d, max %v (bar ≤ 300 ms)", lsmSingles, worst.Round(time.Millisecond))},
		{fmt.Sprintf("P7 one update → up among %s live instances", fmtInt(n+lsmSingles)), ulat[len(ulat)/2].Round(time.Millisecond).String(),
			fmt.Sprintf("p50 of %d, max %v (bar ≤ 1 s with 10,000)", len(ulat), ulat[len(ulat)-1].Round(time.Millisecond))},
	}, nil
}

// fmtInt writes n with thousands separators.
func fmtInt(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// lsmCreate creates an instance named name.
func lsmCreate(ctx context.Context, c *apiclient.Client, name string) (apiclient.ServiceInstance, error) {
	var inst apiclient.ServiceInstance
	err := lsmCall(ctx, c, http.MethodPost, lsmInventory,
		map[string]any{"attributes": map[string]any{"name": name}}, &inst)
	if err != nil {
		return inst, fmt.Errorf("create %s: %w", name, err)
	}
	return inst, nil
}

// lsmCount counts the instances up, and those failed or rejected.
func lsmCount(ctx context.Context, c *apiclient.Client) (up, bad int, err error) {
	for _, s := range []string{"up", "failed", "rejected"} {
		after := ""
		for {
			var page struct {
				Items []apiclient.ServiceInstance `json:"items"`
				Next  string                      `json:"next"`
			}
			q := url.Values{"state": {s}, "limit": {"1000"}}
			if after != "" {
				q.Set("after", after)
			}
			if err := lsmCall(ctx, c, http.MethodGet, lsmInventory+"?"+q.Encode(), nil, &page); err != nil {
				return 0, 0, err
			}
			if s == "up" {
				up += len(page.Items)
			} else {
				bad += len(page.Items)
			}
			if page.Next == "" {
				break
			}
			after = page.Next
		}
	}
	return up, bad, nil
}

// lsmCall sends a request of the /lsm API in the benchmark's LSM
// environment and decodes a 2xx answer into out.
func lsmCall(ctx context.Context, c *apiclient.Client, method, path string, body, out any) error {
	return envCall(ctx, c, lsmEnv, method, path, body, out)
}

// envCall sends a request of the /lsm API in env and decodes a 2xx
// answer into out.
func envCall(ctx context.Context, c *apiclient.Client, env, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set(apiclient.EnvironmentHeader, env)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// uploadModel uploads a project of one main.cue as env's model source.
func uploadModel(ctx context.Context, c *apiclient.Client, env, mainCUE string) error {
	dir, err := os.MkdirTemp("", "intend-bench-model-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, text := range map[string]string{"intend.yaml": "name: bench\n", "main.cue": mainCUE} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	packed, err := project.Archive(dir)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodPut, apiclient.EnvPath(env, "model"),
		apiclient.Raw{ContentType: "application/gzip", Body: packed.Archive}, nil)
}

// lsmBreakdown prints what the instances cost: the versions exported and
// the deploy runs in the LSM environment (PostgreSQL), and the Temporal
// history events of the instance and deploy workflows. Errors are printed,
// not returned: the breakdown is informative.
func lsmBreakdown(ctx context.Context, pgURL, hostPort, namespace string, out io.Writer, singles bool) {
	err := lsmBreakdownErr
	if singles {
		err = lsmSinglesBreakdown
	}
	if err := err(ctx, pgURL, hostPort, namespace, out); err != nil {
		fmt.Fprintln(out, "P7 breakdown:", err)
	}
}

// lsmSinglesBreakdown prints where a single create's time goes on the
// idle server, p50 and max over the single creates (instances s%): the
// validation (start → acknowledged), the promote (→ creating), the export
// until the deploy run that deployed it was requested, the run's wait to
// start, the run itself, and from the run's end to the transfer to up.
func lsmSinglesBreakdown(ctx context.Context, pgURL, hostPort, namespace string, out io.Writer) error {
	if os.Getenv("INTEND_BENCH_TIMELINE") != "" {
		if err := lsmTimeline(ctx, hostPort, namespace, out); err != nil {
			return err
		}
	}
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `with s as (
		select i.environment_id, i.id,
			(select created_at from service_instance_log l where l.environment_id = i.environment_id and l.instance_id = i.id and l.state = 'start') t_start,
			(select created_at from service_instance_log l where l.environment_id = i.environment_id and l.instance_id = i.id and l.state = 'acknowledged') t_ack,
			(select created_at from service_instance_log l where l.environment_id = i.environment_id and l.instance_id = i.id and l.state = 'creating') t_creating,
			(select created_at from service_instance_log l where l.environment_id = i.environment_id and l.instance_id = i.id and l.state = 'up') t_up
		from service_instances i join environments e on e.id = i.environment_id
		where e.name = $1 and i.active_attributes->>'name' like 's%'
	), r as (
		select s.*, run.requested_at, run.started_at, run.finished_at
		from s join lateral (select * from deploy_runs d where d.environment_id = s.environment_id
			and d.requested_at >= s.t_creating and d.finished_at <= s.t_up order by d.requested_at limit 1) run on true
	), d as (
		select 'validate (start → acknowledged)' step, extract(epoch from t_ack - t_start) x from r
		union all select 'promote (→ creating)', extract(epoch from t_creating - t_ack) from r
		union all select 'export → run requested', extract(epoch from requested_at - t_creating) from r
		union all select 'run requested → started', extract(epoch from started_at - requested_at) from r
		union all select 'run started → finished', extract(epoch from finished_at - started_at) from r
		union all select 'run finished → up', extract(epoch from t_up - finished_at) from r
		union all select 'start → up', extract(epoch from t_up - t_start) from r
	)
	select step, percentile_cont(0.5) within group (order by x), max(x), count(*) from d group by step order by min(x)`, lsmEnv)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var step string
		var p50, worst float64
		var n int
		if err := rows.Scan(&step, &p50, &worst, &n); err != nil {
			return err
		}
		fmt.Fprintf(out, "P7 single create: %s: p50 %.0f ms, max %.0f ms (%d)\n", step, 1000*p50, 1000*worst, n)
	}
	return rows.Err()
}

func lsmBreakdownErr(ctx context.Context, pgURL, hostPort, namespace string, out io.Writer) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var versions, runs, requests int
	err = conn.QueryRow(ctx, `select
		(select count(*) from versions v join environments e on e.id = v.environment_id where e.name = $1),
		(select count(*) from deploy_runs r join environments e on e.id = r.environment_id where e.name = $1),
		(select count(*) from deploy_requests r join environments e on e.id = r.environment_id where e.name = $1)`,
		lsmEnv).Scan(&versions, &runs, &requests)
	if err != nil {
		return err
	}
	// Where an instance's time goes: from each version to the next
	// (create → start, start → acknowledged after the validation, →
	// creating, creating → up: the export, release and deploy).
	rows, err := conn.Query(ctx, `select l.state,
		percentile_cont(0.5) within group (order by extract(epoch from l.created_at - p.created_at)),
		max(extract(epoch from l.created_at - p.created_at)), count(*)
		from service_instance_log l
		join service_instance_log p on p.environment_id = l.environment_id and p.instance_id = l.instance_id and p.version = l.version - 1
		join environments e on e.id = l.environment_id where e.name = $1
		group by l.version, l.state order by l.version`, lsmEnv)
	if err != nil {
		return err
	}
	for rows.Next() {
		var state string
		var p50, worst float64
		var n int
		if err := rows.Scan(&state, &p50, &worst, &n); err != nil {
			return err
		}
		fmt.Fprintf(out, "P7 breakdown: to %s: p50 %.3fs, max %.3fs (%d instances)\n", state, p50, worst, n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	tc, err := client.DialContext(ctx, client.Options{HostPort: hostPort, Namespace: namespace,
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return err
	}
	defer tc.Close()
	events := map[string][2]int64{}
	kinds := map[string]int{} // the event types of the first instance's history
	for _, wt := range []string{workflows.ServiceInstanceWorkflowName, workflows.DeployWorkflowName} {
		var token []byte
		for {
			resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: namespace, Query: fmt.Sprintf("WorkflowType = '%s'", wt), NextPageToken: token})
			if err != nil {
				return err
			}
			for _, e := range resp.GetExecutions() {
				d, err := tc.DescribeWorkflowExecution(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId())
				if err != nil {
					return err
				}
				if wt == workflows.ServiceInstanceWorkflowName && len(kinds) == 0 {
					it := tc.GetWorkflowHistory(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), false, 0)
					for it.HasNext() {
						ev, err := it.Next()
						if err != nil {
							return err
						}
						kinds[ev.GetEventType().String()]++
					}
				}
				c := events[wt]
				c[0]++
				c[1] += d.GetWorkflowExecutionInfo().GetHistoryLength()
				events[wt] = c
			}
			if token = resp.GetNextPageToken(); len(token) == 0 {
				break
			}
		}
	}
	fmt.Fprintf(out, "P7 breakdown: %d versions, %d deploy requests, %d deploy runs", versions, requests, runs)
	for _, wt := range []string{workflows.ServiceInstanceWorkflowName, workflows.DeployWorkflowName} {
		c := events[wt]
		fmt.Fprintf(out, "; %d %s runs, %d history events", c[0], wt, c[1])
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "P7 breakdown: one instance's history:", kinds)
	return nil
}

// lsmTimeline prints the events of the last deploy run's workflow and of
// the environment's scheduler around it, with their times relative to the
// run's start (INTEND_BENCH_TIMELINE=1): where a single create's deploy
// waits.
func lsmTimeline(ctx context.Context, hostPort, namespace string, out io.Writer) error {
	tc, err := client.DialContext(ctx, client.Options{HostPort: hostPort, Namespace: namespace,
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return err
	}
	defer tc.Close()
	resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: namespace, PageSize: 1, Query: fmt.Sprintf("WorkflowType = '%s'", workflows.DeployWorkflowName)})
	if err != nil {
		return err
	}
	if len(resp.GetExecutions()) == 0 {
		return nil
	}
	last := resp.GetExecutions()[0]
	t0 := last.GetStartTime().AsTime()
	dump := func(wid, rid string, from, to time.Time) error {
		it := tc.GetWorkflowHistory(ctx, wid, rid, false, 0)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			t := ev.GetEventTime().AsTime()
			if t.Before(from) || t.After(to) {
				continue
			}
			detail := ""
			if a := ev.GetTimerStartedEventAttributes(); a != nil {
				detail = a.GetStartToFireTimeout().AsDuration().String()
			}
			if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
				detail = a.GetSignalName()
			}
			if a := ev.GetMarkerRecordedEventAttributes(); a != nil {
				detail = a.GetMarkerName()
			}
			fmt.Fprintf(out, "timeline %-10s %+6.0f ms %s %s\n", wid[:min(10, len(wid))], float64(t.Sub(t0).Microseconds())/1000, ev.GetEventType(), detail)
		}
		return nil
	}
	if err := dump(last.GetExecution().GetWorkflowId(), last.GetExecution().GetRunId(), t0, t0.Add(time.Minute)); err != nil {
		return err
	}
	iresp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: namespace, PageSize: 1, Query: fmt.Sprintf("WorkflowType = '%s'", workflows.ServiceInstanceWorkflowName)})
	if err != nil {
		return err
	}
	for _, e := range iresp.GetExecutions() {
		if err := dump(e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), t0.Add(-time.Hour), t0.Add(time.Hour)); err != nil {
			return err
		}
	}
	sresp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: namespace, PageSize: 1, Query: fmt.Sprintf("WorkflowType = '%s'", workflows.SchedulerWorkflowName)})
	if err != nil || len(sresp.GetExecutions()) == 0 {
		return err
	}
	s := sresp.GetExecutions()[0]
	return dump(s.GetExecution().GetWorkflowId(), s.GetExecution().GetRunId(), t0.Add(-time.Second), t0.Add(time.Second))
}
