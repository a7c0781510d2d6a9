package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/migrations"
)

// tokenCommand is `intend token`: API tokens.
func tokenCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens",
		Long: `Work with the API tokens of a server (/api/v1/tokens; a global admin token
is needed). A token has a role — read, operator, author, admin or executor —
in every environment or in a list of them; its secret is shown once, when it
is made, and only its hash is stored. A revoked token is refused at once by
every server.

The first admin token has no token to make it with: create it against the
database directly (like vault operator init), on a host that can reach
PostgreSQL:

  intend token create --database-url postgres://... --name alice --role admin

or seed it with INTEND_BOOTSTRAP_TOKEN in the server's environment.
See docs/security.md.

` + clientSettingsHelp,
	}
	groupRun(cmd)
	s := g.clientFlags(cmd)
	cmd.AddCommand(tokenCreateCommand(g, s), tokenListCommand(s), tokenRevokeCommand(s), whoamiCommand(s))
	return cmd
}

func tokenCreateCommand(g *globals, s *clientSettings) *cobra.Command {
	var name, role, expiresIn, databaseURL string
	var envs, agents []string
	cmd := &cobra.Command{
		Use:   "create --name NAME --role ROLE",
		Short: "Make a token and print its secret (shown this once)",
		Long: `Make an API token and print its secret on stdout, alone on its line, so that
it can be captured: TOKEN=$(intend token create ...). The secret is not
stored and cannot be shown again; revoke the token and make another if it
is lost.

Roles (each grants what the ones before it grant; executor stands apart):
  read      read everything of its environments
  operator  also deploy, repair, dry-run, release, halt/resume, pause agents,
            write service instances
  author    also export versions and models, request compiles: decide what
            runs on the targets
  admin     also environments, settings, projects, tokens, the audit trail
  executor  only what an executor needs (--agents limits it to agents)

With --database-url the token is written to the database directly, with no
server and no token needed: this is how the first admin token is made.

Examples:
  intend token create --database-url "$DB" --name alice --role admin
  intend token create --name ci --role author --environments staging,prod --expires-in 720h
  intend token create --name grafana --role read`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if _, err := auth.ParseRole(role); err != nil {
				return usageErrorf("--role: %v", err)
			}
			if err := auth.ValidateTokenName(name); err != nil {
				return usageErrorf("--name %q: %v", name, err)
			}
			var ttl time.Duration
			if expiresIn != "" {
				d, err := time.ParseDuration(expiresIn)
				if err != nil || d <= 0 {
					return usageErrorf("--expires-in %q: want a duration such as 720h", expiresIn)
				}
				ttl = d
			}
			if databaseURL != "" {
				secret, err := createTokenInDatabase(ctx, databaseURL, name, role, envs, agents, ttl)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(s.stdout, secret)
				return err
			}
			c, err := s.client()
			if err != nil {
				return err
			}
			body := map[string]any{"name": name, "role": role}
			if len(envs) > 0 {
				body["environments"] = envs
			}
			if len(agents) > 0 {
				body["agents"] = agents
			}
			if ttl > 0 {
				body["expires_in"] = ttl.String()
			}
			var out client.CreatedToken
			if err := c.Do(ctx, http.MethodPost, "/api/v1/tokens", body, &out); err != nil {
				return err
			}
			if s.structured() {
				return s.write(out)
			}
			_, err = fmt.Fprintln(s.stdout, out.Secret)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "the token's name, as lists and the audit trail show it (required)")
	f.StringVar(&role, "role", "", "read, operator, author, admin or executor (required)")
	f.StringSliceVar(&envs, "environments", nil, "limit the token to these environments (ids or names; default every one)")
	f.StringSliceVar(&agents, "agents", nil, "limit an executor token to these agents")
	f.StringVar(&expiresIn, "expires-in", "", "expire the token after this long (720h); default never")
	f.StringVar(&databaseURL, "database-url", "",
		"write the token to this PostgreSQL database directly (no server, no token): the bootstrap of the first admin")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

// createTokenInDatabase stores a token with no server in between, after
// migrating the database as a starting server would.
func createTokenInDatabase(ctx context.Context, databaseURL, name, role string, envs, agents []string,
	ttl time.Duration) (string, error) {
	if _, _, err := migrations.Apply(ctx, databaseURL, -1); err != nil {
		return "", fmt.Errorf("migrate database: %w", err)
	}
	st, err := store.Open(ctx, databaseURL)
	if err != nil {
		return "", fmt.Errorf("database: %w", err)
	}
	defer st.Close()
	var ids []string
	for _, ref := range envs {
		e, err := st.GetEnvironment(ctx, ref)
		if err != nil {
			return "", fmt.Errorf("--environments: %w", err)
		}
		ids = append(ids, e.ID)
	}
	var expires *time.Time
	if ttl > 0 {
		t := time.Now().Add(ttl)
		expires = &t
	}
	secret := auth.NewSecret()
	if _, err := st.CreateToken(ctx, store.NewToken{Name: name, Role: role, Environments: ids, Agents: agents,
		Hash: auth.Hash(secret), Hint: auth.Hint(secret), CreatedBy: "cli:database", ExpiresAt: expires}); err != nil {
		return "", err
	}
	return secret, nil
}

func tokenListCommand(s *clientSettings) *cobra.Command {
	var revoked bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tokens (never their secrets)",
		Long: `List the API tokens: GET /api/v1/tokens. The HINT column shows the first
characters of each secret, to tell tokens apart; the secrets themselves are
not stored.

Examples:
  intend token list
  intend token list --revoked --json
  intend token list -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := s.client()
			if err != nil {
				return err
			}
			var q url.Values
			if revoked {
				q = url.Values{"revoked": {"true"}}
			}
			// Every page (GET /api/v1/tokens answers 100 at a time).
			items, err := c.List(cmd.Context(), "/api/v1/tokens", q, "after", 0)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			ts, err := decodeItems[client.Token](items)
			if err != nil {
				return err
			}
			t := s.table([]string{"ID", "NAME", "ROLE", "ENVIRONMENTS", "HINT", "CREATED", "EXPIRES", "LAST USED", "REVOKED"},
				"CREATED BY", "AGENTS")
			for _, tk := range ts {
				envs := "*"
				if tk.Environments != nil {
					envs = strings.Join(tk.Environments, ",")
				}
				agents := "*"
				if tk.Agents != nil {
					agents = strings.Join(tk.Agents, ",")
				}
				t.row(tk.ID, tk.Name, tk.Role, envs, tk.Hint, shortTime(tk.CreatedAt), shortTimePtr(tk.ExpiresAt),
					shortTimePtr(tk.LastUsedAt), shortTimePtr(tk.RevokedAt), tk.CreatedBy, agents)
			}
			return t.flush()
		},
	}
	cmd.Flags().BoolVar(&revoked, "revoked", false, "list revoked tokens too")
	return cmd
}

func tokenRevokeCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID|NAME",
		Short: "Revoke a token: every server refuses it from now on",
		Long: `Revoke a live token by id or name: DELETE /api/v1/tokens/{id}. Every server
replica refuses it from the next request on.

Example:
  intend token revoke ci`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.client()
			if err != nil {
				return err
			}
			var out client.Token
			if err := c.Do(cmd.Context(), http.MethodDelete, "/api/v1/tokens/"+url.PathEscape(args[0]), nil, &out); err != nil {
				return err
			}
			if s.structured() {
				return s.write(out)
			}
			_, err = fmt.Fprintf(s.stdout, "revoked token %s (%s)\n", out.Name, out.ID)
			return err
		},
	}
}

func whoamiCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show who the token is and its role in each environment it sees",
		Long: `Show who the resolved token authenticates as: GET /api/v1/whoami.

Example:
  intend token whoami`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := s.client()
			if err != nil {
				return err
			}
			var out client.Whoami
			if err := c.Do(cmd.Context(), http.MethodGet, "/api/v1/whoami", nil, &out); err != nil {
				return err
			}
			if s.structured() {
				return s.write(out)
			}
			if err := writeFields(s.stdout, "actor", out.Actor, "role", out.Role); err != nil {
				return err
			}
			t := newTable(s.stdout, "ENVIRONMENT", "ROLE")
			for _, name := range sortedKeys(out.Environments) {
				t.row(name, out.Environments[name])
			}
			return t.flush()
		},
	}
}
