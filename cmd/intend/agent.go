package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// agentCommand is `intend agent`: the agents of an environment.
func agentCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "List an environment's agents and pause or unpause them",
		Long: `Work with the agents of an environment through the REST API of a running
server (/api/v1/environments/{env}/agents). An agent is the first part of
a resource id's brackets, usually the machine its resources live on;
executors serve agents. A paused agent's resources are left out of every
run until it is unpaused.

` + clientSettingsHelp,
	}
	groupRun(cmd)
	s := g.clientFlags(cmd)
	cmd.AddCommand(agentListCommand(s), agentExecutorsCommand(s), agentPauseCommand(s, true), agentPauseCommand(s, false))
	return cmd
}

func agentExecutorsCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "executors",
		Short: "List the executors registered with the environment",
		Long: `List the executors that reported to the environment within the last 24
hours, stopped ones included, by name: which agents each serves, where it
runs, whether it is live (reported within 30 seconds), and the token that
registered it (REGISTERED BY, with -o wide; only that token updates or
stops the registration): GET /api/v1/environments/{env}/executors, every
page.

Examples:
  intend agent executors -e prod
  intend agent executors --json | jq -r '.[] | select(.live | not) | .name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			items, err := c.List(cmd.Context(), client.EnvPath(env, "executors"), nil, "after", 0)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			es, err := decodeItems[client.Executor](items)
			if err != nil {
				return err
			}
			t := s.table([]string{"EXECUTOR", "HOST", "AGENTS", "LIVE", "LAST SEEN"}, "PID", "VERSION", "STARTED", "STOPPED",
				"REGISTERED BY")
			for _, e := range es {
				host := e.Hostname
				if e.Embedded {
					host += "(embedded)"
				}
				t.row(e.Name, host, strings.Join(e.Agents, ","), yesNo(e.Live), shortTime(e.LastSeen),
					strconv.Itoa(e.PID), e.Version, shortTime(e.StartedAt), shortTimePtr(e.StoppedAt), e.RegisteredBy)
			}
			return t.flush()
		},
	}
}

func agentListCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the agents, whether they are paused and who serves them",
		Long: `List the agents of the environment's released versions, whether each is
paused, and the executors serving it (a "*" after a name: not live, it has
not reported for 30 seconds): GET /api/v1/environments/{env}/agents.

Examples:
  intend agent list -e prod
  intend agent list --json | jq -r '.[] | select(.paused) | .name'
  intend agent list -o wide         # with the executors' hosts, versions and last report`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			// Every page (GET .../agents answers 100 at a time).
			items, err := c.List(cmd.Context(), client.EnvPath(env, "agents"), nil, "after", 0)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			as, err := decodeItems[client.Agent](items)
			if err != nil {
				return err
			}
			t := s.table([]string{"AGENT", "PAUSED", "EXECUTORS", "FIRST SEEN"}, "HOSTS", "EXECUTOR VERSIONS", "LAST SEEN")
			for _, a := range as {
				names := make([]string, len(a.Executors))
				hosts := make([]string, len(a.Executors))
				versions := make([]string, len(a.Executors))
				var lastSeen time.Time
				for i, e := range a.Executors {
					names[i] = e.Name
					if !e.Live {
						names[i] += "*"
					}
					hosts[i], versions[i] = e.Hostname, e.Version
					if e.Embedded {
						hosts[i] += "(embedded)"
					}
					if e.LastSeen.After(lastSeen) {
						lastSeen = e.LastSeen
					}
				}
				t.row(a.Name, yesNo(a.Paused), strings.Join(names, ","), shortTime(a.FirstSeen),
					strings.Join(hosts, ","), strings.Join(versions, ","), shortTime(lastSeen))
			}
			return t.flush()
		},
	}
}

func agentPauseCommand(s *clientSettings, pause bool) *cobra.Command {
	verb, done := "unpause", "unpaused"
	short := "Unpause an agent: its resources take part in runs again"
	long := `Unpause AGENT: POST /api/v1/environments/{env}/agents/{agent}/unpause. Its
resources take part in runs again, and a deploy of them is queued.

Example:
  intend agent unpause web1 -e prod`
	if pause {
		verb, done = "pause", "paused"
		short = "Pause an agent: its resources are left out of every run"
		long = `Pause AGENT: POST /api/v1/environments/{env}/agents/{agent}/pause. Its
resources are left out of every run (deploys, repairs, retries) until it
is unpaused; a batch of it that is running finishes.

Example:
  intend agent pause web1 -e prod`
	}
	return &cobra.Command{
		Use:   verb + " AGENT",
		Short: short,
		Long: long + `

The server answers 204 without a body; --json prints
{"environment": ENV, "agent": AGENT, "paused": ` + strconv.FormatBool(pause) + `}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			if err := c.Do(cmd.Context(), http.MethodPost, client.EnvPath(env, "agents", args[0], verb), nil, nil); err != nil {
				return err
			}
			if s.structured() {
				return s.write(map[string]any{"environment": env, "agent": args[0], "paused": pause})
			}
			fmt.Fprintf(s.stdout, "agent %s of %s %s\n", args[0], env, done)
			return nil
		},
	}
}
