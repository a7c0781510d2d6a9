package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/compiler"
)

// compilesCommand is `intend compiles`: the autonomous server's compiles
// of an environment's git repository.
func compilesCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "compiles",
		Short: "Ask the server to compile the environment's git repository, and follow its compiles",
		Long: `An environment whose settings name a git repository (repo_url, repo_branch)
is compiled by the server itself (the autonomous mode): it fetches the
branch, compiles it with the environment's facts, exports and releases the
version, each compile as the Temporal workflow env/<env>/compile/<id>.
recompile_interval makes it compile on a schedule too. repo_url is an
https://, ssh://, git:// or user@host:path URL, without credentials (the
server's git credential helper or ssh keys supply them); a path on the
server's host only when it runs with --allow-local-repos.

  intend env settings set repo_url=git@git.example.com:infra.git repo_branch=main
  intend compiles request --wait
  intend compiles list
  intend compiles show 3

` + clientSettingsHelp,
	}
	groupRun(cmd)
	s := g.clientFlags(cmd)
	cmd.AddCommand(compilesRequestCommand(s), compilesListCommand(s), compilesShowCommand(s))
	return cmd
}

func compilesRequestCommand(s *clientSettings) *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "request [--wait]",
		Short: "Queue a compile of the environment's repository (POST .../compile)",
		Long: `Queue a compile: POST /api/v1/environments/{env}/compile. While a compile
of the environment is still queued, the request is merged into it (the
same compile, merged + 1). With --wait it follows the compile and prints
its report; it exits 1 when the compile failed, printing its errors.

Examples:
  intend compiles request -e prod
  intend compiles request --wait --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var comp client.Compile
			if err := c.Do(ctx, http.MethodPost, client.EnvPath(env, "compile"), nil, &comp); err != nil {
				return err
			}
			if !wait {
				if s.structured() {
					return s.write(comp)
				}
				fmt.Fprintf(s.stdout, "compile %d %s (%s, merged %d); 'intend compiles show %d -e %s' follows it\n",
					comp.ID, comp.Status, comp.WorkflowID, comp.Merged, comp.ID, env)
				return nil
			}
			comp, err = waitCompile(ctx, c, env, comp.ID, timeout)
			if err != nil {
				return err
			}
			return printCompile(s, comp)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the compile to finish and print its report")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "with --wait: give up after this long")
	return cmd
}

// waitCompile polls a compile until it has finished.
func waitCompile(ctx context.Context, c *client.Client, env string, id int64, timeout time.Duration) (client.Compile, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var comp client.Compile
		if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "compiles", strconv.FormatInt(id, 10)), nil, &comp); err != nil {
			return comp, err
		}
		if comp.Status != "queued" && comp.Status != "running" {
			return comp, nil
		}
		select {
		case <-ctx.Done():
			return comp, fmt.Errorf("compile %d (%s) still %s after %s", id, comp.WorkflowID, comp.Status, timeout)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func compilesListCommand(s *clientSettings) *cobra.Command {
	var limit int
	return &cobra.Command{
		Use:   "list [--limit N]",
		Short: "List the environment's compiles, newest first (GET .../compiles)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			items, err := c.List(cmd.Context(), client.EnvPath(env, "compiles"), nil, "before", limit)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			comps, err := decodeItems[client.Compile](items)
			if err != nil {
				return err
			}
			t := s.table([]string{"ID", "STATUS", "REASON", "REQUESTED", "TOOK", "COMMIT", "VERSION", "ERRORS"},
				"MERGED", "STARTED", "FINISHED", "REPOSITORY", "BRANCH", "WORKFLOW ID")
			for _, comp := range comps {
				t.row(strconv.FormatInt(comp.ID, 10), comp.Status, comp.Reason, shortTime(comp.RequestedAt),
					duration(comp.StartedAt, comp.FinishedAt), shortCommit(comp.Commit), versionCell(comp), strconv.Itoa(len(compileErrors(comp))),
					strconv.Itoa(comp.Merged), shortTimePtr(comp.StartedAt), shortTimePtr(comp.FinishedAt), comp.RepoURL, comp.Branch, comp.WorkflowID)
			}
			return t.flush()
		},
	}
}

func compilesShowCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one compile: status, times, commit, version and errors (GET .../compiles/{id})",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id < 1 {
				return usageErrorf("compile %q: want a positive whole number", args[0])
			}
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			var comp client.Compile
			if err := c.Do(cmd.Context(), http.MethodGet, client.EnvPath(env, "compiles", args[0]), nil, &comp); err != nil {
				return err
			}
			return printCompile(s, comp)
		},
	}
}

// printCompile prints a compile's report; a failed compile exits 1.
func printCompile(s *clientSettings, comp client.Compile) error {
	if s.structured() {
		if err := s.write(comp); err != nil {
			return err
		}
	} else {
		if err := writeFields(s.stdout,
			"compile", strconv.FormatInt(comp.ID, 10),
			"status", comp.Status,
			"workflow", comp.WorkflowID,
			"reason", fmt.Sprintf("%s (merged %d)", comp.Reason, comp.Merged),
			"repository", comp.RepoURL+" "+comp.Branch,
			"commit", comp.Commit,
			"requested", shortTime(comp.RequestedAt),
			"took", duration(comp.StartedAt, comp.FinishedAt),
			"version", versionCell(comp),
		); err != nil {
			return err
		}
		for _, e := range compileErrors(comp) {
			fmt.Fprintf(s.stdout, "error: %s\n", e.Error())
		}
	}
	if comp.Success != nil && !*comp.Success {
		return fmt.Errorf("compile %d failed with %d errors", comp.ID, len(compileErrors(comp)))
	}
	return nil
}

func compileErrors(comp client.Compile) compiler.Errors {
	var errs compiler.Errors
	if len(comp.Errors) > 0 {
		_ = json.Unmarshal(comp.Errors, &errs)
	}
	return errs
}

func shortCommit(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func versionCell(comp client.Compile) string {
	if comp.Version == nil {
		return ""
	}
	v := strconv.FormatInt(*comp.Version, 10)
	switch {
	case comp.Exported != nil && !*comp.Exported:
		v += " (unchanged)"
	case comp.Released != nil && *comp.Released:
		v += " (released)"
	}
	return v
}
