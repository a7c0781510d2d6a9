package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// envCommand is `intend env`: environments and their settings.
func envCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Create, list, show and delete environments, and change their settings",
		Long: `Manage environments through the REST API of a running server
(/api/v1/environments). An environment belongs to a project and holds
numbered desired-state versions, the deploy state of its resources and
their action log; its settings (docs/api.md, Settings) steer the
scheduler.

` + clientSettingsHelp,
	}
	groupRun(cmd)
	s := g.clientFlags(cmd)
	cmd.AddCommand(envCreateCommand(s), envListCommand(s), envShowCommand(s), envDeleteCommand(s),
		envSettingsCommand(s))
	cmd.AddCommand(envClearCommand(s), envDecommissionCommand(s), envProtectCommand(s, true), envProtectCommand(s, false))
	return cmd
}

func envCreateCommand(s *clientSettings) *cobra.Command {
	var projectName, description string
	var set []string
	cmd := &cobra.Command{
		Use:   "create NAME [--project P] [--description D] [--set KEY=VALUE ...]",
		Short: "Create an environment",
		Long: `Create environment NAME in a project: POST /api/v1/environments. The
project is --project (an id or a name), else the name in the project
directory's intend.yaml; a project named that does not exist yet is
created first (POST /api/v1/projects). Each --set gives a setting (see
'intend env settings'); a VALUE that parses as JSON is taken as JSON,
anything else as a string.

Examples:
  intend env create prod --project web --description "the live site"
  intend env create staging --project web --set auto_deploy=false --set deploy_interval=300
  intend env create dev --set 'autostart_agents=["web1","web2"]'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			settings, err := parseAssignments(set, "--set")
			if err != nil {
				return err
			}
			if projectName == "" {
				_, p, err := s.files()
				if err != nil {
					return err
				}
				if p == nil {
					return usageErrorf("no project: pass --project, or run in a project directory (intend.yaml)")
				}
				projectName = p.Name
			}
			c, err := s.client()
			if err != nil {
				return err
			}
			body := map[string]any{"project": projectName, "name": args[0]}
			if description != "" {
				body["description"] = description
			}
			if len(settings) > 0 {
				body["settings"] = settings
			}
			ctx := cmd.Context()
			var raw json.RawMessage
			err = c.Do(ctx, http.MethodPost, "/api/v1/environments", body, &raw)
			if projectMissing(err) && !uuidPattern.MatchString(projectName) {
				if err := c.Do(ctx, http.MethodPost, "/api/v1/projects", map[string]string{"name": projectName}, nil); err != nil {
					return fmt.Errorf("create project %s: %w", projectName, err)
				}
				fmt.Fprintf(s.stderr, "created project %s\n", projectName)
				err = c.Do(ctx, http.MethodPost, "/api/v1/environments", body, &raw)
			}
			if err != nil {
				return err
			}
			return showEnvironment(ctx, s, c, raw)
		},
	}
	f := cmd.Flags()
	f.StringVar(&projectName, "project", "", "project (id or name) of the environment (default: the name in intend.yaml)")
	f.StringVar(&description, "description", "", "what the environment is for")
	f.StringArrayVar(&set, "set", nil, "a setting, KEY=VALUE (VALUE as JSON when it parses, else a string); repeat for more")
	return cmd
}

// uuidPattern matches a project id, which env create must not take for
// the name of a project to create.
var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// projectMissing tells whether POST /environments refused the project as
// unknown.
func projectMissing(err error) bool {
	var p *client.Problem
	if !errors.As(err, &p) || p.Type != client.TypeInvalidField {
		return false
	}
	return slices.ContainsFunc(p.Errors, func(fe client.FieldError) bool { return fe.Field == "/project" })
}

// parseAssignments parses KEY=VALUE arguments into JSON values: VALUE as
// JSON when it is valid JSON (true, 300, ["a"], "x"), else as a string.
func parseAssignments(args []string, what string) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usageErrorf("%s %q: want KEY=VALUE", what, a)
		}
		if _, dup := out[k]; dup {
			return nil, usageErrorf("%s: %s given twice", what, k)
		}
		if json.Valid([]byte(v)) {
			out[k] = json.RawMessage(v)
			continue
		}
		b, _ := json.Marshal(v)
		out[k] = b
	}
	return out, nil
}

func envListCommand(s *clientSettings) *cobra.Command {
	var projectName string
	cmd := &cobra.Command{
		Use:   "list [--project P]",
		Short: "List environments",
		Long: `List the environments of every project, or of --project (an id or a
name): GET /api/v1/environments?project=P.

Examples:
  intend env list
  intend env list --project web --json
  intend env list -o wide           # with the ids, creation time and auto_deploy`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := s.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			q := url.Values{}
			if projectName != "" {
				q.Set("project", projectName)
			}
			items, err := c.List(ctx, "/api/v1/environments", q, "after", 0)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			envs, err := decodeItems[client.Environment](items)
			if err != nil {
				return err
			}
			names, err := projectNames(ctx, c)
			if err != nil {
				return err
			}
			t := s.table([]string{"NAME", "PROJECT", "RELEASED", "LATEST", "HALTED", "UPDATED", "DESCRIPTION"},
				"ID", "PROJECT ID", "CREATED", "AUTO DEPLOY")
			for _, e := range envs {
				t.row(e.Name, names[e.ProjectID], versionNumber(e.ReleasedVersion), strconv.FormatInt(e.LastVersion, 10),
					yesNo(e.Halted), shortTime(e.UpdatedAt), e.Description,
					e.ID, e.ProjectID, shortTime(e.CreatedAt), yesNo(e.Settings.AutoDeploy))
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&projectName, "project", "", "only the environments of this project (id or name)")
	return cmd
}

// projectNames maps project ids to names, for tables.
func projectNames(ctx context.Context, c *client.Client) (map[string]string, error) {
	items, err := c.List(ctx, "/api/v1/projects", nil, "after", 0)
	if err != nil {
		return nil, err
	}
	ps, err := decodeItems[client.Project](items)
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(ps))
	for _, p := range ps {
		names[p.ID] = p.Name
	}
	return names, nil
}

