package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/store"
)

// artifactsCommand is `intend artifacts`: the adapter plugins' artifacts
// an environment stores (docs/adapters.md, "Seeing and removing a
// plugin's artifacts"). `intend export` uploads them; these commands
// show them and remove those no version requires, which is how an author
// makes room once the environment's artifact_quota is reached.
func artifactsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "artifacts",
		Aliases: []string{"artifact"},
		Short:   "List an environment's adapter plugin artifacts, and remove those no version requires",
		Long: `Work with the artifacts of adapter plugins an environment stores, through
the REST API of a running server (/api/v1/environments/{env}/artifacts).
'intend export' uploads a plugin's artifacts (one per platform) before the
version that requires them; they count against the environment's
artifact_quota (2 GiB by default; only a global admin changes it) until
they are removed. An artifact a version of the environment requires
cannot be removed: delete that version first ('intend versions delete').

` + clientSettingsHelp,
	}
	groupRun(cmd)
	s := g.clientFlags(cmd)
	cmd.AddCommand(artifactsListCommand(s), artifactsRmCommand(s))
	return cmd
}

func artifactsListCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the environment's artifacts, their size and the versions that require them",
		Long: `List the environment's artifacts (every page), by digest: GET
/api/v1/environments/{env}/artifacts. VERSIONS are the environment's
versions whose plugins require the artifact ("-": none, so 'intend
artifacts rm' removes it). The digest is shortened (-o wide shows it in
full); 'intend artifacts rm' takes it either way. A last line sums the
sizes and how much of the environment's artifact_quota they take (GET
/api/v1/environments/{env}): the server counts each artifact as 64 KiB
at least. -o json or yaml prints the server's items as one list
({"items": [...]}), without that line.

Examples:
  intend artifacts list -e prod
  intend artifacts list -o wide
  intend artifacts list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			as, done, err := listEvery[client.Artifact](cmd.Context(), s, c, client.EnvPath(env, "artifacts"))
			if err != nil || done {
				return err
			}
			var e client.Environment
			if err := c.Do(cmd.Context(), http.MethodGet, client.EnvPath(env), nil, &e); err != nil {
				return err
			}
			t := newTable(s.stdout, "DIGEST", "SIZE", "VERSIONS", "UPLOADED", "BY")
			var size, charged int64
			for _, a := range as {
				digest := short(a.Digest)
				if s.wide() {
					digest = a.Digest
				}
				versions := make([]string, len(a.Versions))
				for i, v := range a.Versions {
					versions[i] = strconv.FormatInt(v, 10)
				}
				t.row(digest, byteCount(a.Size), strings.Join(versions, ","), shortTime(a.UploadedAt), a.UploadedBy)
				size += a.Size
				charged += max(a.Size, store.MinArtifactCharge)
			}
			if err := t.flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintln(s.stdout, artifactQuotaLine(len(as), size, charged, e.Settings.ArtifactQuota))
			return err
		},
	}
}

// artifactQuotaLine is the last line of the list: what the artifacts
// take, and how much of the quota that is as the server counts it.
func artifactQuotaLine(n int, size, charged, quota int64) string {
	line := plural(n, "artifact") + ", " + byteCount(size)
	if quota <= 0 {
		return line
	}
	return fmt.Sprintf("%s: %s of the artifact_quota of %s used (%d%%; an artifact counts 64 KiB at least)",
		line, byteCount(charged), byteCount(quota), charged*100/quota)
}

// byteCount shows a size for people, in binary units as the quota and
// the server's limits are set: "512 B", "64 KiB", "1.5 MiB", "2 GiB".
func byteCount(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	v := strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64)
	return strings.TrimSuffix(v, ".0") + " " + string("KMGTP"[exp]) + "iB"
}

func artifactsRmCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "rm DIGEST...",
		Short: "Remove artifacts no version of the environment requires",
		Long: `Remove each artifact DIGEST from the environment: DELETE
