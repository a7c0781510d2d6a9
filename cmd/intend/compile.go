package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/modules"
	"github.com/intendhq/intend/internal/project"
)

// The commands that compile a project: compile (local only), export and
// dryrun (compile, then talk to a server).

func compileCommand(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "compile [DIR]",
		Short: "Compile the project's model and print its resources, or every error",
		Long: `Compile the CUE model of the project in DIR (default: the current
directory) with the standard library built into this binary, and print the
resources it produces: id, resource set, requires count and flags. Nothing
is sent anywhere.

A failed compile prints every error at once, each with its CUE path and the
file:line of the schema and of the data, and exits with code 1.
Resources whose attributes use a fact not known yet are listed as
undefined (intend export fills in the facts the server knows).

With --json it prints the version exactly as intend export would upload it
({"resources": [...]}) or, on failure, {"errors": [...]} with the same
fields as above (path, instance, message, positions).

Examples:
  intend compile
  intend compile examples/quickstart --json | jq '.resources | length'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := compileDir(cmd.Context(), dirArg(args), nil)
			if err != nil {
				format := outputTable
				if asJSON {
					format = outputJSON
				}
				return compileFailed(g.stdout, format, err)
			}
			if asJSON {
				return writeJSON(g.stdout, json.RawMessage(res.Export()))
			}
			t := newTable(g.stdout, "RESOURCE", "SET", "REQUIRES", "FLAGS")
			for _, r := range res.Resources {
				t.row(r.ID, r.ResourceSet, strconv.Itoa(len(r.Requires)), compiledFlags(r))
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s\n", compileSummary(res))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the version (or the errors) as JSON")
	return cmd
}

func dirArg(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	return "."
}

func compileDir(ctx context.Context, dir string, facts map[string]map[string]json.RawMessage) (*compiler.Result, error) {
	res, _, err := compileProject(ctx, dir, facts)
	return res, err
}

// compileProject is compileDir that also returns the project's modules,
// as resolved for the compile (their plugins go into an export).
func compileProject(ctx context.Context, dir string, facts map[string]map[string]json.RawMessage) (*compiler.Result, modules.Resolved, error) {
	mods, err := prepareProject(ctx, dir)
	if err != nil {
		return nil, mods, err
	}
	res, err := compiler.Compile(ctx, compiler.Options{Dir: dir, Facts: facts})
	return res, mods, err
}

// compileFailed prints a failed compile's errors as JSON or YAML when asked (the
// error itself then carries only the count) and makes it exit 1.
func compileFailed(w io.Writer, format outputFormat, err error) error {
	var errs compiler.Errors
	if !errors.As(err, &errs) {
		return err
	}
	if format != outputJSON && format != outputYAML {
		return fmt.Errorf("the model does not compile: %w", err)
	}
	if werr := writeData(w, format, map[string]any{"errors": errs}); werr != nil {
		return werr
	}
	if len(errs) == 1 {
		return errors.New("the model does not compile: 1 error")
	}
	return fmt.Errorf("the model does not compile: %d errors", len(errs))
}

func compiledFlags(r compiler.Resource) string {
	var f []string
	for _, x := range []struct {
		on   bool
		name string
	}{{r.Undefined, "undefined"}, {r.Purged, "purged"}, {r.SendEvent, "send_event"},
		{r.ReceiveEvents, "receive_events"}, {r.ReportOnly, "report_only"}, {r.Unmanaged, "unmanaged"}} {
		if x.on {
			f = append(f, x.name)
		}
	}
	return strings.Join(f, ",")
}

func compileSummary(res *compiler.Result) string {
	s := fmt.Sprintf("%d resources from %d refinement instances, compiled in %s",
		len(res.Resources), res.Instances, res.Took.Round(time.Millisecond))
	if res.Undefined > 0 {
		s += fmt.Sprintf("; %d undefined (they wait for facts)", res.Undefined)
	}
	if len(res.Services) > 0 {
		names := make([]string, len(res.Services))
		for i, e := range res.Services {
			if e.Version > 1 {
				names[i] = fmt.Sprintf("%s (lifecycle %s, version %d)", e.Name, e.Lifecycle.Name, e.Version)
				continue
			}
			names[i] = fmt.Sprintf("%s (lifecycle %s)", e.Name, e.Lifecycle.Name)
		}
		s += "; service entities: " + strings.Join(names, ", ")
	}
	return s
}

// serverFacts fetches the facts the environment knows, for a compile.
func serverFacts(ctx context.Context, c *client.Client, env string) (map[string]map[string]json.RawMessage, error) {
	var page struct {
		Items []struct {
			ResourceID string          `json:"resource_id"`
			Name       string          `json:"name"`
			Value      json.RawMessage `json:"value"`
		} `json:"items"`
	}
	if err := c.Do(ctx, "GET", "/api/v1/environments/"+url.PathEscape(env)+"/facts", nil, &page); err != nil {
		return nil, fmt.Errorf("facts of environment %s: %w", env, err)
	}
	facts := map[string]map[string]json.RawMessage{}
	for _, f := range page.Items {
		if facts[f.ResourceID] == nil {
			facts[f.ResourceID] = map[string]json.RawMessage{}
		}
		facts[f.ResourceID][f.Name] = f.Value
	}
	return facts, nil
}

func exportCommand(g *globals) *cobra.Command {
	var release, partial bool
	var sets []string
	var file string
	var s *clientSettings
	cmd := &cobra.Command{
		Use:   "export [DIR]",
		Short: "Compile the project and upload the result as a new version (-d: and release it)",
		Long: `Compile the project in DIR (default: the current directory, or --project-dir)
with the facts the environment already knows, and upload the resources as
the environment's next version (PUT /api/v1/environments/{env}/versions).
With -d the version is also released, which deploys it when the
environment's auto_deploy is on (the default). Without -d it is released
only when the environment's auto_release is on (off by default). Only a
released version makes its model the live service instances' model
(docs/lsm.md).

--partial uploads only resource sets (PUT .../versions/partial): the sets
named with --set (default: every set the model has; a refinement instance's
resources are in the set "<refinement>/<instance>") together with the
shared resources. A --set the model no longer produces is removed from the
environment. Other sets stay as they are on the server.

-j FILE writes the version's JSON to FILE (- for standard output) instead of
uploading it; no server is needed then.

` + clientSettingsHelp + `

Exit codes: 0 exported; 1 the model does not compile or the server refused
the version; 2 usage; 3 the server could not be reached.

Examples:
  intend export -d
  intend export --partial --set app/shop -d
  intend export -j version.json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			dir := s.projectArg(args)
			if file != "" {
				if release {
					return usageErrorf("-j writes a file; it cannot also release (-d)")
				}
				res, mods, err := compileProject(ctx, dir, nil)
				if err != nil {
					return compileFailed(g.stdout, s.output, err)
				}
				// The plugins the version requires: their artifacts must
				// be uploaded (intend export does) before the file is.
				res = withPlugins(res, mods)
				body := res.Export()
				if partial {
					if body, err = partialBody(res, sets); err != nil {
						return err
					}
				}
				if file == "-" {
					return writeJSON(g.stdout, json.RawMessage(body))
				}
				if err := os.WriteFile(file, append(body, '\n'), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(g.stderr, "wrote %d resources to %s (%s)\n", len(res.Resources), file, compileSummary(res))
				return nil
			}
			// -d releases below, by hand; without it the environment's
			// auto_release decides.
			how := releaseBySetting
			if release {
				how = releaseNot
			}
			c, env, res, v, err := s.push(ctx, g.stdout, dir, partial, sets, how)
			if err != nil {
				return err
			}
			var rel *client.Release
			if release {
				r, err := c.Release(ctx, env, v.Version)
				if err != nil {
					return fmt.Errorf("release version %d: %w", v.Version, err)
				}
				rel = &r
			}
			if s.structured() {
				return s.write(map[string]any{"version": v, "release": rel})
			}
			fmt.Fprintf(g.stdout, "%s\nexported version %d of %s: %d resources, %d changed\n",
				compileSummary(res), v.Version, env, v.ResourceCount, v.ChangedCount)
			switch {
			case rel == nil && v.ReleasedAt != nil:
				fmt.Fprintf(g.stdout, "released version %d (the environment's auto_release is on)\n", v.Version)
			case rel == nil:
				fmt.Fprintf(g.stdout, "not released; release it with: intend versions release %d -e %s\n", v.Version, env)
			case rel.Request != nil:
				fmt.Fprintf(g.stdout, "released version %d: deploy request %d queued (follow it with intend runs list -e %s)\n",
					v.Version, rel.Request.ID, env)
			default:
				fmt.Fprintf(g.stdout, "released version %d; no deploy requested (auto_deploy is off: intend deploy-now -e %s)\n", v.Version, env)
			}
			return nil
		},
	}
	s = g.clientFlags(cmd)
	f := cmd.Flags()
	f.BoolVarP(&release, "release", "d", false, "release the version after uploading it (deploys it when auto_deploy is on)")
	f.BoolVar(&partial, "partial", false, "upload only resource sets (with the shared resources): the --set ones, or all")
	f.StringSliceVar(&sets, "set", nil, "with --partial: a resource set to upload (repeatable); one the model lacks is removed")
	f.StringVarP(&file, "json-file", "j", "", "write the version's JSON to FILE (- for standard output) instead of uploading")
	return cmd
}

