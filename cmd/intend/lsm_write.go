package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/internal/apiclient"
	"github.com/intendhq/intend/internal/store"
)

// The inventory's writes: each request names the instance's version the
// client saw (--version, or the current one read just before), may carry
// an Idempotency-Key, and may wait for the instance to reach a state.

// lsmWrite are the flags every write shares.
type lsmWrite struct {
	version int64
	key     string
	wait    string
	timeout time.Duration
}

func (w *lsmWrite) flags(cmd *cobra.Command, versioned bool) {
	f := cmd.Flags()
	if versioned {
		f.Int64Var(&w.version, "version", 0, "the instance's current version, as last seen (default: read it now; a stale one is refused with 409)")
	}
	f.StringVar(&w.key, "idempotency-key", "", "send this Idempotency-Key: a repeat of the same request gets the first answer and changes nothing")
	f.StringVar(&w.wait, "wait", "", "wait until the instance reaches this state (e.g. up, terminated) and print it")
	f.DurationVar(&w.timeout, "timeout", 5*time.Minute, "with --wait: give up after this long")
}

// send makes the request and, with --wait, follows the instance.
func (w *lsmWrite) send(ctx context.Context, s *clientSettings, c *apiclient.Client, method, path, entity string, body any) error {
	if w.key != "" {
		c = c.WithHeader("Idempotency-Key", w.key)
	}
	var inst store.ServiceInstance
	if err := c.Do(ctx, method, path, body, &inst); err != nil {
		return err
	}
	if w.wait != "" {
		var err error
		if inst, err = waitInstance(ctx, c, entity, inst.ID, w.wait, w.timeout); err != nil {
			return err
		}
	}
	if s.json {
		return writeJSON(s.stdout, inst)
	}
	return writeFields(s.stdout, "id", inst.ID, "entity", inst.Entity, "identity", inst.Identity, "state", inst.State,
		"version", strconv.FormatInt(inst.Version, 10), "candidate", compactJSON(inst.Candidate),
		"active", compactJSON(inst.Active), "rollback", compactJSON(inst.Rollback))
}

// current returns the /lsm client and the version a write names: --version,
// or the instance's version read now.
func (w *lsmWrite) current(ctx context.Context, s *clientSettings, entity, id string) (*apiclient.Client, int64, error) {
	c, err := s.lsmClient()
	if err != nil || w.version > 0 {
		return c, w.version, err
	}
	var inst store.ServiceInstance
	if err := c.Do(ctx, http.MethodGet, lsmPath("service_inventory", entity, id), nil, &inst); err != nil {
		return nil, 0, err
	}
	return c, inst.Version, nil
}

// waitInstance polls an instance until it is in state; a terminal state
// other than the one awaited ends the wait with an error.
func waitInstance(ctx context.Context, c *apiclient.Client, entity, id, state string, timeout time.Duration) (store.ServiceInstance, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	poll := 100 * time.Millisecond
	for {
		var inst store.ServiceInstance
		if err := c.Do(ctx, http.MethodGet, lsmPath("service_inventory", entity, id), nil, &inst); err != nil {
			return inst, err
		}
		if inst.State == state {
			return inst, nil
		}
		if inst.Deleted {
			return inst, fmt.Errorf("instance %s ended in %s, not %s", id, inst.State, state)
		}
		select {
		case <-ctx.Done():
			return inst, fmt.Errorf("instance %s still %s (version %d) after %s, not %s; intend lsm diagnose %s %s says why",
				id, inst.State, inst.Version, timeout, state, entity, id)
		case <-time.After(poll):
		}
		poll = min(2*poll, time.Second)
	}
}

