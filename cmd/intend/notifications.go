package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// notificationsCommand is `intend notifications`: what an environment's
// operators should look at (/api/v1/environments/{env}/notifications).
func notificationsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "notifications",
		Short: "List an environment's notifications and mark them read or cleared",
		Long: `Work with the notifications of an environment through the REST API of a
running server (/api/v1/environments/{env}/notifications): a compile that
failed, a deploy or repair run that finished with failed resources, an
agent that has had no live executor for longer than agent_timeout. One
condition is one notification: while it is unresolved, the condition
happening again counts an occurrence on it. A compile that succeeds, a run
without failures, or an executor for the agent resolves it.

  intend notifications                 # the same as intend notifications list
  intend notifications list --unread
  intend notifications read ID...      # or --all: every unread one
  intend notifications clear ID...     # or --all: every one not cleared

Listing needs a read token, marking an operator token.

` + clientSettingsHelp,
		Args: cobra.NoArgs,
	}
	s := g.clientFlags(cmd)
	// Bare, it lists, with list's flags.
	cmd.RunE = notificationsListFlags(cmd, s)
	cmd.AddCommand(notificationsListCommand(s), notificationsMarkCommand(s, "read"), notificationsMarkCommand(s, "clear"))
	return cmd
}

func notificationsListCommand(s *clientSettings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the notifications, newest first",
		Long: `List the environment's notifications not cleared, newest first (every
page of GET /api/v1/environments/{env}/notifications): only those neither
read nor cleared with --unread, cleared ones too with --cleared. LINK
names the compile, run or agent it is about.

Examples:
  intend notifications list -e prod --unread
  intend notifications list --json | jq -r '.[] | select(.kind == "run_failed") | .run'`,
		Args: cobra.NoArgs,
	}
	cmd.RunE = notificationsListFlags(cmd, s)
	return cmd
}

// notificationsListFlags gives cmd list's flags and returns its RunE.
func notificationsListFlags(cmd *cobra.Command, s *clientSettings) func(*cobra.Command, []string) error {
	var unread, cleared bool
	cmd.Flags().BoolVar(&unread, "unread", false, "only those neither read nor cleared")
	cmd.Flags().BoolVar(&cleared, "cleared", false, "cleared ones too")
	return func(cmd *cobra.Command, _ []string) error {
		c, env, err := s.envClient(nil)
		if err != nil {
			return err
		}
		q := url.Values{}
		if unread {
			q.Set("unread", "true")
		}
		if cleared {
			q.Set("cleared", "true")
		}
		items, err := c.List(cmd.Context(), client.EnvPath(env, "notifications"), q, "after", 0)
		if err != nil {
			return err
		}
		if s.structured() {
			return s.writeArray(items)
		}
		ns, err := decodeItems[client.Notification](items)
		if err != nil {
			return err
		}
		t := s.table([]string{"ID", "CREATED", "SEVERITY", "TITLE", "LINK", "STATE"}, "TIMES", "LAST SEEN", "MESSAGE")
		for _, n := range ns {
			t.row(n.ID, shortTime(n.CreatedAt), n.Severity, n.Title, notificationLink(n), notificationState(n),
				strconv.Itoa(n.Occurrences), shortTime(n.LastSeenAt), n.Message)
		}
		return t.flush()
	}
}

// notificationLink names what a notification is about.
func notificationLink(n client.Notification) string {
	switch {
	case n.Compile != nil:
		return "compile " + strconv.FormatInt(*n.Compile, 10)
	case n.Run != nil:
		return "run " + strconv.FormatInt(*n.Run, 10)
	case n.Agent != "":
		return "agent " + n.Agent
	}
	return ""
}

// notificationState is unread, read or cleared, and resolved when its
// condition ended.
func notificationState(n client.Notification) string {
	st := "unread"
	switch {
	case n.ClearedAt != nil:
		st = "cleared"
	case n.ReadAt != nil:
		st = "read"
	}
	if n.ResolvedAt != nil {
		st += ",resolved"
	}
	return st
}

func notificationsMarkCommand(s *clientSettings, verb string) *cobra.Command {
	var all bool
	short, long := "Mark notifications read", `Mark the notifications ID... read (PATCH .../notifications/{id}
{"read": true}), or with --all every unread one. A read notification
leaves --unread lists and the console's count.`
	if verb == "clear" {
		short, long = "Clear notifications: lists leave them out", `Clear the notifications ID... (PATCH .../notifications/{id}
{"cleared": true}), or with --all every one not cleared: lists show them
only with --cleared. Clearing does not resolve: while its condition lasts,
a cleared notification counts occurrences and no new one is written.`
	}
	cmd := &cobra.Command{
		Use:   verb + " [ID...] [--all]",
		Short: short,
		Long: long + `

--json prints the notifications as they are then.

Examples:
  intend notifications ` + verb + ` 5f0c2d0e-7d6b-4c2e-9a55-2f1c9f3e8a10 -e prod
  intend notifications ` + verb + ` --all -e prod`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return usageErrorf("name the notifications to %s, or --all", verb)
			}
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ids := args
			if all {
				if ids, err = notificationIDs(ctx, c, env, verb == "read"); err != nil {
					return err
				}
			}
			yes := true
			marks := client.NotificationMarks{Read: &yes}
			if verb == "clear" {
				marks = client.NotificationMarks{Cleared: &yes}
			}
			out := make([]client.Notification, 0, len(ids))
			for _, id := range ids {
				n, err := c.MarkNotification(ctx, env, id, marks)
				if err != nil {
					return fmt.Errorf("notification %s: %w", id, err)
				}
				out = append(out, n)
			}
			if s.structured() {
				return s.write(out)
			}
			done := "read"
			if verb == "clear" {
				done = "cleared"
			}
			fmt.Fprintf(s.stdout, "%d notifications of %s marked %s\n", len(out), env, done)
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every unread notification (read), every one not cleared (clear)")
	return cmd
}

// notificationIDs lists the ids of the environment's notifications not
// cleared (only the unread ones with unread).
func notificationIDs(ctx context.Context, c *client.Client, env string, unread bool) ([]string, error) {
	ns, err := c.Notifications(ctx, env, unread, false)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = n.ID
	}
	return ids, nil
}
