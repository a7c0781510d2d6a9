package main

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
)

// Dynamic shell completion (intend completion bash|zsh|fish): the REST
// client commands complete environments, versions, resources, agents,
// service entities and instances by asking the server, with the settings
// the command line has so far (--server, --token, -e, the variables and
// project files). A shell waits on it, so it is short (completionTimeout)
// and silent: any error, such as no server, gives no candidates.

// completionTimeout bounds what one completion asks the server.
const completionTimeout = 2 * time.Second

// completionPage is how many items a completion fetches: the first page.
const completionPage = 1000

// lister fetches the candidates of one kind of argument, given the
// arguments before it, as "value" or "value\tdescription".
type lister func(ctx context.Context, s *clientSettings, args []string, toComplete string) ([]string, error)

// argListers complete a positional argument by its name in a command's
// Use line. ID is an instance only after ENTITY (see argListerFor).
var argListers = map[string]lister{
	"ENV":    listEnvironments,
	"V":      listVersions,
	"A":      listVersions,
	"B":      listVersions,
	"RID":    listResources,
	"AGENT":  listAgents,
	"ENTITY": listEntities,
}

// flagListers complete a command's own flags by their names.
var flagListers = map[string]lister{
	"agent":    listAgents,
	"resource": listResources,
	"entity":   listEntities,
}

// completeTree sets the completion of the positional arguments of every
// command under root that has client settings (its own or a group's), by
// the argument names of its Use line, and of its flags of flagListers.
func (g *globals) completeTree(root *cobra.Command) {
	var walk func(c *cobra.Command, s *clientSettings)
	walk = func(c *cobra.Command, s *clientSettings) {
		if own, ok := g.clients[c]; ok {
			s = own
		}
		if s != nil && c.ValidArgsFunction == nil && c.Runnable() {
			names := argNames(c.Use)
			listers := make([]lister, len(names))
			some := false
			for i, n := range names {
				listers[i] = argListerFor(names[:i], n)
				some = some || listers[i] != nil
			}
			if some {
				c.ValidArgsFunction = s.completeArgs(listers)
			}
			for name, list := range flagListers {
				if c.LocalNonPersistentFlags().Lookup(name) != nil {
					_ = c.RegisterFlagCompletionFunc(name, s.completeFlag(list))
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub, s)
		}
	}
	walk(root, nil)
}

// argListerFor is the lister of the argument name after the arguments
// before, or nil.
func argListerFor(before []string, name string) lister {
	if name == "ID" && len(before) == 1 && before[0] == "ENTITY" {
		return listInstances
	}
	return argListers[name]
}

// argNames are the positional arguments of a Use line: the words after
// the command's name, up to the first flag, "[ENV]" read as ENV.
func argNames(use string) []string {
	fields := strings.Fields(use)
	var names []string
	for _, f := range fields[min(1, len(fields)):] {
		f = strings.TrimSuffix(strings.TrimPrefix(f, "["), "]")
		if strings.HasPrefix(f, "-") {
			break
		}
		names = append(names, f)
	}
	return names
}

// completeArgs completes the positional arguments with listers, one per
// position (nil: nothing to offer).
func (s *clientSettings) completeArgs(listers []lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= len(listers) || listers[len(args)] == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return s.complete(cmd, args, toComplete, listers[len(args)])
	}
}

