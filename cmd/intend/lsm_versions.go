package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// Entity versions (docs/lsm.md, "Entity versions"): the catalog's
// versions of an entity, and the migration of instances to a newer one.

// writeEntityVersions prints the versions of a catalog entity (raw is
// GET /lsm/v1/service_catalog/{entity}), when it has more than one.
func writeEntityVersions(s *clientSettings, raw json.RawMessage) error {
	var e client.CatalogEntity
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
	var from, to int
	cmd := &cobra.Command{
		Use:   "migrate ENTITY [ID] [--from N] [--to M]",
		Short: "Move instances to a newer version of their entity (POST /lsm/v1/service_inventory/{entity}/{id}/migrate, POST /lsm/v1/service_catalog/{entity}/migrate)",
		Long: `With ID: map the instance's attributes to version M of ENTITY (default: the
latest) through the model's migrations (each version's migrate, from the
version before it), and send them as an update of version M: the
lifecycle validates them as version M, deploys the instance's resources as
version M builds them, and the instance is then of version M. A migration
the new version's validation refuses leaves the instance on its version,
the errors in its log (intend lsm diagnose).

Without ID: migrate every live instance of version N (--from, required) to
version M at once, as an order of one migrate item per instance (intend
lsm order show ID follows it). With --wait, follow the order until it ends
and print every instance's outcome; exit 1 unless all succeeded.

Examples:
  intend lsm migrate site blog --to 2 --wait up
  intend lsm migrate site --from 1 --to 2 --wait
  intend lsm catalog site                 the versions, and how many instances each has`,
		Args: cobra.RangeArgs(1, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			// --wait takes no value without ID, so "--wait up" parses as
			// --wait and an argument up: take it back as the state.
			if len(args) == 3 {
				if w.wait != waitEnd {
					return usageErrorf("too many arguments: ENTITY [ID]")
				}
				w.wait, args = args[2], args[:2]
			}
			if len(args) == 2 && w.wait == waitEnd {
				return usageErrorf("--wait STATE: the state to wait for the instance in (e.g. up)")
			}
			if len(args) == 1 {
				return migrateEntity(cmd, s, &w, args[0], from, to)
			}
			if from != 0 {
				return usageErrorf("--from is for a migration of every instance of a version: give ENTITY alone")
			}
			return w.sendCurrent(cmd.Context(), s, http.MethodPost, args[0], args[1], func(v int64) (string, any) {
				body := map[string]any{"current_version": v}
				if to != 0 {
					body["to_version"] = to
				}
				return lsmPath("service_inventory", args[0], args[1], "migrate"), body
			})
		},
	}
	cmd.Flags().IntVar(&from, "from", 0, "without ID: the version whose instances migrate")
	cmd.Flags().IntVar(&to, "to", 0, "the entity version to migrate to (default: the latest)")
	w.flags(cmd, true)
	f := cmd.Flags().Lookup("wait")
	f.NoOptDefVal = waitEnd
	f.Usage = "with ID: wait until the instance reaches this state (e.g. up) and print it; without ID: follow the migration's order until it ends"
	return cmd
}

// waitEnd is --wait without a value: a bulk migration's order's end.
const waitEnd = "end"

// migrateEntity is intend lsm migrate ENTITY --from N: the bulk
// migration's order, followed with --wait (any value: the order's end).
func migrateEntity(cmd *cobra.Command, s *clientSettings, w *lsmWrite, entity string, from, to int) error {
	if from == 0 {
		return usageErrorf("give ID to migrate one instance, or --from N to migrate every instance of version N")
	}
	c, err := s.lsmClient()
	if err != nil {
		return err
	}
	if w.key != "" {
		c = c.WithHeader("Idempotency-Key", w.key)
	}
	body := map[string]any{"from_version": from}
	if to != 0 {
		body["to_version"] = to
	}
	var o client.Order
	if err := c.Do(cmd.Context(), http.MethodPost, lsmPath("service_catalog", entity, "migrate"), body, &o); err != nil {
		return err
	}
	if w.wait == "" {
		if s.structured() {
			return s.write(o)
		}
		return writeFields(s.stdout, "order", o.ID, "status", o.Status, "instances", strconv.Itoa(o.ItemCount))
	}
	timeout := w.timeout
	if !cmd.Flags().Changed("timeout") {
		timeout = 30 * time.Minute
	}
	if o, err = waitOrder(cmd.Context(), c, o.ID, timeout); err != nil {
		return err
	}
	return printOrder(s, o, true)
}
