package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/dictpath"
	"github.com/intendhq/intend/internal/compiler"
)

// lsmCommand is `intend lsm`: the lifecycle service manager's catalog and
// inventory (/lsm/v1).
func lsmCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lsm",
		Short: "The lifecycle service manager: service catalog and service inventory",
		Long: `Service entities are defined in the model (docs/lsm.md) and registered in
the environment's catalog when the model is exported. Their instances are
created, updated and deleted through the inventory, each following its
entity's lifecycle.

  intend lsm catalog                 the service entities
  intend lsm catalog vm              one entity: attributes, lifecycle, counts
  intend lsm list vm --state up      its instances
  intend lsm list vm -o wide         with their entity versions and creation times
  intend lsm show vm web             one instance (by id or identity)
  intend lsm log vm web              its versions, newest first
  intend lsm diagnose vm web         why it was rejected or failed
  intend lsm resources vm web        its resources and their deploy state
  intend lsm referenced-by vm web    the instances whose references name it
  intend lsm create vm --attr name=web --wait up
  intend lsm update vm web --attr memory=8 --wait up
  intend lsm dryrun vm web --attr memory=8   what the update would change
  intend lsm set-state vm web creating
  intend lsm delete vm web --wait terminated
  intend lsm callback add https://hooks.example.com/intend --entity vm
  intend lsm order sites.json --wait  several creates, updates, deletes at once
  intend lsm order show ID           one order and its items' outcomes
  intend lsm orders                  the environment's orders (-o wide: who asked, failures)
  intend lsm watch vm web            its transfers as they happen
  intend lsm config vm --auto-transfers=false
  intend lsm expert vm web --state up --reason "repaired by hand"
  intend lsm migrate vm web --to 2 --wait up   one instance to version 2 of vm

` + clientSettingsHelp,
	}
	groupRun(cmd)
	s := g.clientFlags(cmd)
	cmd.AddCommand(lsmCatalogCommand(s), lsmListCommand(s), lsmShowCommand(s), lsmLogCommand(s),
		lsmDiagnoseCommand(s), lsmResourcesCommand(s),
		lsmCreateCommand(s), lsmUpdateCommand(s), lsmSetStateCommand(s), lsmDeleteCommand(s), lsmRollbackCommand(s),
		lsmDryrunCommand(s), lsmCallbackCommand(s), lsmOrderCommand(s), lsmOrdersCommand(s),
		lsmWatchCommand(s), lsmConfigCommand(s), lsmExpertCommand(s), lsmMigrateCommand(s), lsmReferencedByCommand(s),
		lsmPoolsCommand(s))
	return cmd
}

// lsmClient is a client of the server that names the environment in the
// /lsm API's header.
func (s *clientSettings) lsmClient() (*client.Client, error) {
	c, env, err := s.envClient(nil)
	if err != nil {
		return nil, err
	}
	return c.WithHeader(client.EnvironmentHeader, env), nil
}