// versionNumber shows an optional version number.
func versionNumber(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}

func envShowCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "show [ENV]",
		Short: "Show an environment and its settings",
		Long: `Show environment ENV (an id or a name; default the environment resolved
from -e, INTEND_ENVIRONMENT, .intend or intend.yaml): its project,
description, versions, whether it is halted, and its settings.
GET /api/v1/environments/{env}.

Examples:
  intend env show prod
  intend env show -e prod --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, raw, err := getEnvironment(cmd.Context(), s, args)
			if err != nil {
				return err
			}
			return showEnvironment(cmd.Context(), s, c, raw)
		},
	}
}

// getEnvironment returns the client and environment ENV of args (default
// the resolved one) as the server sent it: GET /api/v1/environments/{env}.
func getEnvironment(ctx context.Context, s *clientSettings, args []string) (*client.Client, json.RawMessage, error) {
	c, env, err := s.envClient(args)
	if err != nil {
		return nil, nil, err
	}
	var raw json.RawMessage
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env), nil, &raw); err != nil {
		return nil, nil, err
	}
	return c, raw, nil
}

// showEnvironment prints an environment as the server sent it.
func showEnvironment(ctx context.Context, s *clientSettings, c *client.Client, raw json.RawMessage) error {
	if s.structured() {
		return s.write(raw)
	}
	var e client.Environment
	if err := decode(raw, &e); err != nil {
		return err
	}
	names, err := projectNames(ctx, c)
	if err != nil {
		return err
	}
	proj := e.ProjectID
	if n := names[e.ProjectID]; n != "" {
		proj = n + " (" + e.ProjectID + ")"
	}
	if err := writeFields(s.stdout,
		"name", e.Name,
		"id", e.ID,
		"project", proj,
		"description", e.Description,
		"halted", yesNo(e.Halted),
		"protected", yesNo(e.Protected),
		"released version", versionNumber(e.ReleasedVersion),
		"latest version", strconv.FormatInt(e.LastVersion, 10),
		"created", shortTime(e.CreatedAt),
		"updated", shortTime(e.UpdatedAt),
	); err != nil {
		return err
	}
	fmt.Fprintln(s.stdout)
	return writeSettings(s.stdout, raw)
}

// writeSettings prints the settings of an environment's JSON, by key.
func writeSettings(w io.Writer, envJSON json.RawMessage) error {
	var e struct {
		Settings map[string]json.RawMessage `json:"settings"`
	}
	if err := decode(envJSON, &e); err != nil {
		return err
	}
	keys := make([]string, 0, len(e.Settings))
	for k := range e.Settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	t := newTable(w, "SETTING", "VALUE")
	for _, k := range keys {
		t.row(k, compactJSON(e.Settings[k]))
	}
	return t.flush()
}

func envDeleteCommand(s *clientSettings) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete ENV --yes",
		Short: "Delete an environment with its versions, deploy state and action log",
		Long: `Delete environment ENV (an id or a name): DELETE /api/v1/environments/{env}.
