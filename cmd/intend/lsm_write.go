package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/dictpath"
	"github.com/intendhq/intend/internal/lsm"
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
func (w *lsmWrite) send(ctx context.Context, s *clientSettings, c *client.Client, method, path, entity string, body any) error {
	if w.key != "" {
		c = c.WithHeader("Idempotency-Key", w.key)
	}
	// The state waited for is checked before the request is sent.
	var lc *lsm.Lifecycle
	if w.wait != "" {
		var catalog struct {
			Lifecycle lsm.Lifecycle `json:"lifecycle"`
			Config    struct {
				AutoTransfers       *bool           `json:"auto_transfers"`
				AutoTransferConfigs map[string]bool `json:"auto_transfer_configs"`
			} `json:"config"`
		}
		if err := c.Do(ctx, http.MethodGet, lsmPath("service_catalog", entity), nil, &catalog); err != nil {
			return err
		}
		lc = &catalog.Lifecycle
		a := catalog.Config.AutoTransfers
		// A state an auto transfer the entity's config holds leaves waits
		// for a set-state (an instance's own config is not read).
		lc = withoutAuto(lc, lsm.AutoConfig{Off: a != nil && !*a, Entity: catalog.Config.AutoTransferConfigs})
		if _, ok := lc.States[w.wait]; !ok {
			return usageErrorf("--wait %s: lifecycle %s has no state %q (it has %s)", w.wait, lc.Name, w.wait,
				strings.Join(slices.Sorted(maps.Keys(lc.States)), ", "))
		}
	}
	var inst client.ServiceInstance
	if err := c.Do(ctx, method, path, body, &inst); err != nil {
		return err
	}
	if w.wait != "" {
		var err error
		inst, err = waitInstance(ctx, c, lc, entity, inst.ID, w.wait, inst.Version, w.timeout)
		if err != nil && inst.ID == "" {
			return err
		}
		if err != nil {
			// Show where the instance is, then the error.
			if perr := w.print(s, inst); perr != nil {
				return perr
			}
			return err
		}
	}
	return w.print(s, inst)
}

// print writes the instance as a write's answer.
func (w *lsmWrite) print(s *clientSettings, inst client.ServiceInstance) error {
	if s.structured() {
		return s.write(inst)
	}
	return writeFields(s.stdout, "id", inst.ID, "entity", fmt.Sprintf("%s (version %d)", inst.Entity, inst.EntityVersion),
		"identity", inst.Identity, "state", inst.State,
		"version", strconv.FormatInt(inst.Version, 10), "candidate", compactJSON(inst.Candidate),
		"active", compactJSON(inst.Active), "rollback", compactJSON(inst.Rollback))
}

// current returns the /lsm client and the version a write names: --version,
// or the instance's version read now.
func (w *lsmWrite) current(ctx context.Context, s *clientSettings, entity, id string) (*client.Client, int64, error) {
	c, err := s.lsmClient()
	if err != nil || w.version > 0 {
		return c, w.version, err
	}
	var inst client.ServiceInstance
	if err := c.Do(ctx, http.MethodGet, lsmPath("service_inventory", entity, id), nil, &inst); err != nil {
		return nil, 0, err
	}
	return c, inst.Version, nil
}

// sendCurrent sends the write that request makes of the version a write
// names (see current) for the instance id of entity, as send does.
func (w *lsmWrite) sendCurrent(ctx context.Context, s *clientSettings, method, entity, id string,
	request func(version int64) (path string, body any)) error {
	c, v, err := w.current(ctx, s, entity, id)
	if err != nil {
		return err
	}
	path, body := request(v)
	return w.send(ctx, s, c, method, path, entity, body)
}

