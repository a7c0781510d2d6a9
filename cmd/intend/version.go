package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// versionsCommand is `intend versions`: an environment's desired-state
// versions.
func versionsCommand(g *globals) *cobra.Command {
	return versionsCommandNamed(g, "versions")
}

// versionCommand is the old name, `intend version`: hidden, and saying on
// standard error that it is deprecated (standard output stays the
// command's, for scripts). It was renamed because "intend version"
// conventionally prints the program's version (that is "intend --version").
func versionCommand(g *globals) *cobra.Command {
	cmd := versionsCommandNamed(g, "version")
	cmd.Hidden = true
	cmd.Short += ` (deprecated: use "intend versions")`
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		fmt.Fprintln(g.stderr, `intend: "intend version" is deprecated and will be removed: use "intend versions" (the program's version is "intend --version")`)
		return g.applyLateEnv(c)
	}
	return cmd
}

func versionsCommandNamed(g *globals, name string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   name,
		Short: "List, show, release, roll back and compare an environment's versions",
		Long: `Work with the desired-state versions of an environment through the REST API
of a running server (/api/v1/environments/{env}/versions). A version is
what one export stored; releasing it makes it the state to deploy.

A version V is a number, or "latest" (the newest version) or "released"
(the released one).

` + clientSettingsHelp,
	}
	groupRun(cmd)
	s := g.clientFlags(cmd)
	cmd.AddCommand(versionListCommand(s), versionShowCommand(s), versionReleaseCommand(s), versionRollbackCommand(s),
		versionDiffCommand(s))
	cmd.AddCommand(versionDeleteCommand(s))
	return cmd
}

// resolveVersion turns a version argument into a number: a number as it
// is, "latest" and "released" as the environment says.
func resolveVersion(ctx context.Context, c *client.Client, env, arg string) (int64, error) {
	if n, err := strconv.ParseInt(arg, 10, 64); err == nil && n > 0 {
		return n, nil
	}
	if arg != "latest" && arg != "released" {
		return 0, usageErrorf("version %q: want a version number, latest or released", arg)
	}
	var e client.Environment
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env), nil, &e); err != nil {
		return 0, err
	}
	switch {
	case arg == "latest" && e.LastVersion > 0:
		return e.LastVersion, nil
	case arg == "released" && e.ReleasedVersion != nil:
		return *e.ReleasedVersion, nil
	case arg == "latest":
		return 0, fmt.Errorf("environment %s has no version yet", env)
	}
	return 0, fmt.Errorf("environment %s has released no version yet", env)
}

// versionClient returns the client and the resolved environment, with
// each version argument resolved to its number, in order.
func versionClient(ctx context.Context, s *clientSettings, args []string) (*client.Client, string, []int64, error) {
	c, env, err := s.envClient(nil)
	if err != nil {
		return nil, "", nil, err
	}
	vs := make([]int64, len(args))
	for i, arg := range args {
		if vs[i], err = resolveVersion(ctx, c, env, arg); err != nil {
			return nil, "", nil, err
		}
	}
	return c, env, vs, nil
}

func versionListCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List an environment's versions, newest first",
		Long: `List the versions of the environment, newest first, with their resource
counts and when they were released; CURRENT marks the released one.
GET /api/v1/environments/{env}/versions (the newest 1000).

Examples:
  intend versions list -e prod
  intend versions list --json | jq '.[0].version'
  intend versions list -o wide      # with who exported and released each`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			items, err := c.List(ctx, client.EnvPath(env, "versions"), url.Values{"limit": {"1000"}}, "after", 0)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			vs, err := decodeItems[client.VersionInfo](items)
			if err != nil {
				return err
			}
			var e client.Environment
			if err := c.Do(ctx, http.MethodGet, client.EnvPath(env), nil, &e); err != nil {
				return err
			}
			t := s.table([]string{"VERSION", "RESOURCES", "CHANGED", "CREATED", "RELEASED", "CURRENT"},
				"EXPORTED BY", "RELEASED BY", "KEPT")
			for _, v := range vs {
				current := ""
				if e.ReleasedVersion != nil && *e.ReleasedVersion == v.Version {
					current = "released"
				}
				t.row(strconv.FormatInt(v.Version, 10), strconv.Itoa(v.ResourceCount), strconv.Itoa(v.ChangedCount),
					shortTime(v.CreatedAt), shortTimePtr(v.ReleasedAt), current,
					v.ExportedBy, v.ReleasedBy, strconv.Itoa(v.KeptInstanceResources))
			}
			return t.flush()
		},
	}
}

func versionShowCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "show V",
		Short: "Show a version and all its resources",
		Long: `Show version V of the environment and every resource in it (following the
pages): GET /api/v1/environments/{env}/versions/{v}?after=. With --json,
the version's object holds every resource under "resources".

Examples:
  intend versions show 3 -e prod
  intend versions show released --json | jq '.resources[].id'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, env, vs, err := versionClient(ctx, s, args)
			if err != nil {
				return err
			}
			v := vs[0]
			page, err := c.All(ctx, client.EnvPath(env, "versions", strconv.FormatInt(v, 10)),
				url.Values{"limit": {"1000"}}, "resources", "after", 0)
			if err != nil {
				return err
			}
			if s.structured() {
				whole := page.Head
				items := page.Items
				if items == nil {
					items = []json.RawMessage{}
				}
				b, err := json.Marshal(items)
				if err != nil {
					return err
				}
				whole["resources"] = b
				return s.write(whole)
			}
			head, err := json.Marshal(page.Head)
			if err != nil {
				return err
			}
			var info client.VersionInfo
			if err := decode(head, &info); err != nil {
				return err
			}
			var withPlugins struct {
				Plugins []client.Plugin `json:"plugins"`
			}
			if err := json.Unmarshal(head, &withPlugins); err != nil {
				return err
			}
			rs, err := decodeItems[client.VersionResource](page.Items)
			if err != nil {
				return err
			}
			if err := writeFields(s.stdout,
				"version", strconv.FormatInt(info.Version, 10),
				"created", shortTime(info.CreatedAt),
				"released", shortTimePtr(info.ReleasedAt),
				"resources", strconv.Itoa(info.ResourceCount),
				"changed", strconv.Itoa(info.ChangedCount),
			); err != nil {
				return err
			}
			fmt.Fprintln(s.stdout)
			if len(withPlugins.Plugins) > 0 {
				// The adapter plugins it runs: an upgrade shows as new
				// digests.
				t := newTable(s.stdout, "PLUGIN", "VERSION", "RUNTIME", "TYPES", "PLATFORM", "DIGEST")
				for _, p := range withPlugins.Plugins {
					platforms := slices.Sorted(maps.Keys(p.Artifacts))
					for _, platform := range platforms {
						t.row(p.Name, p.Version, p.Runtime, strings.Join(p.Types, ","), platform, p.Artifacts[platform])
					}
				}
				if err := t.flush(); err != nil {
					return err
				}
				fmt.Fprintln(s.stdout)
			}
			t := newTable(s.stdout, "ID", "SET", "REQUIRES", "FLAGS")
			for _, r := range rs {
				t.row(r.ID, r.ResourceSet, strconv.Itoa(len(r.Requires)), resourceFlags(r))
			}
			return t.flush()
		},
	}
}

// resourceFlags lists the flags a version resource has set.
func resourceFlags(r client.VersionResource) string {
	var fs []string
	for _, f := range []struct {
		on   bool
		name string
	}{{r.Purged, "purged"}, {r.SendEvent, "send_event"}, {r.ReceiveEvents, "receive_events"}, {r.ReportOnly, "report_only"},
		{r.Unmanaged, "unmanaged"}} {
		if f.on {
			fs = append(fs, f.name)
		}
	}
	return strings.Join(fs, ",")
}

func versionReleaseCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "release V",
		Short: "Release a version: make it the state to deploy",
		Long: `Release version V of the environment: POST
