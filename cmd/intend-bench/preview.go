package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiclient "github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/project"
)

// previewN is P13's number of live instances (-preview).
var previewN int

// benchPreview is P13: the preview of a model change over n live service
// instances (POST .../lsm/preview, every page, as intend dryrun reads
// it). The instances are created through the lifecycle engine first, as
// P7 creates them (lsmParallel at a time, until all are up); the model
// change writes one more line into each instance's three files, so every
// instance is previewed as changed.
func benchPreview(ctx context.Context, c *apiclient.Client, files string, n, lsmParallel int) ([]row, error) {
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
	already, _, err := lsmCount(ctx, c)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, lsmParallel)
	for range lsmParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := lsmCreate(ctx, c, fmt.Sprintf("p%05d", i)); err != nil {
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
	for {
		up, bad, err := lsmCount(ctx, c)
		if err != nil {
			return nil, err
		}
		if bad > 0 {
			return nil, fmt.Errorf("%d instances failed or were rejected", bad)
		}
		if up == already+n {
			break
		}
		if wait := 10*time.Minute + time.Duration(max(0, n-1000))*300*time.Millisecond; time.Since(t0) > wait {
			return nil, fmt.Errorf("%d of %d instances up after %v", up-already, n, wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
	setup := time.Since(t0)

	// The change: every file gets one more line.
	changed := strings.ReplaceAll(lsmModel(root), `content: "size=\(parameter.size)\n"`, `content: "size=\(parameter.size)\nrev=2\n"`)
	archive, err := modelArchive(changed)
	if err != nil {
		return nil, err
	}
	var times []time.Duration
	var counts map[string]int
	for range 5 {
		t := time.Now()
		counts = map[string]int{}
		after := ""
		for {
			var page apiclient.ModelPreview
			path := apiclient.EnvPath(lsmEnv, "lsm", "preview") + "?limit=1000&after=" + url.QueryEscape(after)
			if err := c.Do(ctx, http.MethodPost, path, apiclient.Raw{ContentType: "application/gzip", Body: archive}, &page); err != nil {
				return nil, fmt.Errorf("preview: %w", err)
			}
			for st, k := range page.Counts {
				counts[st] += k
			}
			if page.Next == "" {
				break
			}
			after = page.Next
		}
		times = append(times, time.Since(t))
		if counts["changed"] != already+n {
			return nil, fmt.Errorf("preview: %v, want %d changed", counts, already+n)
		}
	}
	first := times[0]
	slices.Sort(times)
	return []row{{fmt.Sprintf("P13 preview of a model change over %s live instances", fmtInt(already+n)),
		times[len(times)/2].Round(time.Millisecond).String(),
		fmt.Sprintf("median of %d (first %v, min %v, max %v); all %d changed each time (bar ≤ 30 s for 1,000; %d created and up in %v)",
			len(times), first.Round(time.Millisecond), times[0].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond),
			counts["changed"], n, setup.Round(time.Second))}}, nil
}

// modelArchive packs a project of one main.cue.
func modelArchive(mainCUE string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "intend-bench-model-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for name, text := range map[string]string{"intend.yaml": "name: bench\n", "main.cue": mainCUE} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	packed, err := project.Archive(dir)
	if err != nil {
		return nil, err
	}
	return packed.Archive, nil
}
