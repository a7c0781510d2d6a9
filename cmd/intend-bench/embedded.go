package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	apiclient "github.com/intendhq/intend/client"
)

// embeddedN is P7e's list length (0: no P7e).
var embeddedN int

const (
	embeddedEnv       = "lsm-embedded"
	embeddedInventory = "/lsm/v1/service_inventory/site"
	embeddedRuns      = 5
)

// embeddedModel is a model whose entity site holds a list of embedded
// entities (routes, keyed by key), each refined into a file under root.
func embeddedModel(root string) string {
	return `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#Route: {
	key:   =~"^[a-z0-9]+$" @lsm(rw)
	value: *1 | int @lsm(rw+)
}

#Site: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name:   =~"^[a-z0-9]+$" @lsm(rw)
		routes: [...#Route] @lsm(rw+, key=key)
	}
	output: {for r in parameter.routes {
		"\(r.key)": fs.#File & {path: "` + root + `/\(parameter.name)/\(r.key)", content: "value=\(r.value)\n"}
	}}
}

services: site: #Site
`
}

// benchEmbedded is P7e: an instance whose attribute is a list of n
// embedded entities (one file each) created → up, and an update of one
// element, addressed by its key (a v2 dict-path edit) → up; each of
// embeddedRuns times, on a fresh instance.
func benchEmbedded(ctx context.Context, c *apiclient.Client, files string, n int) ([]row, error) {
	if _, err := c.EnsureEnvironment(ctx, "bench", embeddedEnv); err != nil {
		return nil, err
	}
	root := filepath.Join(files, "embedded")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	if err := uploadModel(ctx, c, embeddedEnv, embeddedModel(root)); err != nil {
		return nil, fmt.Errorf("upload the model: %w", err)
	}
	call := func(method, path string, body, out any) error {
		return envCall(ctx, c, embeddedEnv, method, path, body, out)
	}
	waitUp := func(id string, after int64, t0 time.Time) error {
		for {
			var got apiclient.ServiceInstance
			if err := call(http.MethodGet, embeddedInventory+"/"+id, nil, &got); err != nil {
				return err
			}
			if got.State == "up" && got.Version > after {
				return nil
			}
			switch got.State {
			case "rejected", "failed", "update_failed", "update_rejected":
				return fmt.Errorf("instance %s is %s", id, got.State)
			}
			if time.Since(t0) > 5*time.Minute {
				return fmt.Errorf("instance %s not up after 5 minutes: %s", id, got.State)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var creates, updates []time.Duration
	cpu0 := treeCPU()
	for run := range embeddedRuns {
		routes := make([]map[string]any, n)
		for i := range routes {
			routes[i] = map[string]any{"key": fmt.Sprintf("r%04d", i), "value": 1}
		}
		t0 := time.Now()
		var inst apiclient.ServiceInstance
		if err := call(http.MethodPost, embeddedInventory,
			map[string]any{"attributes": map[string]any{"name": fmt.Sprintf("s%d", run), "routes": routes}}, &inst); err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
		if err := waitUp(inst.ID, 0, t0); err != nil {
			return nil, err
		}
		creates = append(creates, time.Since(t0))
		if err := call(http.MethodGet, embeddedInventory+"/"+inst.ID, nil, &inst); err != nil {
			return nil, err
		}
		// One element, by its key.
		t1 := time.Now()
		value, _ := json.Marshal(2)
		var upd apiclient.ServiceInstance
		if err := call(http.MethodPatch, "/lsm/v2/service_inventory/site/"+inst.ID, map[string]any{
			"current_version": inst.Version,
			"edit": []map[string]any{{"edit_id": "one", "operation": "replace",
				"target": fmt.Sprintf("routes[key=r%04d].value", n/2), "value": json.RawMessage(value)}},
		}, &upd); err != nil {
			return nil, fmt.Errorf("update one element: %w", err)
		}
		if err := waitUp(inst.ID, upd.Version, t1); err != nil {
			return nil, err
		}
		updates = append(updates, time.Since(t1))
	}
	median := func(ds []time.Duration) (time.Duration, time.Duration) {
		slices.Sort(ds)
		return ds[len(ds)/2], ds[len(ds)-1]
	}
	cp50, cmax := median(creates)
	up50, umax := median(updates)
	return []row{
		{fmt.Sprintf("P7e one instance with %d embedded elements (a file each) create → up", n), cp50.Round(time.Millisecond).String(),
			fmt.Sprintf("p50 of %d, max %v", embeddedRuns, cmax.Round(time.Millisecond))},
		{"P7e update of one element by key (v2 edit) → up", up50.Round(time.Millisecond).String(),
			fmt.Sprintf("p50 of %d, max %v", embeddedRuns, umax.Round(time.Millisecond))},
		cpuRow(fmt.Sprintf("CPU of the process tree, P7e's %d creates and updates", embeddedRuns), cpu0, treeCPU()),
	}, nil
}