// waitInstance polls an instance until it is in state. It ends with an
// error, sooner than the timeout, when the instance settles elsewhere: it
// is deleted, or it sits in a state its lifecycle leaves only on a request
// (no auto or resource transfer). Reaching state through a failed transfer
// after version since (a rejected update back to up, a failed deploy
// rolled back) is an error too, returned with the instance: the request
// did not take effect.
func waitInstance(ctx context.Context, c *client.Client, lc *lsm.Lifecycle, entity, id, state string, since int64, timeout time.Duration) (client.ServiceInstance, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	poll := 100 * time.Millisecond
	for {
		var inst client.ServiceInstance
		if err := c.Do(ctx, http.MethodGet, lsmPath("service_inventory", entity, id), nil, &inst); err != nil {
			return inst, err
		}
		// Messages name the instance by its identity when it has one.
		ref := id
		if inst.Identity != "" {
			ref = inst.Identity
		}
		diagnose := fmt.Sprintf("intend lsm diagnose %s %s says why", entity, ref)
		if inst.State == state {
			return inst, failedSince(ctx, c, entity, id, ref, since, diagnose)
		}
		if inst.Deleted {
			return inst, fmt.Errorf("instance %s ended in %s, not %s", ref, inst.State, state)
		}
		_, auto := lc.AutoFrom(inst.State)
		_, noResource := lc.Next(inst.State, lsm.Event{Trigger: lsm.Resource})
		if !auto && noResource != nil {
			return inst, fmt.Errorf("instance %s is %s (version %d), not %s, and stays there until a request moves it; %s",
				ref, inst.State, inst.Version, state, diagnose)
		}
		select {
		case <-ctx.Done():
			return inst, fmt.Errorf("instance %s still %s (version %d) after %s, not %s; %s",
				ref, inst.State, inst.Version, timeout, state, diagnose)
		case <-time.After(poll):
		}
		poll = min(2*poll, time.Second)
	}
}

// failedSince returns an error naming the first failed transfer of the
// instance after version since, if there is one.
func failedSince(ctx context.Context, c *client.Client, entity, id, ref string, since int64, diagnose string) error {
	var log struct {
		Items []struct {
			Version int64  `json:"version"`
			State   string `json:"state"`
			Event   struct {
				Error bool `json:"error"`
			} `json:"event"`
		} `json:"items"`
	}
	if err := c.Do(ctx, http.MethodGet, lsmPath("service_inventory", entity, id, "log"), nil, &log); err != nil {
		return err
	}
	for i := len(log.Items) - 1; i >= 0; i-- {
		if e := log.Items[i]; e.Version > since && e.Event.Error {
			return fmt.Errorf("instance %s failed at version %d (to %s) on the way: the request did not take effect; %s",
				ref, e.Version, e.State, diagnose)
		}
	}
	return nil
}

func lsmCreateCommand(s *clientSettings) *cobra.Command {
	var w lsmWrite
	var attrs []string
	var id string
	var entityVersion int
	var initialState string
	cmd := &cobra.Command{
		Use:   "create ENTITY --attr KEY=VALUE ...",
		Short: "Create a service instance (POST /lsm/v1/service_inventory/{entity})",
		Long: `Create an instance of ENTITY with the attributes given (VALUE is JSON when it
parses as JSON, else a string). It starts in its lifecycle's start state,
or with --initial-state in another state its lifecycle allows a create to
begin in (its initial_states, in intend lsm catalog ENTITY); the lifecycle
takes it from there (simple: validated, deployed, up).

Examples:
  intend lsm create vm --attr name=web --attr memory=4 --wait up
  intend lsm create vm --attr name=web --initial-state draft
  intend lsm create vm --attr name=db --idempotency-key create-db-1
  intend lsm create vm --entity-version 1 --attr name=old --attr memory=2`,
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
			body := client.CreateInstanceRequest{Attributes: attributeMap(values), ID: id, EntityVersion: entityVersion,
				InitialState: initialState}
			return w.send(cmd.Context(), s, c, http.MethodPost, lsmPath("service_inventory", args[0]), args[0], body)
		},
	}
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, "an attribute KEY=VALUE (repeatable)")
	cmd.Flags().StringVar(&id, "id", "", "the instance's id (a UUID; default: made up)")
	cmd.Flags().IntVar(&entityVersion, "entity-version", 0, "the version of ENTITY the instance is of (default: the latest; intend lsm catalog ENTITY lists them)")
	cmd.Flags().StringVar(&initialState, "initial-state", "", "the state the instance begins in, one its lifecycle allows (default: its start state)")
	w.flags(cmd, false)
	return cmd
}