func lsmPath(segments ...string) string {
	var b strings.Builder
	b.WriteString("/lsm/v1")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

func lsmCatalogCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "catalog [ENTITY]",
		Short: "List the service entities, or show one (GET /lsm/v1/service_catalog[/{entity}])",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if len(args) == 0 {
				var raw json.RawMessage
				if err := c.Do(ctx, http.MethodGet, lsmPath("service_catalog"), nil, &raw); err != nil {
					return err
				}
				var page struct {
					Items []client.ServiceEntity `json:"items"`
				}
				if err := decode(raw, &page); err != nil {
					return err
				}
				if s.structured() {
					return s.write(raw)
				}
				t := s.table([]string{"ENTITY", "LIFECYCLE", "ATTRIBUTES", "INSTANCES", "DESCRIPTION"},
					"VERSION", "REGISTERED", "UPDATED", "MODEL HASH")
				for _, e := range page.Items {
					n := 0
					for _, k := range e.Instances {
						n += k
					}
					t.row(e.Name, e.Lifecycle.Name, strconv.Itoa(len(e.Attributes)), strconv.Itoa(n), e.Description,
						strconv.Itoa(e.Version), shortTime(e.RegisteredAt), shortTime(e.UpdatedAt), shortHash(e.ModelHash))
				}
				return t.flush()
			}
			var raw json.RawMessage
			if err := c.Do(ctx, http.MethodGet, lsmPath("service_catalog", args[0]), nil, &raw); err != nil {
				return err
			}
			if s.structured() {
				return s.write(raw)
			}
			var e client.ServiceEntity
			if err := decode(raw, &e); err != nil {
				return err
			}
			if err := writeFields(s.stdout, "entity", e.Name, "version", strconv.Itoa(e.Version)+" (latest)",
				"description", e.Description, "identity", e.Identity,
				"lifecycle", e.Lifecycle.Name+" (start "+e.Lifecycle.Start+")", "model", e.ModelHash); err != nil {
				return err
			}
			if err := writeEntityVersions(s, raw); err != nil {
				return err
			}
			fmt.Fprintln(s.stdout)
			t := newTable(s.stdout, "ATTRIBUTE", "MODIFIER", "REQUIRED", "DEFAULT", "SCHEMA", "DESCRIPTION")
			for _, a := range flatAttributes(e.Attributes, "") {
				mod := string(a.Modifier)
				if a.References != "" {
					mod += ",ref=" + a.References // it names instances of that entity
				}
				if a.Embedded != nil && len(a.Embedded.Key) > 0 {
					mod += ",key=" + strings.Join(a.Embedded.Key, ",key=") // edits address its elements by it
				}
				t.row(a.Name, mod, yesNo(a.Required), string(a.Default), string(a.Schema), a.Description)
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintln(s.stdout)
			states := make([]string, 0, len(e.Instances))
			for st := range e.Instances {
				states = append(states, st)
			}
			sort.Strings(states)
			t = newTable(s.stdout, "STATE", "INSTANCES")
			for _, st := range states {
				t.row(st, strconv.Itoa(e.Instances[st]))
			}
			return t.flush()
		},
	}
}

func lsmListCommand(s *clientSettings) *cobra.Command {
	var state string
	var deleted bool
	cmd := &cobra.Command{
		Use:   "list ENTITY [--state S] [--deleted]",
		Short: "List an entity's instances (GET /lsm/v1/service_inventory/{entity}, every page)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			q := url.Values{}
			if state != "" {
				q.Set("state", state)
			}
			if deleted {
				q.Set("deleted", "true")
			}
			items, err := c.List(cmd.Context(), lsmPath("service_inventory", args[0]), q, "after", 0)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			insts, err := decodeItems[client.ServiceInstance](items)
			if err != nil {
				return err
			}
			t := s.table([]string{"ID", "IDENTITY", "STATE", "VERSION", "UPDATED"}, "ENTITY VERSION", "CREATED", "DELETED")
			for _, i := range insts {
				t.row(i.ID, i.Identity, i.State, strconv.FormatInt(i.Version, 10), shortTime(i.UpdatedAt),
					strconv.Itoa(i.EntityVersion), shortTime(i.CreatedAt), yesNo(i.Deleted))
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only instances in this state")
	cmd.Flags().BoolVar(&deleted, "deleted", false, "list the terminated instances instead")
	return cmd
}

// lsmInstanceGet GETs a path under an instance and prints its JSON, or
// hands the raw answer to table.
func lsmInstanceGet(s *clientSettings, cmd *cobra.Command, args []string, tail string, table func(json.RawMessage) error) error {
	c, err := s.lsmClient()
	if err != nil {
		return err
	}
	segs := []string{"service_inventory", args[0], args[1]}
	if tail != "" {
		segs = append(segs, tail)
	}
	var raw json.RawMessage
	if err := c.Do(cmd.Context(), http.MethodGet, lsmPath(segs...), nil, &raw); err != nil {
		return err
	}
	if s.structured() {
		return s.write(raw)
	}
	return table(raw)
}

func lsmShowCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:     "show ENTITY ID",
		Aliases: []string{"get"},
		Short:   "Show an instance: state, version, its three attribute sets and who references it (ID: its id or identity)",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return lsmInstanceGet(s, cmd, args, "", func(raw json.RawMessage) error {
				var i client.InstanceView
				if err := decode(raw, &i); err != nil {
					return err
				}
				return writeFields(s.stdout, "id", i.ID, "entity", i.Entity, "identity", i.Identity, "state", i.State,
					"version", strconv.FormatInt(i.Version, 10), "candidate", compactJSON(i.Candidate),
					"active", compactJSON(i.Active), "rollback", compactJSON(i.Rollback),
					"referenced_by", referrersLine(i.ReferencedBy),
					"created", shortTime(i.CreatedAt), "updated", shortTime(i.UpdatedAt))
			})
		},
	}
}

func lsmLogCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "log ENTITY ID",
		Short: "Show an instance's log: one line per version, newest first",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return lsmInstanceGet(s, cmd, args, "log", func(raw json.RawMessage) error {
				var page struct {
					Items []client.InstanceLogEntry `json:"items"`
				}
				if err := decode(raw, &page); err != nil {
					return err
				}
				t := newTable(s.stdout, "VERSION", "STATE", "EVENT", "TIME", "ERRORS")
				for _, e := range page.Items {
					errs := ""
					if len(e.Errors) > 0 {
						errs = compactJSON(e.Errors)
					}
					t.row(strconv.FormatInt(e.Version, 10), e.State, compactJSON(e.Event), shortTime(e.CreatedAt), errs)
				}
				return t.flush()
			})
		},
	}
}

func lsmDiagnoseCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "diagnose ENTITY ID",
		Short: "Say why an instance was rejected or failed: compile errors, failed resources",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return lsmInstanceGet(s, cmd, args, "diagnose", func(raw json.RawMessage) error {
				var d client.Diagnosis
				if err := decode(raw, &d); err != nil {
					return err
				}
				fmt.Fprintf(s.stdout, "state: %s\n", d.State)
				if d.Validation != nil {
					var errs compiler.Errors
					if err := json.Unmarshal(d.Validation.Errors, &errs); err != nil || len(errs) == 0 {
						fmt.Fprintf(s.stdout, "validation failed at version %d: %s\n", d.Validation.Version, compactJSON(d.Validation.Errors))
					} else {
						fmt.Fprintf(s.stdout, "validation failed at version %d:\n  %s\n", d.Validation.Version,
							strings.ReplaceAll(errs.Error(), "\n", "\n  "))
					}
				}
				for _, r := range d.Resources {
					msg := "not deployed"
					if r.Error != nil {
						msg = firstLine(*r.Error)
					}
					fmt.Fprintf(s.stdout, "resource %s: %s\n", r.ResourceID, msg)
				}
				if d.Validation == nil && len(d.Resources) == 0 {
					fmt.Fprintln(s.stdout, "nothing failed")
				}
				return nil
			})
		},
	}
}

func lsmResourcesCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "resources ENTITY ID",
		Short: "List an instance's resources with their deploy state",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return lsmInstanceGet(s, cmd, args, "resources", func(raw json.RawMessage) error {
				var page struct {
					Items []client.ResourceState `json:"items"`
				}
				if err := decode(raw, &page); err != nil {
					return err
				}
				t := newTable(s.stdout, "RESOURCE", "RESULT", "COMPLIANCE")
				for _, r := range page.Items {
					t.row(r.ResourceID, r.LastResult, r.Compliance)
				}
				return t.flush()
			})
		},
	}
}

// flatAttributes lists specs and, after each embedded attribute, the
// attributes inside it, named by their wild dict path under prefix
// (interfaces[*].mtu, mgmt.host).
func flatAttributes(specs []client.AttributeSpec, prefix string) []client.AttributeSpec {
	var out []client.AttributeSpec
	for _, a := range specs {
		name := a.Name
		if prefix != "" {
			name = prefix + dictpath.Path{}.Key(a.Name).String() // escaped as a path writes it
		}
		a.Name = name
		out = append(out, a)
		if a.Embedded != nil {
			inner := name + "."
			if a.Embedded.List {
				inner = name + "[*]."
			}
			out = append(out, flatAttributes(a.Embedded.Attributes, inner)...)
		}
	}
	return out
}