/api/v1/environments/{env}/versions/{v}/release. With the setting
auto_deploy on (the default) the release queues a deploy request for the
scheduler; 'intend runs list' follows it. Releasing a version older than
the released one is refused (409: 'intend versions rollback' goes back);
releasing the released one again changes nothing.

Examples:
  intend versions release 4 -e prod
  intend versions release latest`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rel client.Release
			env, v, done, err := postVersion(cmd, s, args[0], "release", &rel)
			if done || err != nil {
				return err
			}
			changed := plural(rel.Changed, "resource") + " changed"
			switch {
			case rel.AlreadyReleased:
				fmt.Fprintf(s.stdout, "version %d of %s was released already\n", v, env)
			case rel.Request == nil:
				fmt.Fprintf(s.stdout, "released version %d of %s (%s); no deploy queued: auto_deploy is off ('intend deploy-now' deploys)\n",
					v, env, changed)
			default:
				fmt.Fprintf(s.stdout, "released version %d of %s (%s); deploy request %d queued\n",
					v, env, changed, rel.Request.ID)
			}
			return nil
		},
	}
}

// postVersion posts to version arg's route action (release, rollback)
// and decodes the answer into out, unless the output is structured: then
// it prints the server's answer as it is, and done is true.
func postVersion(cmd *cobra.Command, s *clientSettings, arg, action string, out any) (env string, v int64, done bool, err error) {
	ctx := cmd.Context()
	c, env, vs, err := versionClient(ctx, s, []string{arg})
	if err != nil {
		return "", 0, false, err
	}
	v = vs[0]
	var raw json.RawMessage
	if err := c.Do(ctx, http.MethodPost, client.EnvPath(env, "versions", strconv.FormatInt(v, 10), action), nil, &raw); err != nil {
		return "", 0, false, err
	}
	if s.structured() {
		return env, v, true, s.write(raw)
	}
	return env, v, false, decode(raw, out)
}

// rollbackCommand is `intend rollback V`, the short form of `intend
// versions rollback V`.
func rollbackCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{}
	like := versionRollbackCommand(g.clientFlags(cmd))
	cmd.Use, cmd.Short, cmd.Args, cmd.RunE = like.Use, like.Short, like.Args, like.RunE
	cmd.Long = like.Long + "\n\n" + clientSettingsHelp
	return cmd
}

func versionRollbackCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "rollback V",
		Short: "Roll desired state back to version V: a new version equal to V, released",
		Long: `Roll the environment's desired state back to version V: POST
/api/v1/environments/{env}/versions/{v}/rollback makes a new version equal
to V and releases it, in one step (releasing an older version directly is
refused, and no re-export is needed). With auto_deploy on, the release
queues a deploy.

The resource sets of service instances are not rolled back: the lifecycle
engine owns them, so the new version holds them as the newest version
does (an instance created since keeps its resources; one deleted since
does not get them back). The rollback is refused (409) when such a
resource requires one that V lacks. 'intend versions diff V latest' shows
what a rollback would change. Role: operator.

Examples:
  intend rollback 7 -e prod
  intend versions rollback 7 --json | jq .version.version`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rb client.Rollback
			env, v, done, err := postVersion(cmd, s, args[0], "rollback", &rb)
			if done || err != nil {
				return err
			}
			fmt.Fprintf(s.stdout, "rolled %s back to version %d: version %d released (%s changed", env, v,
				rb.Version.Version, plural(rb.Changed, "resource"))
			if rb.KeptInstanceResources > 0 {
				fmt.Fprintf(s.stdout, "; %s of service instances kept as they are", plural(rb.KeptInstanceResources, "resource"))
			}
			fmt.Fprint(s.stdout, ")")
			if rb.Request != nil {
				fmt.Fprintf(s.stdout, "; deploy request %d queued\n", rb.Request.ID)
			} else {
				fmt.Fprintln(s.stdout, "; no deploy queued: auto_deploy is off ('intend deploy-now' deploys)")
			}
			return nil
		},
	}
}

