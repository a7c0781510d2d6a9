package main

import (
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// auditCommand is `intend audit`: the audit trail.
func auditCommand(g *globals) *cobra.Command {
	var actor, action, since, until string
	var limit int
	var all bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show who did what, from where: the audit trail",
		Long: `Show the audit trail, newest first: every write to the API (and every
refused attempt by a known caller), with the actor (token:NAME, oidc:SUBJECT
or system:intend), the client's address, the action, and the answer's status.

Without --all it shows one environment's trail (admin in that environment):
GET /api/v1/environments/{env}/audit. With --all it shows every entry,
token and project operations included (a global admin token):
GET /api/v1/audit.

Examples:
  intend audit -e prod
  intend audit -e prod --actor token:ci --action version.
  intend audit --all --since 2026-11-24T00:00:00Z --json
  intend audit -e prod -o wide      # with the actor's kind and the detail

` + clientSettingsHelp,
		Args: cobra.NoArgs,
	}
	s := g.clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		q := url.Values{}
		for k, v := range map[string]string{"actor": actor, "action": action, "since": since, "until": until} {
			if v != "" {
				q.Set(k, v)
			}
		}
		var c *client.Client
		var path string
		var err error
		if all {
			c, err = s.client()
			path = "/api/v1/audit"
		} else {
			var env string
			c, env, err = s.envClient(nil)
			path = client.EnvPath(env, "audit")
		}
		if err != nil {
			return err
		}
		items, err := c.List(cmd.Context(), path, q, "before", limit)
		if err != nil {
			return err
		}
		if s.structured() {
			return s.writeArray(items)
		}
		es, err := decodeItems[client.AuditEntry](items)
		if err != nil {
			return err
		}
		t := s.table([]string{"ID", "AT", "ENVIRONMENT", "ACTOR", "FROM", "ACTION", "STATUS", "PATH"}, "ACTOR KIND", "DETAIL")
		for _, e := range es {
			detail := ""
			if len(e.Detail) > 0 && string(e.Detail) != "null" {
				detail = compactJSON(e.Detail)
			}
			t.row(strconv.FormatInt(e.ID, 10), shortTime(e.At), e.Environment, e.Actor, e.RemoteAddr, e.Action,
				strconv.Itoa(e.Status), e.Method+" "+e.Path, e.ActorKind, detail)
		}
		return t.flush()
	}
	f := cmd.Flags()
	f.StringVar(&actor, "actor", "", "only this actor (token:NAME, oidc:SUBJECT, system:intend)")
	f.StringVar(&action, "action", "", "only this action, or those starting so when it ends in '.' (version.)")
	f.StringVar(&since, "since", "", "only entries at or after this time (RFC 3339)")
	f.StringVar(&until, "until", "", "only entries before this time (RFC 3339)")
	f.IntVar(&limit, "limit", 100, "show at most this many entries (0: all)")
	f.BoolVar(&all, "all", false, "every environment's entries and the global ones (a global admin token)")
	return cmd
}
