package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/intendhq/intend/client"
)

// versionPlugins returns the adapter plugins version v of env requires.
func versionPlugins(ctx context.Context, c *client.Client, env string, v int64) ([]client.Plugin, error) {
	var got struct {
		Plugins []client.Plugin `json:"plugins"`
	}
	err := c.Do(ctx, "GET", client.EnvPath(env, "versions", strconv.FormatInt(v, 10))+"?limit=1", nil, &got)
	return got.Plugins, err
}

// releasedPlugins returns the plugins of env's released version (none
// when no version is released).
func releasedPlugins(ctx context.Context, c *client.Client, env string) ([]client.Plugin, error) {
	e, err := c.Environment(ctx, env)
	if err != nil || e.ReleasedVersion == nil {
		return nil, err
	}
	return versionPlugins(ctx, c, env, *e.ReleasedVersion)
}

// pluginChanges says, a line a plugin, how the plugins of a version
// differ from those of the released one: added, removed, or a new
// release (another digest for a platform). A dry-run runs the new
// plugins: its results are theirs.
func pluginChanges(released, next []client.Plugin) []string {
	byName := func(ps []client.Plugin) map[string]client.Plugin {
		m := make(map[string]client.Plugin, len(ps))
		for _, p := range ps {
			m[p.Name] = p
		}
		return m
	}
	old, cur := byName(released), byName(next)
	names := make([]string, 0, len(old)+len(cur))
	for n := range old {
		names = append(names, n)
	}
	for n := range cur {
		if _, ok := old[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	release := func(p client.Plugin) string {
		if p.Version == "" {
			return p.Name
		}
		return p.Name + " " + p.Version
	}
	var out []string
	for _, n := range names {
		o, wasThere := old[n]
		p, isThere := cur[n]
		switch {
		case !wasThere:
			out = append(out, fmt.Sprintf("plugin %s: new (%s)", release(p), strings.Join(p.Types, ", ")))
		case !isThere:
			out = append(out, fmt.Sprintf("plugin %s: removed", release(o)))
		default:
			var moved []string
			platforms := make([]string, 0, len(p.Artifacts))
			for platform := range p.Artifacts {
				platforms = append(platforms, platform)
			}
			slices.Sort(platforms)
			for _, platform := range platforms {
				if o.Artifacts[platform] != p.Artifacts[platform] {
					moved = append(moved, fmt.Sprintf("%s %s → %s", platform, short(o.Artifacts[platform]), short(p.Artifacts[platform])))
				}
			}
			if len(moved) > 0 || o.Version != p.Version {
				out = append(out, fmt.Sprintf("plugin %s → %s: %s", release(o), release(p), strings.Join(moved, ", ")))
			}
		}
	}
	return out
}

// short is a digest cut for reading: "sha256:9f86d081884c…".
func short(digest string) string {
	if digest == "" {
		return "none"
	}
	if len(digest) > len("sha256:")+12 {
		return digest[:len("sha256:")+12] + "…"
	}
	return digest
}