// projectArg is the project directory: the command's DIR argument, else
// --project-dir. Settings come from the same directory's files.
func (s *clientSettings) projectArg(args []string) string {
	if len(args) == 1 {
		s.projectDir = args[0]
	}
	return s.projectDir
}

// push compiles the project in dir with the environment's facts and
// uploads the result as a new version (of the named sets, if partial).
// Compile errors are printed to w as JSON or YAML when -o asks.
//
// The version records the model source it was built from: releasing it
// makes that source the live service instances' model (docs/lsm.md).
// how says whether the server may release it (a dry-run's: never).
func (s *clientSettings) push(ctx context.Context, w io.Writer, dir string, partial bool, sets []string, how releaseHow) (
	c *client.Client, env string, res *compiler.Result, v client.VersionInfo, err error) {
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
	if err = uploadPlugins(ctx, notices(ctx), c, env, mods); err != nil {
		return
	}
	model, err := uploadSource(ctx, c, env, dir)
	if err != nil {
		return
	}
	v, err = upload(ctx, c, env, withPlugins(res, mods), partial, sets, model, how)
	return
}

// releaseHow says whether the server may release a pushed version.
type releaseHow string

const (
	// releaseBySetting leaves it to the environment's auto_release.
	releaseBySetting releaseHow = ""
	// releaseNot: the server does not release it (a dry-run's, or one
	// the command releases itself).
	releaseNot releaseHow = "false"
)