Its scheduler stops, and its versions, deploy state and action log are
removed for good; what was deployed stays where it is. ENV must be named
on the command line, and --yes confirms. The server answers 204 without a
body; --json prints {"deleted": ENV}.

Example:
  intend env delete staging --yes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return usageErrorf("deleting environment %s removes its versions, deploy state and action log: pass --yes to confirm", args[0])
			}
			c, err := s.client()
			if err != nil {
				return err
			}
			if err := c.Do(cmd.Context(), http.MethodDelete, client.EnvPath(args[0]), nil, nil); err != nil {
				return err
			}
			if s.structured() {
				return s.write(map[string]any{"deleted": args[0]})
			}
			fmt.Fprintf(s.stdout, "deleted environment %s\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm the deletion")
	return cmd
}

func envSettingsCommand(s *clientSettings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "settings [ENV]",
		Short: "Show an environment's settings; 'settings set' changes them",
		Long: `Show the settings of environment ENV (default the resolved environment):
GET /api/v1/environments/{env}. The settings are listed in docs/api.md
(Settings): auto_deploy, auto_release, deploy_interval, repair_interval,
autostart_agents, keep_versions, agent_timeout, retry_attempts,
retry_backoff, and the retentions action_log_retention, run_retention,
compile_retention, order_retention, instance_log_retention and
notification_retention.

Examples:
  intend env settings prod
  intend env settings set -e prod deploy_interval=300 auto_deploy=false`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, raw, err := getEnvironment(cmd.Context(), s, args)
			if err != nil {
				return err
			}
			return printSettings(s, raw)
		},
	}
	set := &cobra.Command{
		Use:   "set KEY=VALUE...",
		Short: "Change settings of an environment",
		Long: `Change settings of the resolved environment (-e, INTEND_ENVIRONMENT, .intend
or intend.yaml): PATCH /api/v1/environments/{env} with {"settings": {...}}.
Settings merge key by key: the ones not named keep their values. A VALUE
that parses as JSON is taken as JSON (true, 300, ["web1"]), anything else
as a string. Prints the settings after the change.

Examples:
  intend env settings set -e prod deploy_interval=300
  intend env settings set -e prod auto_deploy=false 'autostart_agents=["web1"]'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			settings, err := parseAssignments(args, "setting")
			if err != nil {
				return err
			}
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodPatch, client.EnvPath(env),
				map[string]any{"settings": settings}, &raw); err != nil {
				return err
			}
			return printSettings(s, raw)
		},
	}
	cmd.AddCommand(set)
	return cmd
}

// printSettings prints an environment's settings: with --json, the
// settings object of the server's answer.
func printSettings(s *clientSettings, envJSON json.RawMessage) error {
	if s.structured() {
		var e struct {
			Settings json.RawMessage `json:"settings"`
		}
		if err := decode(envJSON, &e); err != nil {
			return err
		}
		return s.write(e.Settings)
	}
	return writeSettings(s.stdout, envJSON)
}
