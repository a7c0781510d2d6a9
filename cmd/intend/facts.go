package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// factsCommand is `intend facts`: the facts the model reads, those
// adapters discovered and those users set (parameters).
func factsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "facts",
		Short: "List an environment's facts, and set or remove parameters (user-set facts)",
		Long: `Work with the facts of an environment through the REST API of a running
server (/api/v1/environments/{env}/facts). A fact is a named JSON value of a
resource that the model reads (facts[id].name, docs/modeling.md): adapters
discover them on the targets (source adapter), and authors set them
(source user, a parameter). An adapter's value never replaces a user's of
the same name; removing the user's lets the adapter's next report in.
Setting one changes what the next compile produces, so it takes the author
role, and every set and removal is in the audit trail.

` + clientSettingsHelp,
	}
	groupRun(cmd)
	s := g.clientFlags(cmd)
	cmd.AddCommand(factsListCommand(s), factsSetCommand(s), factsRmCommand(s))
	return cmd
}

func factsListCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "list [RID]",
		Short: "List the facts of every resource, or of one",
		Long: `List the facts of the environment's resources (every page), by resource id
and name, with their source: GET /api/v1/environments/{env}/facts?resource=.

Examples:
  intend facts list -e prod
  intend facts list 'fs::File[web1,path=/etc/motd]' --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			q := url.Values{}
			if len(args) == 1 {
				q.Set("resource", args[0])
			}
			items, err := c.List(cmd.Context(), client.EnvPath(env, "facts"), q, "after", 0)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			fs, err := decodeItems[client.Fact](items)
			if err != nil {
				return err
			}
			t := s.table([]string{"RESOURCE", "NAME", "SOURCE", "VALUE", "UPDATED"})
			for _, f := range fs {
				t.row(f.ResourceID, f.Name, f.Source, string(f.Value), shortTime(f.UpdatedAt))
			}
			return t.flush()
		},
	}
}

func factsSetCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "set RID NAME VALUE",
		Short: "Set a fact of a resource (a parameter); VALUE is JSON",
		Long: `Set the fact NAME of resource RID to VALUE, a JSON value (quote a string
as JSON: '"eu-west-1"'): PUT /api/v1/environments/{env}/facts/{rid}/{name}.
The fact is source user; the model reads it at its next compile, and no
adapter's value of the same name replaces it. The resource need not exist
yet. At most 64 KiB of JSON, and 10,000 user-set facts an environment.

Examples:
  intend facts set 'rest::Object[api,path=/users/app]' owner '"team-a"' -e prod
  intend facts set 'fs::File[web1,path=/etc/motd]' limits '{"max": 3}'`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !json.Valid([]byte(args[2])) {
				return fmt.Errorf("VALUE %q is not JSON: quote a string as JSON, e.g. '\"%s\"'", args[2], args[2])
			}
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			var f client.Fact
			body := map[string]json.RawMessage{"value": json.RawMessage(args[2])}
			if err := c.Do(cmd.Context(), http.MethodPut, client.EnvPath(env, "facts", args[0], args[1]), body, &f); err != nil {
				return err
			}
			if s.structured() {
				return s.write(f)
			}
			fmt.Fprintf(s.stdout, "fact %s of %s set (source %s)\n", f.Name, f.ResourceID, f.Source)
			return nil
		},
	}
}

func factsRmCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "rm RID NAME",
		Short: "Remove a user-set fact",
		Long: `Remove the user-set fact NAME of resource RID:
DELETE /api/v1/environments/{env}/facts/{rid}/{name}. An adapter's facts
cannot be removed (404). The server answers 204 without a body; --json
prints {"environment": ENV, "resource_id": RID, "name": NAME, "removed": true}.

Example:
  intend facts rm 'fs::File[web1,path=/etc/motd]' limits -e prod`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			if err := c.Do(cmd.Context(), http.MethodDelete, client.EnvPath(env, "facts", args[0], args[1]), nil, nil); err != nil {
				return err
			}
			if s.structured() {
				return s.write(map[string]any{"environment": env, "resource_id": args[0], "name": args[1], "removed": true})
			}
			fmt.Fprintf(s.stdout, "fact %s of %s removed\n", args[1], args[0])
			return nil
		},
	}
}