func lsmUpdateCommand(s *clientSettings) *cobra.Command {
	var w lsmWrite
	var attrs, sets, removes []string
	var replace bool
	cmd := &cobra.Command{
		Use:   "update ENTITY ID (--attr KEY=VALUE ... [--replace] | --set PATH=VALUE | --remove PATH) ...",
		Short: "Change an instance's attributes (PATCH, or PUT with --replace, /lsm/v1/service_inventory/{entity}/{id}; or v2 edits)",
		Long: `Change the attributes given (only rw+ ones may change; 422 names any other)
through the lifecycle's on_update transfer (simple: validated, deployed,
up again, or rolled back when the deploy fails).

With --replace the attributes given are the instance's whole new set
(PUT): an attribute left out is removed, or gets its default as at a
create; r attributes keep the server's values. Give the rw ones as they
are (a changed one is refused).

--set and --remove send dict-path edits (PATCH /lsm/v2/...), in the order
given (every --set, then every --remove): a path addresses a value inside
the attributes, an element of a list of embedded entities by its key
(docs/lsm.md, "Dict paths" and "Embedded entities").

Examples:
  intend lsm update vm web --attr memory=8 --wait up
  intend lsm update vm web --replace --attr name=web --attr memory=8
  intend lsm update router r1 --set 'interfaces[name=eth0].mtu=9000'
  intend lsm update router r1 --set 'interfaces[name=eth2]={"name":"eth2"}' --remove 'interfaces[name=eth1]'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(sets)+len(removes) > 0 {
				if len(attrs) > 0 || replace {
					return usageErrorf("give --attr (with --replace or not), or --set and --remove, not both")
				}
				edits, err := pathEdits(sets, removes)
				if err != nil {
					return err
				}
				return w.sendCurrent(cmd.Context(), s, http.MethodPatch, args[0], args[1], func(v int64) (string, any) {
					return "/lsm/v2" + strings.TrimPrefix(lsmPath("service_inventory", args[0], args[1]), "/lsm/v1"),
						map[string]any{"current_version": v, "edit": edits}
				})
			}
			values, err := parseAssignments(attrs, "--attr")
			if err != nil {
				return err
			}
			method := http.MethodPatch
			if replace {
				method = http.MethodPut
			} else if len(values) == 0 {
				return usageErrorf("give at least one --attr KEY=VALUE (or --set PATH=VALUE, --remove PATH)")
			}
			return w.sendCurrent(cmd.Context(), s, method, args[0], args[1], func(v int64) (string, any) {
				return lsmPath("service_inventory", args[0], args[1]), client.UpdateInstanceRequest{CurrentVersion: v, Attributes: attributeMap(values)}
			})
		},
	}
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, "an attribute KEY=VALUE (repeatable)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "replace the value at a dict path: PATH=VALUE, e.g. 'interfaces[name=eth0].mtu=9000' (repeatable)")
	cmd.Flags().StringArrayVar(&removes, "remove", nil, "remove the value at a dict path, e.g. 'interfaces[name=eth1]' (repeatable)")
	cmd.Flags().BoolVar(&replace, "replace", false, "the --attr given are the whole new set: the others are removed (PUT)")
	w.flags(cmd, true)
	return cmd
}

// pathEdit is one v2 edit as the API takes it.
type pathEdit struct {
	Operation string          `json:"operation"`
	Target    string          `json:"target"`
	Value     json.RawMessage `json:"value,omitempty"`
}

// pathEdits are the replace edits of sets (PATH=VALUE: the path ends at
// the first '=' outside a selector, the value is JSON or else a string)
// and the remove edits of removes. Paths are checked here, so that a
// typo is a usage error.
func pathEdits(sets, removes []string) ([]pathEdit, error) {
	var edits []pathEdit
	for _, a := range sets {
		target, value, ok := splitPathAssignment(a)
		if !ok {
			return nil, usageErrorf("--set %q: want PATH=VALUE", a)
		}
		if _, err := dictpath.Parse(target); err != nil {
			return nil, usageErrorf("--set %q: %v", a, err)
		}
		v := json.RawMessage(value)
		if !json.Valid(v) {
			v, _ = json.Marshal(value)
		}
		edits = append(edits, pathEdit{Operation: "replace", Target: target, Value: v})
	}
	for _, target := range removes {
		if _, err := dictpath.Parse(target); err != nil {
			return nil, usageErrorf("--remove %q: %v", target, err)
		}
		edits = append(edits, pathEdit{Operation: "remove", Target: target})
	}
	return edits, nil
}

// splitPathAssignment splits PATH=VALUE at the first '=' that is neither
// escaped nor inside a selector ([name=eth0]).
func splitPathAssignment(s string) (path, value string, ok bool) {
	inSel := false // '[' is ordinary inside a selector
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			inSel = true
		case ']':
			inSel = false
		case '=':
			if !inSel {
				return s[:i], s[i+1:], i > 0
			}
		}
	}
	return "", "", false
}

func lsmMetadataCommand(s *clientSettings) *cobra.Command {
	var remove []string
	var replace bool
	cmd := &cobra.Command{
		Use:   "metadata ENTITY ID [KEY=VALUE ...] [--rm KEY ...] [--replace]",
		Short: "Show or set an instance's metadata (PATCH or PUT /lsm/v1/service_inventory/{entity}/{id}/metadata)",
		Long: `Metadata are free key/values of an instance (VALUE is JSON when it parses
as JSON, else a string). No lifecycle reads them and setting them takes no
transfer: the instance's version, state and log stay as they are. Keys
are 1 to 128 printable characters; an instance holds at most 16 KiB of
metadata (as JSON). Without KEY=VALUE nor --rm, prints them.

Examples:
  intend lsm metadata vm web                          print them
  intend lsm metadata vm web owner=ops ticket=1234    set two keys, keep the others
  intend lsm metadata vm web --rm ticket              remove one
  intend lsm metadata vm web --replace owner=dev      only owner is left`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			values, err := parseAssignments(args[2:], "KEY=VALUE")
			if err != nil {
				return err
			}
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			var inst client.ServiceInstance
			if len(values) == 0 && len(remove) == 0 && !replace {
				err = c.Do(cmd.Context(), http.MethodGet, lsmPath("service_inventory", args[0], args[1]), nil, &inst)
			} else {
				if replace && len(remove) > 0 {
					return usageErrorf("--rm with --replace: the keys not given are removed anyway")
				}
				body := attributeMap(values)
				for _, k := range remove {
					if _, dup := body[k]; dup {
						return usageErrorf("--rm %s: %s is set too", k, k)
					}
					body[k] = nil
				}
				method := http.MethodPatch
				if replace {
					method = http.MethodPut
				}
				err = c.Do(cmd.Context(), method, lsmPath("service_inventory", args[0], args[1], "metadata"),
					client.MetadataRequest{Metadata: body}, &inst)
			}
			if err != nil {
				return err
			}
			if s.structured() {
				return s.write(inst.Metadata)
			}
			pairs := make([]string, 0, 2*len(inst.Metadata))
			for _, k := range slices.Sorted(maps.Keys(inst.Metadata)) {
				pairs = append(pairs, k, compactJSON(inst.Metadata[k]))
			}
			return writeFields(s.stdout, pairs...)
		},
	}
	cmd.Flags().StringArrayVar(&remove, "rm", nil, "remove this key (repeatable)")
	cmd.Flags().BoolVar(&replace, "replace", false, "the KEY=VALUE given are the whole metadata: the others are removed (PUT)")
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
			return w.sendCurrent(cmd.Context(), s, http.MethodPost, args[0], args[1], func(v int64) (string, any) {
				return lsmPath("services", args[0], args[1], "state"), client.SetStateRequest{CurrentVersion: v, TargetState: args[2]}
			})
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
			return w.sendCurrent(cmd.Context(), s, http.MethodDelete, args[0], args[1], func(v int64) (string, any) {
				return lsmPath("service_inventory", args[0], args[1]) + "?current_version=" + strconv.FormatInt(v, 10), nil
			})
		},
	}
	w.flags(cmd, true)
	return cmd
}

func lsmRollbackCommand(s *clientSettings) *cobra.Command {
	var w lsmWrite
	cmd := &cobra.Command{
		Use:   "rollback ENTITY ID VERSION",
		Short: "Restore the attributes an instance had at VERSION (POST /lsm/v1/service_inventory/{entity}/{id}/rollback)",
		Long: `Send, as an update, the attributes the instance had at an earlier version
of its log (intend lsm log shows them): its active set then, or its
candidate set when it had none. The update goes through the lifecycle's
validation and deploy; a state that takes no update refuses it with 409.

Examples:
  intend lsm log vm web
  intend lsm rollback vm web 4 --wait up`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			to, err := strconv.ParseInt(args[2], 10, 64)
			if err != nil || to < 1 {
				return usageErrorf("VERSION %q: want a version of the instance's log (a positive whole number)", args[2])
			}
			return w.sendCurrent(cmd.Context(), s, http.MethodPost, args[0], args[1], func(v int64) (string, any) {
				return lsmPath("service_inventory", args[0], args[1], "rollback"), client.InstanceRollbackRequest{CurrentVersion: v, ToVersion: to}
			})
		},
	}
	w.flags(cmd, true)
	return cmd
}

// attributeMap holds the --attr values, each encoded as given, as the
// attributes of a request body.
func attributeMap(values map[string]json.RawMessage) map[string]any {
	out := make(map[string]any, len(values))
	for k, v := range values {
		out[k] = v
	}
	return out
}
