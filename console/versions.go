package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/textdiff"
)

// versionRoutes are the pages of desired-state versions: the list with
// Release and Rollback, the diff of two versions, and dry-runs.
func (c *Console) versionRoutes(r chi.Router) {
	r.Get("/console/env/{env}/versions", c.versions)
	r.Post("/console/env/{env}/versions/{version}/release", c.releaseOrRollback("release"))
	r.Post("/console/env/{env}/versions/{version}/rollback", c.releaseOrRollback("rollback"))
	r.Get("/console/env/{env}/diff", c.diff)
	r.Post("/console/env/{env}/dryrun", c.startDryrun)
	r.Get("/console/env/{env}/dryrun/{run}", c.dryrun)
}

func init() {
	funcs["dec"] = func(v int64) int64 { return v - 1 }
	// diffClass is the CSS class of a line of a unified diff.
	funcs["diffClass"] = func(line string) string {
		switch {
		case strings.HasPrefix(line, "@@"):
			return "hunk"
		case strings.HasPrefix(line, "+"):
			return "add"
		case strings.HasPrefix(line, "-"):
			return "del"
		case strings.HasPrefix(line, `\`), strings.HasPrefix(line, "…"):
			return "note"
		}
		return "ctx"
	}
}

// Bounds of the pages: versions listed at first (the API lists at most
// 1000, newest first, and has no cursor for them), and resources per page
// of a diff or a dry-run (the API's cursor pages on).
const (
	versionsPage = 50
	maxVersions  = 1000
	diffPage     = 500
	// The unified diff computed here of text of several lines: as the
	// server's action records bound theirs (docs/api.md).
	diffContext  = 3
	diffMaxLines = 200
	diffMaxBytes = 16 << 10
)

// positive parses a version or run number: a whole number from 1.
func positive(what, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		if s == "" {
			return 0, fmt.Errorf("name a %s (a whole number from 1)", what)
		}
		return 0, fmt.Errorf("%s %q is not a whole number from 1", what, s)
	}
	return n, nil
}

// invalid shows a request the console refuses before it reaches the API.
func (c *Console) invalid(w http.ResponseWriter, r *http.Request, status int, err error) {
	title := "Bad request"
	if status == http.StatusUnprocessableEntity {
		title = "Invalid request"
	}
	c.render(w, r, status, "error", page{Title: title, Env: chi.URLParam(r, "env"), Error: err.Error()})
}

// form reads a bounded form and checks its anti-forgery token; it shows
// the refusal and reports false when the form is stale.
func (c *Console) form(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if !c.checkCSRF(r, userOf(r).token) {
		c.render(w, r, http.StatusForbidden, "error", page{Title: "Forbidden", Env: chi.URLParam(r, "env"),
			Error: "The form is stale (the server restarted, or you signed in again); go back and press the button again."})
		return false
	}
	return true
}

// versionsData is the versions page's.
type versionsData struct {
	Items []client.VersionInfo
	// Released is the released version (0: none yet).
	Released int64
	Operator bool
	// More is the number of versions to list to see older ones (0: all
	// are listed).
	More int
	// From and To fill the diff form: the two newest versions.
	From, To int64
}

func (c *Console) versions(w http.ResponseWriter, r *http.Request) {
	u, env := userOf(r), chi.URLParam(r, "env")
	limit := versionsPage
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxVersions {
			c.invalid(w, r, http.StatusBadRequest, fmt.Errorf("limit %q is not a whole number from 1 to %d", s, maxVersions))
			return
		}
		limit = n
	}
	e, err := u.api.Environment(r.Context(), env)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	var list struct {
		Items []client.VersionInfo `json:"items"`
	}
	if err := u.api.Do(r.Context(), http.MethodGet, client.EnvPath(env, "versions")+"?limit="+strconv.Itoa(limit), nil, &list); err != nil {
		c.fail(w, r, err)
		return
	}
	d := versionsData{Items: list.Items, Operator: u.may(env, auth.RoleOperator)}
	if e.ReleasedVersion != nil {
		d.Released = *e.ReleasedVersion
	}
	if len(list.Items) == limit && limit < maxVersions {
		d.More = min(limit+versionsPage, maxVersions)
	}
	if n := len(list.Items); n > 0 {
		d.To, d.From = list.Items[0].Version, list.Items[min(1, n-1)].Version
	}
	c.render(w, r, http.StatusOK, "versions", page{Title: "Versions of " + env, Env: env, Data: d})
}

// releaseOrRollback presses Release or Rollback on a version, then shows
// the versions again with what was done.
func (c *Console) releaseOrRollback(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, env := userOf(r), chi.URLParam(r, "env")
		v, err := positive("version", chi.URLParam(r, "version"))
		if err != nil {
			c.invalid(w, r, http.StatusBadRequest, err)
			return
		}
		if !c.form(w, r) {
			return
		}
		if action == "rollback" && !c.confirmed(w, r, fmt.Sprintf("Roll back %s to version %d?", env, v),
			fmt.Sprintf("This makes a new version, a copy of version %d, and releases it: what changed since is undone on the targets.", v),
			fmt.Sprintf("Roll back to version %d", v), "/console/env/"+url.PathEscape(env)+"/versions") {
			return
		}
		var flash string
		if action == "release" {
			rel, err := u.api.Release(r.Context(), env, v)
			if err != nil {
				c.fail(w, r, err)
				return
			}
			flash = fmt.Sprintf("Version %d released", v)
			if rel.AlreadyReleased {
				flash = fmt.Sprintf("Version %d was already released", v)
			}
			flash += deployNote(rel.Request)
		} else {
			rb, err := u.api.Rollback(r.Context(), env, v)
			if err != nil {
				c.fail(w, r, err)
				return
			}
			flash = fmt.Sprintf("Rolled back to version %d: version %d, a copy of it, released", v, rb.Version.Version) +
				deployNote(rb.Request)
		}
		http.Redirect(w, r, c.flashURL(r, "/console/env/"+url.PathEscape(env)+"/versions", flash), http.StatusSeeOther)
	}
}

// deployNote ends a flash message with the deploy request a release
// queued.
func deployNote(req *client.Request) string {
	if req == nil {
		return "; no deploy was needed."
	}
	return fmt.Sprintf(" (deploy request %d).", req.ID)
}

// attrChange is one attribute's change as a page shows it: a unified
// diff for text of several lines, else from → to.
type attrChange struct {
	Name     string
	From, To string
	// Diff is the unified diff's lines (nil: show from → to).
	Diff []string
	// Note says more: sizes of summarised values, a cut diff, sensitive.
	Note string
}

// resourceChanges is one resource's changes.
type resourceChanges struct {
	ID      string
	Status  string
	Error   string
	Changes []attrChange
}

// change is one attribute's change as the API sends it: a version diff's
// {"from", "to"}, or an action record's, which may hold a diff and the
// sizes of summarised values.
type change struct {
	From          json.RawMessage `json:"from"`
	To            json.RawMessage `json:"to"`
	Diff          string          `json:"diff"`
	DiffTruncated bool            `json:"diff_truncated"`
	Sensitive     bool            `json:"sensitive"`
	// SensitiveOutput: the adapter declares the change a sensitive
	// output; Redacted: the API held it back from this user (below
	// author), from and to being its marker.
	SensitiveOutput bool `json:"sensitive_output"`
	Redacted        bool `json:"redacted"`
	FromBytes       *int `json:"from_bytes"`
	ToBytes         *int `json:"to_bytes"`
}

// changesOf turns the API's {"attr": change} into attributes in name
// order (nil for none, or for what does not read as that).
func changesOf(raw json.RawMessage) []attrChange {
	var m map[string]change
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]attrChange, 0, len(names))
	for _, n := range names {
		out = append(out, attrChangeOf(n, m[n]))
	}
	return out
}

func attrChangeOf(name string, ch change) attrChange {
	a := attrChange{Name: name, From: shown(ch.From), To: shown(ch.To)}
	if ch.Redacted {
		// The marker is all there is: no note of sizes, no diff.
		a.Note = "sensitive output: visible to the environment's authors and admins"
		return a
	}
	if ch.Sensitive {
		a.Note = "sensitive: sizes and hashes only"
	} else if ch.FromBytes != nil || ch.ToBytes != nil {
		a.Note = sizeOf(ch.FromBytes) + " → " + sizeOf(ch.ToBytes)
	}
	diff := ch.Diff
	if diff == "" && !ch.Sensitive {
		from, fromOK := textSide(ch.From)
		to, toOK := textSide(ch.To)
		if fromOK && toOK && (severalLines(from) || severalLines(to)) {
			var cut bool
			diff, cut = textdiff.Unified(from, to, diffContext, diffMaxLines, diffMaxBytes)
			ch.DiffTruncated = ch.DiffTruncated || (cut && diff != "")
		}
	}
	if diff != "" {
		a.Diff = strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
		if ch.DiffTruncated {
			a.Note = strings.TrimPrefix(a.Note+"; diff cut short", "; ")
		}
	}
	if ch.SensitiveOutput {
		a.Note = strings.TrimPrefix(a.Note+"; sensitive output, hidden from operators and readers", "; ")
	}
	return a
}

// shown is a value as a page shows it: its JSON ("absent" for null),
// cut to 300 characters.
func shown(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return "absent"
	}
	if r := []rune(s); len(r) > 300 {
		return string(r[:300]) + "…"
	}
	return s
}

// textSide is one side of a change as text: a string's value, "" for an
// absent side; false for any other value.
func textSide(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// severalLines: more than one line (a final newline starts none).
func severalLines(s string) bool { return strings.Contains(strings.TrimSuffix(s, "\n"), "\n") }

func sizeOf(n *int) string {
	if n == nil {
		return "absent"
	}
	return fmt.Sprintf("%d bytes", *n)
}

// diffData is the diff page's.
type diffData struct {
	From, To int64
	Added    []string
	Removed  []string
	Modified []resourceChanges
	// After is this page's cursor, Next the next page's ("" on the last).
	After, Next string
}

func (c *Console) diff(w http.ResponseWriter, r *http.Request) {
	u, env, q := userOf(r), chi.URLParam(r, "env"), r.URL.Query()
	from, err := positive("version", q.Get("from"))
	if err == nil {
		var to int64
		if to, err = positive("version", q.Get("to")); err == nil {
			c.showDiff(w, r, u, env, from, to, q.Get("after"))
			return
		}
	}
	c.invalid(w, r, http.StatusBadRequest, fmt.Errorf("pick two versions to compare: %w", err))
}

func (c *Console) showDiff(w http.ResponseWriter, r *http.Request, u *user, env string, from, to int64, after string) {
	api := url.Values{"limit": {strconv.Itoa(diffPage)}}
	if after != "" {
		api.Set("after", after)
	}
	var vd struct {
		Added    []string `json:"added"`
		Removed  []string `json:"removed"`
		Modified []struct {
			ID      string          `json:"id"`
			Changes json.RawMessage `json:"changes"`
		} `json:"modified"`
		Next string `json:"next"`
	}
	path := client.EnvPath(env, "versions", strconv.FormatInt(from, 10), "diff", strconv.FormatInt(to, 10)) + "?" + api.Encode()
	if err := u.api.Do(r.Context(), http.MethodGet, path, nil, &vd); err != nil {
		c.fail(w, r, err)
		return
	}
	d := diffData{From: from, To: to, Added: vd.Added, Removed: vd.Removed, After: after, Next: vd.Next}
	for _, m := range vd.Modified {
		d.Modified = append(d.Modified, resourceChanges{ID: m.ID, Status: "modified", Changes: changesOf(m.Changes)})
	}
	c.render(w, r, http.StatusOK, "diff", page{Title: fmt.Sprintf("Version %d → %d", from, to), Env: env, Data: d})
}

// startDryrun starts a dry-run of a version and shows its page.
func (c *Console) startDryrun(w http.ResponseWriter, r *http.Request) {
	u, env := userOf(r), chi.URLParam(r, "env")
	if !c.form(w, r) {
		return
	}
	v, err := positive("version", r.PostFormValue("version"))
	if err != nil {
		c.invalid(w, r, http.StatusUnprocessableEntity, err)
		return
	}
	run, err := u.api.RequestDryrun(r.Context(), env, client.DryrunRequest{Version: v})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	flash := fmt.Sprintf("Dry-run %d of version %d started.", run.Run, v)
	http.Redirect(w, r, c.flashURL(r, fmt.Sprintf("/console/env/%s/dryrun/%d", url.PathEscape(env), run.Run), flash),
		http.StatusSeeOther)
}

// dryrunData is a dry-run's page.
type dryrunData struct {
	Run     client.DeployRun
	Running bool
	Results []resourceChanges
	// Unmodified counts the results of this page shown in one line.
	Unmodified []string
	After      string
	Next       string
}

func (c *Console) dryrun(w http.ResponseWriter, r *http.Request) {
	u, env := userOf(r), chi.URLParam(r, "env")
	id, err := positive("dry-run", chi.URLParam(r, "run"))
	if err != nil {
		c.invalid(w, r, http.StatusBadRequest, err)
		return
	}
	after := r.URL.Query().Get("after")
	api := url.Values{"limit": {strconv.Itoa(diffPage)}}
	if after != "" {
		api.Set("after", after)
	}
	var dr client.Dryrun
	if err := u.api.Do(r.Context(), http.MethodGet, client.EnvPath(env, "dryrun", strconv.FormatInt(id, 10))+"?"+api.Encode(), nil, &dr); err != nil {
		c.fail(w, r, err)
		return
	}
	d := dryrunData{Run: dr.DeployRun, Running: dr.FinishedAt == nil, After: after, Next: dr.Next}
	for _, res := range dr.Results {
		if res.Status == "unmodified" && res.Error == nil {
			d.Unmodified = append(d.Unmodified, res.ResourceID)
			continue
		}
		rc := resourceChanges{ID: res.ResourceID, Status: res.Status, Changes: changesOf(res.Changes)}
		if res.Error != nil {
			rc.Error = *res.Error
		}
		d.Results = append(d.Results, rc)
	}
	c.render(w, r, http.StatusOK, "dryrun", page{Title: fmt.Sprintf("Dry-run %d of version %d", dr.Run, dr.Version), Env: env, Data: d})
}