/api/v1/environments/{env}/artifacts/{digest}, which frees its share of the
artifact_quota. DIGEST is sha256:<64 hex>, or the start of one as 'intend
artifacts list' shows it (sha256:9f86d081884c…, at least 4 hex digits),
which must name one artifact of the environment. The server refuses an
artifact a version requires (409, naming the versions: delete them first,
'intend versions delete') and one it does not store (404). Each DIGEST is
tried; the command exits 1 when any was refused, after printing the
server's answer for each. It takes the author role. Nothing asks for
confirmation: an artifact removed is uploaded again by the next 'intend
export' that needs it. -o json prints {"environment": ENV, "removed":
[digests]}.

Examples:
  intend artifacts rm sha256:9f86d081884c -e dev
  intend artifacts list -o json | jq -r '.items[] | select(.versions == []) | .digest' | xargs -r intend artifacts rm`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, env, err := s.envClient(nil)
			if err != nil {
				return err
			}
			digests, err := resolveDigests(cmd.Context(), c, env, args)
			if err != nil {
				return err
			}
			removed := []string{}
			var failed []error
			for _, d := range digests {
				err := c.Do(cmd.Context(), http.MethodDelete, client.EnvPath(env, "artifacts", d), nil, nil)
				var ue *client.UnreachableError
				switch {
				case errors.As(err, &ue):
					return err
				case err != nil:
					failed = append(failed, fmt.Errorf("artifact %s: %w", d, err))
					continue
				}
				removed = append(removed, d)
				if !s.structured() {
					fmt.Fprintf(s.stdout, "removed artifact %s from %s\n", d, env)
				}
			}
			if s.structured() {
				if err := s.write(map[string]any{"environment": env, "removed": removed}); err != nil {
					return err
				}
			}
			return artifactFailures(failed)
		},
	}
}

// digestPrefix is what rm takes for a digest: sha256: and 4 to 64 hex
// digits, then the "…" of a shortened one.
var digestPrefix = regexp.MustCompile(`^sha256:([0-9a-f]{4,64})…?$`)

// resolveDigests turns rm's arguments into full digests: a full one as
// it is (the server says whether it stores it), a start of one by the
// environment's list, which must hold exactly one artifact it starts.
func resolveDigests(ctx context.Context, c *client.Client, env string, args []string) ([]string, error) {
	out := make([]string, len(args))
	var stored []client.Artifact
	for i, arg := range args {
		m := digestPrefix.FindStringSubmatch(arg)
		if m == nil {
			return nil, usageErrorf("%q is not an artifact digest: want sha256:<64 lowercase hex>, "+
				"or its start as 'intend artifacts list' shows it", arg)
		}
		prefix := "sha256:" + m[1]
		if store.ValidDigest(prefix) {
			out[i] = prefix
			continue
		}
		if stored == nil {
			raw, err := c.List(ctx, client.EnvPath(env, "artifacts"), nil, "after", 0)
			if err != nil {
				return nil, err
			}
			if stored, err = decodeItems[client.Artifact](raw); err != nil {
				return nil, err
			}
		}
		var matches []string
		for _, a := range stored {
			if strings.HasPrefix(a.Digest, prefix) {
				matches = append(matches, a.Digest)
			}
		}
		switch len(matches) {
		case 0:
			return nil, fmt.Errorf("environment %s stores no artifact whose digest starts with %s", env, prefix)
		case 1:
			out[i] = matches[0]
		default:
			return nil, fmt.Errorf("%s starts the digests of %d artifacts of environment %s (%s): give more of it",
				prefix, len(matches), env, strings.Join(matches, ", "))
		}
	}
	return out, nil
}

// artifactFailures is the error of the digests rm could not remove: the
// one as it is (main prints the server's problem), several each on its
// own line.
func artifactFailures(failed []error) error {
	switch len(failed) {
	case 0:
		return nil
	case 1:
		return failed[0]
	}
	lines := make([]string, len(failed))
	for i, err := range failed {
		lines[i] = explain(nil, err, true).Error()
	}
	return &exitError{code: exitFailed, err: errors.New(strings.Join(lines, "\n"))}
}