func lsmCreateCommand(s *clientSettings) *cobra.Command {
	var w lsmWrite
	var attrs []string
	var id string
	cmd := &cobra.Command{
		Use:   "create ENTITY --attr KEY=VALUE ...",
		Short: "Create a service instance (POST /lsm/v1/service_inventory/{entity})",
		Long: `Create an instance of ENTITY with the attributes given (VALUE is JSON when it
parses as JSON, else a string). It starts in its lifecycle's start state;
the lifecycle takes it from there (simple: validated, deployed, up).

Examples:
  intend lsm create vm --attr name=web --attr memory=4 --wait up
  intend lsm create vm --attr name=db --idempotency-key create-db-1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			values, err := parseAssignments(attrs, "--attr")
			if err != nil {
				return err
			}
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			body := map[string]any{"attributes": values}
			if id != "" {
				body["service_instance_id"] = id
			}
			return w.send(cmd.Context(), s, c, http.MethodPost, lsmPath("service_inventory", args[0]), args[0], body)
		},
	}
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, "an attribute KEY=VALUE (repeatable)")
	cmd.Flags().StringVar(&id, "id", "", "the instance's id (a UUID; default: made up)")
	w.flags(cmd, false)
	return cmd
}

func lsmUpdateCommand(s *clientSettings) *cobra.Command {
	var w lsmWrite
	var attrs []string
	cmd := &cobra.Command{
		Use:   "update ENTITY ID --attr KEY=VALUE ...",
		Short: "Change an instance's attributes (PATCH /lsm/v1/service_inventory/{entity}/{id})",
		Long: `Change the attributes given (only rw+ ones may change; 422 names any other)
through the lifecycle's on_update transfer (simple: validated, deployed,
up again, or rolled back when the deploy fails).

Examples:
  intend lsm update vm web --attr memory=8 --wait up`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			values, err := parseAssignments(attrs, "--attr")
			if err != nil {
				return err
			}
			if len(values) == 0 {
				return usageErrorf("give at least one --attr KEY=VALUE")
			}
			c, v, err := w.current(cmd.Context(), s, args[0], args[1])
			if err != nil {
				return err
			}
			return w.send(cmd.Context(), s, c, http.MethodPatch, lsmPath("service_inventory", args[0], args[1]), args[0],
				map[string]any{"current_version": v, "attributes": values})
		},
	}
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, "an attribute KEY=VALUE (repeatable)")
	w.flags(cmd, true)
	return cmd
}

func lsmSetStateCommand(s *clientSettings) *cobra.Command {
	var w lsmWrite
	cmd := &cobra.Command{
		Use:   "set-state ENTITY ID TARGET",
		Short: "Ask for an api transfer to TARGET (POST /lsm/v1/services/{entity}/{id}/state)",
		Long: `Request the lifecycle's api transfer from the instance's state to TARGET
(simple: from failed to creating, to retry). An illegal one is refused
with 409, listing what the state allows.

Examples:
  intend lsm set-state vm web creating --wait up`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, v, err := w.current(cmd.Context(), s, args[0], args[1])
			if err != nil {
				return err
			}
			return w.send(cmd.Context(), s, c, http.MethodPost, lsmPath("services", args[0], args[1], "state"), args[0],
				map[string]any{"current_version": v, "target_state": args[2]})
		},
	}
	w.flags(cmd, true)
	return cmd
}

func lsmDeleteCommand(s *clientSettings) *cobra.Command {
	var w lsmWrite
	cmd := &cobra.Command{
		Use:   "delete ENTITY ID",
		Short: "Delete an instance through its lifecycle (DELETE /lsm/v1/service_inventory/{entity}/{id})",
		Long: `Start the lifecycle's on_delete transfer: the instance's resources are
purged, then it is terminated (simple: deleting → terminated).

Examples:
  intend lsm delete vm web --wait terminated`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, v, err := w.current(cmd.Context(), s, args[0], args[1])
			if err != nil {
				return err
			}
			path := lsmPath("service_inventory", args[0], args[1]) + "?current_version=" + strconv.FormatInt(v, 10)
			return w.send(cmd.Context(), s, c, http.MethodDelete, path, args[0], nil)
		},
	}
	w.flags(cmd, true)
	return cmd
}
