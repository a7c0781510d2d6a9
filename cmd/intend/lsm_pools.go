package main

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// lsmPoolsCommand is intend lsm pools [POOL]: the catalog's allocation
// pools with their usage, or one pool's values and who holds them.
func lsmPoolsCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "pools [POOL]",
		Short: "List the allocation pools and their usage, or the values one pool gave (GET /lsm/v1/pools[/{pool}])",
		Long: `intend lsm pools lists the pools the model declares (docs/lsm.md, "Allocation"):
their kind and definition, how many values they have, and how many live
instances hold. With a pool's name, it lists the values of that pool that
live instances hold, lowest first, and who holds each.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				p, err := c.All(cmd.Context(), lsmPath("pools", args[0]), nil, "allocations", "after", 0)
				if err != nil {
					return err
				}
				return writePool(s, p)
			}
			pools, done, err := listEvery[client.Pool](cmd.Context(), s, c, lsmPath("pools"))
			if err != nil || done {
				return err
			}
			t := newTable(s.stdout, "POOL", "KIND", "VALUES", "SIZE", "USED", "FREE")
			for _, p := range pools {
				t.row(p.Name, p.Kind, poolRange(p), strconv.FormatInt(p.Values, 10), strconv.FormatInt(p.Used, 10),
					strconv.FormatInt(p.Free, 10))
			}
			return t.flush()
		},
	}
}

// poolRange is what a pool hands out: "100–199", "/30s of 10.0.0.0/16".
func poolRange(p client.Pool) string {
	if p.Kind == "cidr" {
		return fmt.Sprintf("/%d of %s", p.Size, p.Prefix)
	}
	return fmt.Sprintf("%d–%d", p.From, p.To)
}

// poolValue prints a value: an integer in full (JSON decoded it as a
// float64), a subnet as it is.
func poolValue(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// writePool prints one pool and every allocation of it.
func writePool(s *clientSettings, p client.Paged) error {
	head, err := json.Marshal(p.Head)
	if err != nil {
		return err
	}
	var view client.PoolView
	if err := json.Unmarshal(head, &view); err != nil {
		return err
	}
	allocs, err := decodeItems[client.PoolAllocation](p.Items)
	if err != nil {
		return err
	}
	if s.structured() {
		view.Allocations = allocs
		if view.Allocations == nil {
			view.Allocations = []client.PoolAllocation{}
		}
		return s.write(view)
	}
	if err := writeFields(s.stdout, "pool", view.Name, "kind", view.Kind, "values", poolRange(view.Pool),
		"used", fmt.Sprintf("%d of %d (%d free)", view.Used, view.Values, view.Free)); err != nil {
		return err
	}
	if len(allocs) == 0 {
		return nil
	}
	fmt.Fprintln(s.stdout)
	t := newTable(s.stdout, "VALUE", "ENTITY", "INSTANCE", "ATTRIBUTE", "ALLOCATED")
	for _, a := range allocs {
		t.row(poolValue(a.Value), a.ServiceEntity, a.InstanceID, a.Attribute, shortTime(a.AllocatedAt))
	}
	return t.flush()
}
