package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// Housekeeping (docs/operations.md): projects, clearing, decommissioning
// and protecting environments, deleting versions. As `intend env delete`,
// what destroys takes its target on the command line and --yes.

// projectCommand is `intend project`.
func projectCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "project",
		Short: "List, show, rename and delete projects",
		Long: `Manage projects through the REST API of a running server
(/api/v1/projects). A project groups environments; 'intend env create
--project P' creates one when it does not exist yet.

` + clientSettingsHelp,
	}
	groupRun(cmd)
	s := g.clientFlags(cmd)
	cmd.AddCommand(projectListCommand(s), projectShowCommand(s), projectRenameCommand(s), projectDeleteCommand(s))
	return cmd
}

func projectListCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the projects the caller sees",
		Long: `List the projects: GET /api/v1/projects (a token limited to environments
sees the projects of those).

Example:
  intend project list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := s.client()
			if err != nil {
				return err
			}
			items, err := c.List(cmd.Context(), "/api/v1/projects", nil, "after", 0)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			ps, err := decodeItems[client.Project](items)
			if err != nil {
				return err
			}
			t := s.table([]string{"NAME", "ID", "CREATED"})
			for _, p := range ps {
				t.row(p.Name, p.ID, shortTime(p.CreatedAt))
			}
			return t.flush()
		},
	}
}

func projectPath(p string) string { return "/api/v1/projects/" + url.PathEscape(p) }

// printProject prints a project as the server sent it.
func printProject(s *clientSettings, raw json.RawMessage) error {
	if s.structured() {
		return s.write(raw)
	}
	var p client.Project
	if err := decode(raw, &p); err != nil {
		return err
	}
	return writeFields(s.stdout, "name", p.Name, "id", p.ID, "created", shortTime(p.CreatedAt))
}

func projectShowCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "show PROJECT",
		Short: "Show a project",
		Long: `Show project PROJECT (an id or a name): GET /api/v1/projects/{project}.

Example:
  intend project show web`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodGet, projectPath(args[0]), nil, &raw); err != nil {
				return err
			}
			return printProject(s, raw)
		},
	}
}

func projectRenameCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "rename PROJECT NEW-NAME",
		Short: "Rename a project (a global admin)",
		Long: `Rename project PROJECT (an id or a name) to NEW-NAME: PATCH
/api/v1/projects/{project} with {"name": NEW-NAME}. Its environments stay
in it.

Example:
  intend project rename web shop`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodPatch, projectPath(args[0]), map[string]string{"name": args[1]}, &raw); err != nil {
				return err
			}
			return printProject(s, raw)
		},
	}
}

func projectDeleteCommand(s *clientSettings) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete PROJECT --yes",
		Short: "Delete a project that holds no environment (a global admin)",
		Long: `Delete project PROJECT (an id or a name): DELETE /api/v1/projects/{project}.
A project that holds environments is refused (409, naming them): delete
them first ('intend env delete'). --yes confirms.

Example:
  intend project delete old --yes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return usageErrorf("deleting project %s: pass --yes to confirm", args[0])
			}
			c, err := s.client()
			if err != nil {
				return err
			}
			if err := c.Do(cmd.Context(), http.MethodDelete, projectPath(args[0]), nil, nil); err != nil {
				return err
			}
			if s.structured() {
				return s.write(map[string]any{"deleted": args[0]})
			}
			fmt.Fprintf(s.stdout, "deleted project %s\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm the deletion")
	return cmd
}

func envClearCommand(s *clientSettings) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "clear ENV --yes",
		Short: "Remove every version, resource state and service instance of an environment, keeping its settings",
		Long: `Clear environment ENV (an id or a name): POST /api/v1/environments/{env}/clear.
Every workflow of the environment is stopped (deploys, repairs, dry-runs,
compiles, service instances, orders); its versions, deploy state, action
log, runs, compiles, model, service catalog and inventory are removed.
Its settings, tokens, audit trail and callbacks stay. What was deployed
stays where it is ('intend env decommission' removes it first). Version
numbers go on from where they were. A protected environment is refused.
ENV must be named on the command line, and --yes confirms.

Example:
  intend env clear staging --yes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return usageErrorf("clearing environment %s removes its versions, deploy state, action log and service instances: "+
					"pass --yes to confirm", args[0])
			}
			c, err := s.client()
			if err != nil {
				return err
			}
			out, err := c.ClearEnvironment(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if s.structured() {
				return s.write(out)
			}
			fmt.Fprintf(s.stdout, "cleared environment %s: %s, %s, %s\n", args[0], plural(int(out.Versions), "version"),
				plural(int(out.Resources), "resource"), plural(int(out.ServiceInstances), "service instance"))
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm the clear")
	return cmd
}

func envDecommissionCommand(s *clientSettings) *cobra.Command {
	var yes bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "decommission ENV --yes",
		Short: "Remove everything an environment deployed, then clear it",
		Long: `Decommission environment ENV (an id or a name): every workflow of the