// complete runs list within completionTimeout, and keeps what starts with
// toComplete. An error gives no candidates and ShellCompDirectiveError, so
// that the shell offers nothing (not files) and prints nothing.
func (s *clientSettings) complete(cmd *cobra.Command, args []string, toComplete string, list lister) ([]cobra.Completion, cobra.ShellCompDirective) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	s.stderr = nil // no notes into the shell
	all, err := list(ctx, s, args, toComplete)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []cobra.Completion
	for _, c := range all {
		value, _, _ := strings.Cut(c, "\t")
		if strings.HasPrefix(value, toComplete) {
			out = append(out, c)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// fixedCompletion completes from a fixed list of candidates.
func fixedCompletion(candidates ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, c := range candidates {
			if value, _, _ := strings.Cut(c, "\t"); strings.HasPrefix(value, toComplete) {
				out = append(out, c)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeFlag is a flag's completion by list.
func (s *clientSettings) completeFlag(list lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return s.complete(cmd, args, toComplete, list)
	}
}

// firstPage is the items of the first page of a list endpoint.
func firstPage[T any](ctx context.Context, c *client.Client, path string, q url.Values) ([]T, error) {
	if q == nil {
		q = url.Values{}
	}
	q.Set("limit", strconv.Itoa(completionPage))
	var page struct {
		Items []T `json:"items"`
	}
	if err := c.Do(ctx, "GET", path+"?"+q.Encode(), nil, &page); err != nil {
		return nil, err
	}
	return page.Items, nil
}

// withDescription is a candidate with its description ("" for none).
func withDescription(value, description string) string {
	description = strings.Join(strings.Fields(description), " ")
	if description == "" {
		return value
	}
	return value + "\t" + description
}

func listEnvironments(ctx context.Context, s *clientSettings, _ []string, _ string) ([]string, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	envs, err := firstPage[struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}](ctx, c, "/api/v1/environments", nil)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = withDescription(e.Name, e.Description)
	}
	return out, nil
}

// listVersions offers latest and released, then the versions as the
// server lists them, newest first.
func listVersions(ctx context.Context, s *clientSettings, _ []string, _ string) ([]string, error) {
	c, env, err := s.envClient(nil)
	if err != nil {
		return nil, err
	}
	vs, err := firstPage[struct {
		Version    int64      `json:"version"`
		CreatedAt  time.Time  `json:"created_at"`
		ReleasedAt *time.Time `json:"released_at"`
	}](ctx, c, client.EnvPath(env, "versions"), nil)
	if err != nil {
		return nil, err
	}
	out := []string{"latest\tthe newest version", "released\tthe released version"}
	for _, v := range vs {
		d := "created " + shortTime(v.CreatedAt)
		if v.ReleasedAt != nil {
			d += ", released " + shortTimePtr(v.ReleasedAt)
		}
		out = append(out, withDescription(strconv.FormatInt(v.Version, 10), d))
	}
	return out, nil
}

// listResources offers the released resources' ids. The API filters by
// type, not by a prefix of the id: once the prefix names a whole type
// ("fs::File["), only that type is fetched.
func listResources(ctx context.Context, s *clientSettings, _ []string, toComplete string) ([]string, error) {
	c, env, err := s.envClient(nil)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if typ, _, found := strings.Cut(toComplete, "["); found {
		q.Set("type", typ)
	}
	rs, err := firstPage[struct {
		ID         string `json:"id"`
		Compliance string `json:"compliance"`
	}](ctx, c, client.EnvPath(env, "resources"), q)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = withDescription(r.ID, r.Compliance)
	}
	return out, nil
}

func listAgents(ctx context.Context, s *clientSettings, _ []string, _ string) ([]string, error) {
	c, env, err := s.envClient(nil)
	if err != nil {
		return nil, err
	}
	as, err := firstPage[struct {
		Name   string `json:"name"`
		Paused bool   `json:"paused"`
	}](ctx, c, client.EnvPath(env, "agents"), nil)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(as))
	for i, a := range as {
		d := ""
		if a.Paused {
			d = "paused"
		}
		out[i] = withDescription(a.Name, d)
	}
	return out, nil
}

func listEntities(ctx context.Context, s *clientSettings, _ []string, _ string) ([]string, error) {
	c, err := s.lsmClient()
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.Do(ctx, "GET", lsmPath("service_catalog"), nil, &raw); err != nil {
		return nil, err
	}
	var page struct {
		Items []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"items"`
	}
	if err := decode(raw, &page); err != nil {
		return nil, err
	}
	out := make([]string, len(page.Items))
	for i, e := range page.Items {
		out[i] = withDescription(e.Name, e.Description)
	}
	return out, nil
}

// listInstances offers the live instances of the entity args[0]: each by
// its id and, when it has one, by its identity (either names it).
func listInstances(ctx context.Context, s *clientSettings, args []string, _ string) ([]string, error) {
	c, err := s.lsmClient()
	if err != nil {
		return nil, err
	}
	insts, err := firstPage[struct {
		ID       string `json:"id"`
		Identity string `json:"identity"`
		State    string `json:"state"`
	}](ctx, c, lsmPath("service_inventory", args[0]), nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, i := range insts {
		out = append(out, withDescription(i.ID, strings.TrimSpace(i.Identity+" "+i.State)))
		if i.Identity != "" {
			out = append(out, withDescription(i.Identity, i.ID+" "+i.State))
		}
	}
	return out, nil
}
