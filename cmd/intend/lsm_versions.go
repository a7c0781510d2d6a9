package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/internal/store"
)

// Entity versions (docs/lsm.md, "Entity versions"): the catalog's
// versions of an entity, and the migration of instances to a newer one.

// writeEntityVersions prints the versions of a catalog entity (raw is
// GET /lsm/v1/service_catalog/{entity}), when it has more than one.
func writeEntityVersions(s *clientSettings, raw json.RawMessage) error {
	var e struct {
		Versions []store.EntityVersionInfo `json:"versions"`
	}
	if err := decode(raw, &e); err != nil || len(e.Versions) < 2 {
		return err
	}
	fmt.Fprintln(s.stdout)
	t := newTable(s.stdout, "VERSION", "LATEST", "ATTRIBUTES", "INSTANCES")
	for _, v := range e.Versions {
		names := make([]string, len(v.Attributes))
		for i, a := range v.Attributes {
			names[i] = a.Name
		}
		states := make([]string, 0, len(v.Instances))
		for st, n := range v.Instances {
			states = append(states, fmt.Sprintf("%s %d", st, n))
		}
		sort.Strings(states)
		t.row(strconv.Itoa(v.Version), yesNo(v.Latest), strings.Join(names, ", "), strings.Join(states, ", "))
	}
	return t.flush()
}

func lsmMigrateCommand(s *clientSettings) *cobra.Command {
	var w lsmWrite
	var to int
	cmd := &cobra.Command{
		Use:   "migrate ENTITY ID [--to N]",
		Short: "Move an instance to a newer version of its entity (POST /lsm/v1/service_inventory/{entity}/{id}/migrate)",
		Long: `Map the instance's attributes to version N of ENTITY (default: the latest)
through the model's migrations (each version's migrate, from the version
before it), and send them as an update of version N: the lifecycle
validates them as version N, deploys the instance's resources as version N
builds them, and the instance is then of version N. A migration the new
version's validation refuses leaves the instance on its version, the
errors in its log (intend lsm diagnose).

Examples:
  intend lsm migrate site blog --to 2 --wait up
  intend lsm catalog site                 the versions, and how many instances each has`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, v, err := w.current(cmd.Context(), s, args[0], args[1])
			if err != nil {
				return err
			}
			body := map[string]any{"current_version": v}
			if to != 0 {
				body["to_version"] = to
			}
			return w.send(cmd.Context(), s, c, http.MethodPost, lsmPath("service_inventory", args[0], args[1], "migrate"),
				args[0], body)
		},
	}
	cmd.Flags().IntVar(&to, "to", 0, "the entity version to migrate to (default: the latest)")
	w.flags(cmd, true)
	return cmd
}
