package main

import (
	"encoding/json"
	"strings"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// lsmReferencedByCommand is `intend lsm referenced-by ENTITY ID`: the
// live instances whose reference attributes name the instance (GET
// .../{id}/referenced_by). While there are any, its delete is refused.
func lsmReferencedByCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "referenced-by ENTITY ID",
		Short: "List the instances that reference an instance (it cannot be deleted while there are any)",
		Long: `List the live instances whose reference attributes (@lsm(rw, ref=ENTITY) in
the model) name the instance, one line per instance and attribute. The
instance cannot be deleted while any does: delete them first, or update
their references (docs/lsm.md, "Relations between instances").

  intend lsm referenced-by site blog
  # ENTITY  ID     IDENTITY  ATTRIBUTE  STATE
  # alias   3f1c…  www       site       up`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return lsmInstanceGet(s, cmd, args, "referenced_by", func(raw json.RawMessage) error {
				var page struct {
					Items []client.InstanceReferrer `json:"items"`
				}
				if err := decode(raw, &page); err != nil {
					return err
				}
				t := newTable(s.stdout, "ENTITY", "ID", "IDENTITY", "ATTRIBUTE", "STATE")
				for _, r := range page.Items {
					t.row(r.ServiceEntity, r.ID, r.Identity, r.Attribute, r.State)
				}
				return t.flush()
			})
		},
	}
}

// referrersLine is `intend lsm show`'s referenced_by: "entity
// identity-or-id (attribute)", comma-separated, or "-".
func referrersLine(rs []client.InstanceReferrer) string {
	if len(rs) == 0 {
		return "-"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		name := r.Identity
		if name == "" {
			name = r.ID
		}
		parts[i] = r.ServiceEntity + " " + name + " (" + r.Attribute + ")"
	}
	return strings.Join(parts, ", ")
}
