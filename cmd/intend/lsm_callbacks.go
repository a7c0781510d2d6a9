package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// lsmCallbackCommand is `intend lsm callback`: the URLs the server
// POSTs every transfer of the environment's service instances to
// (/lsm/v1/callbacks).
func lsmCallbackCommand(s *clientSettings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "callback",
		Short: "Callbacks: URLs that hear of every transfer of the service instances",
		Long: `A callback is a URL intend server POSTs every transfer of the environment's
service instances to (or those of one entity), as signed JSON: at least
once, in version order per instance, retried with backoff for up to a day.
docs/api.md ("Callbacks") says how a receiver verifies the signature.

  intend lsm callback add https://hooks.example.com/intend --entity vm
  intend lsm callback list
  intend lsm callback show ID
  intend lsm callback delete ID

Registering and deleting need an admin token; listing a read token.`,
	}
	groupRun(cmd)
	cmd.AddCommand(lsmCallbackAddCommand(s), lsmCallbackListCommand(s), lsmCallbackShowCommand(s),
		lsmCallbackDeleteCommand(s))
	return cmd
}

func lsmCallbackAddCommand(s *clientSettings) *cobra.Command {
	var entity, description string
	cmd := &cobra.Command{
		Use:   "add URL [--entity E] [--description D]",
		Short: "Register a callback (POST /lsm/v1/callbacks); prints its id and its secret, once",
		Long: `Register URL to hear of every transfer of the environment's service
instances, or only of those of --entity. The answer shows the callback's
secret, the key of its signatures, this once: keep it where the receiver
can read it.

Examples:
  intend lsm callback add https://hooks.example.com/intend
  intend lsm callback add https://hooks.example.com/vms --entity vm --description "VM inventory sync"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			body := map[string]any{"url": args[0]}
			if cmd.Flags().Changed("entity") {
				body["service_entity"] = entity
			}
			if description != "" {
				body["description"] = description
			}
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodPost, lsmPath("callbacks"), body, &raw); err != nil {
				return err
			}
			if s.structured() {
				return s.write(raw)
			}
			var cb client.CreatedCallback
			if err := decode(raw, &cb); err != nil {
				return err
			}
			if err := writeFields(s.stdout, "id", cb.ID, "url", cb.URL, "entity", orAll(cb.ServiceEntity),
				"secret", cb.Secret); err != nil {
				return err
			}
			_, err = fmt.Fprintln(s.stdout, "\nThe secret is shown this once: the receiver verifies every request with it.")
			return err
		},
	}
	cmd.Flags().StringVar(&entity, "entity", "", "only the instances of this service entity (default: every entity)")
	cmd.Flags().StringVar(&description, "description", "", "what the callback is for")
	return cmd
}

// orAll names an entity, or every entity.
func orAll(entity string) string {
	if entity == "" {
		return "(all)"
	}
	return entity
}

func lsmCallbackListCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the callbacks with their deliveries (GET /lsm/v1/callbacks)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			// Every page, printed as one list.
			cbs, done, err := listEvery[client.Callback](cmd.Context(), s, c, lsmPath("callbacks"))
			if err != nil || done {
				return err
			}
			t := newTable(s.stdout, "ID", "ENTITY", "URL", "PENDING", "DELIVERED", "DEAD", "LAST DELIVERED", "LAST ERROR")
			for _, cb := range cbs {
				st := cb.Stats
				t.row(cb.ID, orAll(cb.ServiceEntity), cb.URL, strconv.Itoa(st.Pending), strconv.Itoa(st.Delivered),
					strconv.Itoa(st.Dead), shortTimePtr(st.LastDeliveredAt), st.LastError)
			}
			return t.flush()
		},
	}
}

func lsmCallbackShowCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a callback, its deliveries and the events given up on (GET /lsm/v1/callbacks/{id})",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodGet, lsmPath("callbacks", args[0]), nil, &raw); err != nil {
				return err
			}
			if s.structured() {
				return s.write(raw)
			}
			var cb client.CallbackView
			if err := decode(raw, &cb); err != nil {
				return err
			}
			st := cb.Stats
			if err := writeFields(s.stdout, "id", cb.ID, "url", cb.URL, "entity", orAll(cb.ServiceEntity),
				"description", cb.Description, "created", shortTime(cb.CreatedAt)+" by "+cb.CreatedBy,
				"pending", strconv.Itoa(st.Pending), "oldest pending", shortTimePtr(st.OldestPending),
				"delivered", strconv.Itoa(st.Delivered), "last delivered", shortTimePtr(st.LastDeliveredAt),
				"dead", strconv.Itoa(st.Dead), "last error", st.LastError); err != nil {
				return err
			}
			if len(cb.DeadEvents) == 0 {
				return nil
			}
			fmt.Fprintln(s.stdout)
			t := newTable(s.stdout, "INSTANCE", "VERSION", "EVENT", "ATTEMPTS", "LAST ERROR")
			for _, e := range cb.DeadEvents {
				t.row(e.InstanceID, strconv.FormatInt(e.Version, 10), e.EventID, strconv.Itoa(e.Attempts), e.LastError)
			}
			return t.flush()
		},
	}
}

func lsmCallbackDeleteCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a callback and its undelivered events (DELETE /lsm/v1/callbacks/{id})",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			var cb client.Callback
			if err := c.Do(cmd.Context(), http.MethodDelete, lsmPath("callbacks", args[0]), nil, &cb); err != nil {
				return err
			}
			_, err = fmt.Fprintf(s.stdout, "deleted callback %s (%s)\n", cb.ID, cb.URL)
			return err
		},
	}
}