// uploadSource sends the project as the environment's model source, which
// the server compiles service instances from once a version built from it
// is released, and returns its hash.
func uploadSource(ctx context.Context, c *client.Client, env, dir string) (string, error) {
	packed, err := project.Archive(dir)
	if err != nil {
		return "", err
	}
	return packed.Hash, putSource(ctx, c, env, packed)
}

// putSource uploads a packed project as env's model source.
func putSource(ctx context.Context, c *client.Client, env string, packed project.Packed) error {
	// Staged: its service entities become the catalog when a version
	// built from it is released, with the source (a dry-run's never is).
	if err := c.Do(ctx, "PUT", client.EnvPath(env, "model")+"?stage=true", client.Raw{ContentType: "application/gzip", Body: packed.Archive}, nil); err != nil {
		return fmt.Errorf("upload the model source to %s: %w", env, err)
	}
	return nil
}

// upload exports a compile result as a full or partial version.
// The version records model, the source it was compiled from ("": none);
// how says whether the server may release it.
func upload(ctx context.Context, c *client.Client, env string, res *compiler.Result, partial bool, sets []string,
	model string, how releaseHow) (client.VersionInfo, error) {
	q := url.Values{}
	if model != "" {
		q.Set("model_source", model)
	}
	if how != releaseBySetting {
		q.Set("release", string(how))
	}
	query := ""
	if len(q) > 0 {
		query = "?" + q.Encode()
	}
	var v client.VersionInfo
	if !partial {
		if err := c.Do(ctx, "PUT", "/api/v1/environments/"+url.PathEscape(env)+"/versions"+query, res.Export(), &v); err != nil {
			return v, fmt.Errorf("export to %s: %w", env, err)
		}
		return v, nil
	}
	body, err := partialBody(res, sets)
	if err != nil {
		return client.VersionInfo{}, err
	}
	if err := c.Do(ctx, "PUT", "/api/v1/environments/"+url.PathEscape(env)+"/versions/partial"+query, body, &v); err != nil {
		return v, fmt.Errorf("partial export to %s: %w", env, err)
	}
	return v, nil
}

// partialBody is the partial export of the named sets (all, when none are
// named) with the shared resources; named sets the model lacks are
// removed.
func partialBody(res *compiler.Result, sets []string) ([]byte, error) {
	have := map[string]bool{}
	for _, r := range res.Resources {
		if r.ResourceSet != "" {
			have[r.ResourceSet] = true
		}
	}
	if len(have) == 0 && len(sets) == 0 {
		return nil, fmt.Errorf("--partial: the model has no resource sets (a refinement instance's resources are in one; or set resource_set)")
	}
	want := map[string]bool{}
	removed := []string{}
	for _, name := range sets {
		if have[name] {
			want[name] = true
		} else if !slices.Contains(removed, name) {
			removed = append(removed, name)
		}
	}
	body := struct {
		Resources []compiler.Resource `json:"resources"`
		Removed   []string            `json:"removed_resource_sets"`
		Plugins   json.RawMessage     `json:"plugins,omitempty"`
	}{Resources: []compiler.Resource{}, Removed: removed, Plugins: res.Plugins}
	for _, r := range res.Resources {
		if r.ResourceSet == "" || (len(sets) == 0 || want[r.ResourceSet]) {
			body.Resources = append(body.Resources, r)
		}
	}
	return json.Marshal(body)
}