// versionDiff is GET .../diff's answer with the values kept as the server
// wrote them (420 and 420.0 differ there).
type versionDiff struct {
	From     int64              `json:"from"`
	To       int64              `json:"to"`
	Added    []string           `json:"added"`
	Removed  []string           `json:"removed"`
	Modified []modifiedResource `json:"modified"`
}

// modifiedResource is one entry of versionDiff.Modified.
type modifiedResource struct {
	ID      string `json:"id"`
	Changes map[string]struct {
		From json.RawMessage `json:"from"`
		To   json.RawMessage `json:"to"`
	} `json:"changes"`
}

func versionDiffCommand(s *clientSettings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Show what changed from version A to version B",
		Long: `Show what changed from version A to version B of the environment: the
resources added (+), removed (-) and modified (~), with each changed
attribute, requires and flag as "from → to" (null: absent on that side).
A text attribute of several lines (on either side) shows as a unified
diff instead: hunks "@@ -l,s +l,s @@", lines removed "-", added "+",
unchanged " ", indented under the attribute's name. On a terminal the diff
is coloured (red removed, green added, cyan hunk headers); --color always
or never overrides, and NO_COLOR turns the automatic colour off.
B may be older than A (a reverse diff). GET
/api/v1/environments/{env}/versions/{a}/diff/{b}; 404 if either version
does not exist (for example, pruned).

Examples:
  intend versions diff 3 4 -e prod
  intend versions diff released latest
  intend versions diff 3 4 --color always | less -R`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, env, vs, err := versionClient(ctx, s, args)
			if err != nil {
				return err
			}
			a, b := vs[0], vs[1]
			// A large diff comes in pages: follow them and show it whole.
			path := client.EnvPath(env, "versions", strconv.FormatInt(a, 10), "diff", strconv.FormatInt(b, 10))
			d := versionDiff{Added: []string{}, Removed: []string{}, Modified: []modifiedResource{}}
			for after := ""; ; {
				var page struct {
					versionDiff
					Next string `json:"next"`
				}
				q := ""
				if after != "" {
					q = "?after=" + url.QueryEscape(after)
				}
				if err := c.Do(ctx, http.MethodGet, path+q, nil, &page); err != nil {
					return err
				}
				d.From, d.To = page.From, page.To
				d.Added = append(d.Added, page.Added...)
				d.Removed = append(d.Removed, page.Removed...)
				d.Modified = append(d.Modified, page.Modified...)
				if page.Next == "" || page.Next == after {
					break
				}
				after = page.Next
			}
			if s.structured() {
				return s.write(d)
			}
			w, p := s.stdout, s.palette()
			fmt.Fprintf(w, "version %d → %d: %d added, %d removed, %d modified\n",
				d.From, d.To, len(d.Added), len(d.Removed), len(d.Modified))
			for _, id := range d.Added {
				fmt.Fprintln(w, p.added("+ "+id))
			}
			for _, id := range d.Removed {
				fmt.Fprintln(w, p.removed("- "+id))
			}
			for _, m := range d.Modified {
				fmt.Fprintf(w, "~ %s\n", m.ID)
				names := make([]string, 0, len(m.Changes))
				for n := range m.Changes {
					names = append(names, n)
				}
				slices.Sort(names)
				for _, n := range names {
					ch := m.Changes[n]
					if p.writeChangeDiff(w, "    "+n+":", "      ", recordedChange{From: ch.From, To: ch.To}) {
						continue
					}
					fmt.Fprintf(w, "    %s: %s → %s\n", n, diffValue(ch.From), diffValue(ch.To))
				}
			}
			return nil
		},
	}
	s.colorFlag(cmd)
	return cmd
}

// diffValue shows one side of a change; an absent side is null.
func diffValue(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	return compactJSON(raw)
}
