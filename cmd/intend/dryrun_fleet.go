package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/project"
)

// fleetPreview is the preview of a model change over the live service
// instances (POST .../lsm/preview), all its pages.
type fleetPreview struct {
	Model       string                   `json:"model"`
	BaseVersion int64                    `json:"base_version"`
	Instances   []client.InstancePreview `json:"instances"`
	Counts      map[string]int           `json:"counts"`
	Skipped     int                      `json:"skipped"`
}

// wouldChange reports whether an instance would change or fail (nil: no
// preview).
func (f *fleetPreview) wouldChange() bool {
	return f != nil && f.Counts[client.PreviewChanged]+f.Counts[client.PreviewFailed] > 0
}

// pushPreviewed is push (compile, upload the source, export a version)
// with the preview of the model over the live service instances between
// the compile and the upload: the preview sees the instances as the
// released model renders them, whatever the upload does. fleet is nil
// when the server has no lifecycle engine (or predates the preview).
func (s *clientSettings) pushPreviewed(ctx context.Context, w io.Writer, dir string) (
	c *client.Client, env string, res *compiler.Result, fleet *fleetPreview, v client.VersionInfo, err error) {
	if c, env, err = s.envClient(nil); err != nil {
		return
	}
	facts, err := serverFacts(ctx, c, env)
	if err != nil {
		return
	}
	res, mods, err := compileProject(ctx, dir, facts)
	if err != nil {
		err = compileFailed(w, s.output, err)
		return
	}
	packed, err := project.Archive(dir)
	if err != nil {
		return
	}
	if fleet, err = previewFleet(ctx, c, env, packed.Archive); err != nil {
		return
	}
	// A dry-run of a plugin upgrade runs the new plugin: its artifacts go
	// first.
	if err = uploadPlugins(ctx, notices(ctx), c, env, mods); err != nil {
		return
	}
	if err = putSource(ctx, c, env, packed); err != nil {
		return
	}
	v, err = upload(ctx, c, env, withPlugins(res, mods), false, nil, packed.Hash, releaseNot) // a dry-run's: never released
	return
}

// previewFleet reads every page of the preview of archive.
func previewFleet(ctx context.Context, c *client.Client, env string, archive []byte) (*fleetPreview, error) {
	out := &fleetPreview{Instances: []client.InstancePreview{}, Counts: map[string]int{}}
	after := ""
	for {
		var page client.ModelPreview
		path := client.EnvPath(env, "lsm", "preview") + "?limit=1000&after=" + url.QueryEscape(after)
		err := c.Do(ctx, http.MethodPost, path, client.Raw{ContentType: "application/gzip", Body: archive}, &page)
		var p *client.Problem
		if errors.As(err, &p) && (p.Status == http.StatusNotFound || p.Status == http.StatusServiceUnavailable) && after == "" {
			// A server without the lifecycle engine (503), or older than
			// the preview (404; the environment was found above).
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("preview of the model over the service instances of %s: %w", env, err)
		}
		out.Model, out.BaseVersion = page.Model, page.BaseVersion
		out.Instances = append(out.Instances, page.Instances...)
		for st, n := range page.Counts {
			out.Counts[st] += n
		}
		out.Skipped += page.Skipped
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

// printFleet lists the service instances a model change would change or
// fail (every one with all), each resource with its attribute changes as
// printDryrun shows them, then a count per status.
func printFleet(w io.Writer, p palette, f fleetPreview, all bool) {
	if len(f.Instances) == 0 && f.Skipped == 0 {
		return
	}
	fmt.Fprintf(w, "service instances, the new model against version %d:\n", f.BaseVersion)
	for _, in := range f.Instances {
		if in.Status == client.PreviewUnchanged && !all {
			continue
		}
		name := in.ID
		if in.Identity != "" {
			name = in.Identity + " (" + in.ID + ")"
		}
		fmt.Fprintf(w, "%-11s %s %s, %s\n", in.Status, in.ServiceEntity, name, in.State)
		if in.Status == client.PreviewFailed {
			for _, msg := range compileMessages(in.Errors) {
				fmt.Fprintf(w, "            error: %s\n", msg)
			}
			continue
		}
		for _, id := range in.Added {
			fmt.Fprintf(w, "  added     %s\n", id)
		}
		for _, id := range in.Removed {
			fmt.Fprintf(w, "  removed   %s (no longer managed)\n", id)
		}
		for _, m := range in.Modified {
			fmt.Fprintf(w, "  modified  %s\n", m.ID)
			for _, name := range sortedKeys(m.Changes) {
				ch := m.Changes[name]
				from, _ := json.Marshal(ch.From)
				to, _ := json.Marshal(ch.To)
				if p.writeChangeDiff(w, "            "+name+":", "              ", recordedChange{From: from, To: to}) {
					continue
				}
				fmt.Fprintf(w, "            %s: %s → %s\n", name, shorten(from), shorten(to))
			}
		}
	}
	var parts []string
	for _, st := range sortedKeys(f.Counts) {
		parts = append(parts, fmt.Sprintf("%d %s", f.Counts[st], st))
	}
	if f.Skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d exporting nothing", f.Skipped))
	}
	fmt.Fprintf(w, "service instances: %s\n", strings.Join(parts, ", "))
}

// compileMessages are the messages of a compile's errors (the raw JSON
// when it is not a list of them).
func compileMessages(raw json.RawMessage) []string {
	var errs []struct {
		Instance string `json:"instance"`
		Path     string `json:"path"`
		Message  string `json:"message"`
	}
	if json.Unmarshal(raw, &errs) != nil || len(errs) == 0 {
		return []string{string(raw)}
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Message
		if e.Path != "" && !strings.Contains(e.Message, e.Path) {
			out[i] = e.Path + ": " + e.Message
		}
	}
	return out
}