environment stops, a version that purges every resource it manages (those
of its released and newest versions; report-only ones are left alone) is
released and deployed, and once everything is purged the environment is
cleared ('intend env clear'). Progress goes to standard error. While it
runs the environment takes no other export or release. When some
resources cannot be purged, it stops naming them after trying twice: fix
them and run it again, it goes on where it stopped. A protected or halted
environment is refused. ENV must be named on the command line, and --yes
confirms. POST /api/v1/environments/{env}/decommission, once a step.

Example:
  intend env decommission staging --yes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return usageErrorf("decommissioning environment %s deletes everything it deployed and then clears it: "+
					"pass --yes to confirm", args[0])
			}
			c, err := s.client()
			if err != nil {
				return err
			}
			last := ""
			d, err := c.Decommission(cmd.Context(), args[0], timeout, func(d client.Decommission, r *client.DeployRun) {
				line := ""
				switch {
				case d.State == "cleared":
				case r != nil:
					line = fmt.Sprintf("purging %d resources (version %d): run %d %s, %d removed, %d failed",
						d.Resources, d.Version, r.Run, r.Status, r.Deployed, r.Failed+r.Skipped+r.Unavailable)
				default:
					line = fmt.Sprintf("purging %d resources (version %d): %d removed, %d failed", d.Resources, d.Version,
						d.Purged, d.Failed)
				}
				if line != "" && line != last {
					fmt.Fprintln(s.stderr, line)
					last = line
				}
			})
			if err != nil {
				return err
			}
			if s.structured() {
				return s.write(d)
			}
			cl := client.Cleared{}
			if d.Cleared != nil {
				cl = *d.Cleared
			}
			fmt.Fprintf(s.stdout, "decommissioned environment %s: everything it deployed was removed; cleared %s, %s, %s\n",
				args[0], plural(int(cl.Versions), "version"), plural(int(cl.Resources), "resource"),
				plural(int(cl.ServiceInstances), "service instance"))
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm the decommission")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Hour, "how long to wait for the purge")
	return cmd
}

func envProtectCommand(s *clientSettings, on bool) *cobra.Command {
	use, short, long := "protect [ENV]", "Protect an environment against clear, decommission and delete", `Protect environment ENV (default the resolved environment): POST
/api/v1/environments/{env}/protect. A protected environment refuses clear,
decommission and delete (409) until a global admin lifts the protection
('intend env unprotect'). The environment's admin may protect it.

Example:
  intend env protect prod`
	path := "protect"
	if !on {
		use, short, long = "unprotect ENV", "Lift an environment's protection (a global admin)", `Lift the protection of environment ENV: POST
/api/v1/environments/{env}/unprotect. Only a global admin may: the
protection is what keeps an environment's own admins from clearing or
deleting it.

Example:
  intend env unprotect prod`
		path = "unprotect"
	}
	args := cobra.MaximumNArgs(1)
	if !on {
		args = cobra.ExactArgs(1)
	}
	return &cobra.Command{
		Use: use, Short: short, Long: long, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, env, err := s.envClient(args)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodPost, client.EnvPath(env, path), nil, &raw); err != nil {
				return err
			}
			if s.structured() {
				return s.write(raw)
			}
			if on {
				fmt.Fprintf(s.stdout, "environment %s is protected\n", env)
			} else {
				fmt.Fprintf(s.stdout, "environment %s is no longer protected\n", env)
			}
			return nil
		},
	}
}

func versionDeleteCommand(s *clientSettings) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete N --yes",
		Short: "Delete a version that is not released",
		Long: `Delete version N (a number) of the environment: DELETE
/api/v1/environments/{env}/versions/{n}. The released version, and a
version a deploy run or dry-run that has not finished uses, are refused
(409). Version numbers are not reused. --yes confirms.

Example:
  intend versions delete 7 -e prod --yes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || n < 1 {
				return usageErrorf("version %q: want a version number", args[0])
			}
			if !yes {
				return usageErrorf("deleting version %d: pass --yes to confirm", n)
			}
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			if err := c.Do(cmd.Context(), http.MethodDelete, client.EnvPath(env, "versions", args[0]), nil, nil); err != nil {
				return err
			}
			if s.structured() {
				return s.write(map[string]any{"deleted": n, "environment": env})
			}
			fmt.Fprintf(s.stdout, "deleted version %d of %s\n", n, env)
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm the deletion")
	return cmd
}
