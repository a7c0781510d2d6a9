package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
)

type projectRequest struct {
	Name string `json:"name"`
}

func (s *Server) createProject(w http.ResponseWriter, r *http.Request) error {
	var req projectRequest
	if err := Decode(r, &req, s.opts.MaxBodyBytes); err != nil {
		return err
	}
	if err := store.ValidateName(req.Name); err != nil {
		return InvalidField("/name", err.Error())
	}
	p, err := s.opts.Store.CreateProject(r.Context(), req.Name)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusCreated, wireProject(p))
	return nil
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", maxNamePage, 1, maxNamePage)
	if err != nil {
		return err
	}
	ps, err := s.opts.Store.ListProjectsPage(r.Context(), r.URL.Query().Get("after"), limit)
	if err != nil {
		return err
	}
	next := ""
	if len(ps) == limit {
		next = ps[len(ps)-1].Name
	}
	if principal(r).Global() == auth.RoleNone {
		// Only the projects of the environments the caller sees.
		es, err := s.visibleEnvironments(r, "")
		if err != nil {
			return err
		}
		ps = slices.DeleteFunc(ps, func(p store.Project) bool {
			return !slices.ContainsFunc(es, func(e store.Environment) bool { return e.ProjectID == p.ID })
		})
	}
	WriteJSON(w, http.StatusOK, client.List[client.Project]{Items: wireAll(ps, wireProject), Next: next})
	return nil
}

type environmentRequest struct {
	Project     string                     `json:"project"`
	Name        string                     `json:"name"`
	Description string                     `json:"description"`
	Settings    map[string]json.RawMessage `json:"settings"`
}

func (s *Server) createEnvironment(w http.ResponseWriter, r *http.Request) error {
	var req environmentRequest
	if err := Decode(r, &req, s.opts.MaxBodyBytes); err != nil {
		return err
	}
	var errs []FieldError
	if req.Project == "" {
		errs = append(errs, FieldError{Field: "/project", Detail: "is required (a project id or name)"})
	}
	if err := store.ValidateName(req.Name); err != nil {
		errs = append(errs, FieldError{Field: "/name", Detail: err.Error()})
	}
	errs = append(errs, s.settingErrors(store.DefaultSettings(), req.Settings)...)
	if len(errs) > 0 {
		return Validation("the environment is invalid", errs...)
	}
	e, err := s.opts.Store.CreateEnvironment(r.Context(), store.NewEnvironment{
		Project: req.Project, Name: req.Name, Description: req.Description, Settings: req.Settings,
	})
	if errors.Is(err, store.ErrNotFound) {
		return InvalidField("/project", err.Error())
	}
	if err != nil {
		return err
	}
	if s.opts.Scheduler != nil {
		if err := s.opts.Scheduler.Ensure(r.Context(), e); err != nil {
			s.log.WarnContext(r.Context(), "scheduler not started yet; the reconciler will start it", "environment", e.Name, "error", err)
		}
	}
	WriteJSON(w, http.StatusCreated, wireEnvironment(e))
	return nil
}

func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", maxNamePage, 1, maxNamePage)
	if err != nil {
		return err
	}
	es, err := s.opts.Store.ListEnvironmentsPage(r.Context(), r.URL.Query().Get("project"), r.URL.Query().Get("after"), limit)
	if err != nil {
		return err
	}
	// The cursor is the last environment read, seen by the caller or not:
	// a page may show fewer than limit and still have a next one.
	next := ""
	if len(es) == limit {
		next = es[len(es)-1].Name
	}
	p := principal(r)
	es = slices.DeleteFunc(es, func(e store.Environment) bool { return p.In(e.ID, e.Name) == auth.RoleNone })
	WriteJSON(w, http.StatusOK, client.List[client.Environment]{Items: wireAll(es, wireEnvironment), Next: next})
	return nil
}

// env is the environment of the {env} path parameter (an id or a name),
// as the route's guard resolved and checked it.
func (s *Server) env(r *http.Request) (store.Environment, error) {
	if e, ok := requestEnv(r); ok {
		return e, nil
	}
	ref, err := pathParam(chi.URLParam(r, "env"))
	if err != nil {
		return store.Environment{}, err
	}
	return s.opts.Store.GetEnvironment(r.Context(), ref)
}

func (s *Server) getEnvironment(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wireEnvironment(e))
	return nil
}

type environmentPatch struct {
	Name        *string                    `json:"name"`
	Description *string                    `json:"description"`
	Halted      *bool                      `json:"halted"`
	Settings    map[string]json.RawMessage `json:"settings"`
}

func (s *Server) patchEnvironment(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	var req environmentPatch
	if err := Decode(r, &req, s.opts.MaxBodyBytes); err != nil {
		return err
	}
	if req.Name != nil && *req.Name != e.Name {
		return InvalidField("/name", "an environment's name cannot change: it is part of its workflow ids and task queues")
	}
	if errs := s.settingErrors(e.Settings, req.Settings); len(errs) > 0 {
		return Validation("the settings are invalid", errs...)
	}
	if err := refuseGlobalAdminSettings(r, e.Settings, req.Settings); err != nil {
		return err
	}
	out, rel, err := s.opts.Store.UpdateEnvironmentReleasing(r.Context(), e.ID, store.EnvironmentPatch{
		Description: req.Description, Halted: req.Halted, Settings: req.Settings,
	})
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"settings": req.Settings, "halted": req.Halted, "description": req.Description != nil})
	if out.Halted != e.Halted || len(req.Settings) > 0 {
		s.wake(r, out, "environment settings changed", false, out.Halted && !e.Halted)
	}
	if e.Halted && !out.Halted {
		s.resumed(r, out, rel)
	}
	WriteJSON(w, http.StatusOK, wireEnvironment(out))
	return nil
}

func (s *Server) deleteEnvironment(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	if err := refuseProtected(e, "delete"); err != nil {
		return err
	}
	if err := s.stopWorkflows(r.Context(), e); err != nil {
		return err
	}
	if err := s.opts.Store.DeleteEnvironment(r.Context(), e.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) exportVersion(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	if err := refusePush(e, "versions"); err != nil {
		return err
	}
	body, err := ReadBody(r, s.opts.MaxExportBytes)
	if err != nil {
		return err
	}
	v, err := intent.DecodeBytes(body)
	if err != nil {
		return exportProblem(err)
	}
	if err := refuseConfined(e, body, v.Resources); err != nil {
		return err
	}
	if err := s.refusePlugins(r.Context(), e, v.Plugins); err != nil {
		return err
	}
	model, err := s.modelSourceParam(r, e)
	if err != nil {
		return err
	}
	release, err := releaseParam(r, e)
	if err != nil {
		return err
	}
	info, err := s.opts.Store.ExportVersionOf(r.Context(), e.ID, v, model)
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"version": info.Version, "resources": info.ResourceCount, "release": release})
	if release {
		if info, err = s.releasePushed(r, e, info); err != nil {
			return err
		}
	}
	s.prune(r, e)
	WriteJSON(w, http.StatusCreated, wireVersionInfo(info))
	return nil
}

// refusePush refuses a pushed version or model in an environment that
// compiles from git (seed 002's autonomous mode) unless allow_push is on.
func refusePush(e store.Environment, what string) error {
	if e.Settings.RefusesPush() {
		return Conflict("environment %s compiles its model from git (setting repo_url); it takes no pushed %s "+
			"unless its setting allow_push is true", e.Name, what)
	}
	return nil
}

// prune applies the environment's keep_versions after an export. Retention
// is housekeeping: the export stands whatever it does.
func (s *Server) prune(r *http.Request, e store.Environment) {
	if n, err := s.opts.Store.PruneVersions(r.Context(), e.ID, e.Settings.KeepVersions); err != nil {
		s.log.WarnContext(r.Context(), "pruning old versions failed", "environment", e.Name, "error", err)
	} else if n > 0 {
		s.log.InfoContext(r.Context(), "pruned old versions", "environment", e.Name, "deleted", n, "keep_versions", e.Settings.KeepVersions)
	}
}

// exportProblem renders the compiler-facing errors of a version export.
func exportProblem(err error) error {
	var ve *intent.ValidationError
	if errors.As(err, &ve) {
		errs := make([]FieldError, len(ve.Problems))
		for i, p := range ve.Problems {
			errs[i] = FieldError{Field: p.Path, Detail: p.Detail}
		}
		detail := "the version is invalid: " + strconv.Itoa(len(errs)) + " problem"
		if len(errs) != 1 {
			detail += "s"
		}
		return Validation(detail, errs...)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return MalformedJSON(err.Error())
	}
	return Validation(err.Error())
}

func (s *Server) listVersions(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	vs, err := s.opts.Store.ListVersions(r.Context(), e.ID, limit)
	if err != nil {
		return err
	}
	writeList(w, vs, wireVersionInfo)
	return nil
}

func versionParam(r *http.Request) (int64, error) {
	v, err := strconv.ParseInt(chi.URLParam(r, "version"), 10, 64)
	if err != nil || v < 1 {
		return 0, BadRequest("version %q is not a positive whole number", chi.URLParam(r, "version"))
	}
	return v, nil
}

// envVersion is the request's environment and its {version}.
func (s *Server) envVersion(r *http.Request) (store.Environment, int64, error) {
	e, err := s.env(r)
	if err != nil {
		return store.Environment{}, 0, err
	}
	v, err := versionParam(r)
	return e, v, err
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) error {
	e, v, err := s.envVersion(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 1000, 1, 10000)
	if err != nil {
		return err
	}
	info, err := s.opts.Store.GetVersion(r.Context(), e.ID, v)
	if err != nil {
		return err
	}
	rs, err := s.opts.Store.VersionResources(r.Context(), e.ID, v, r.URL.Query().Get("after"), limit)
	if err != nil {
		return err
	}
	plugins, err := s.opts.Store.VersionPlugins(r.Context(), e.ID, v)
	if err != nil {
		return err
	}
	out := client.Version{VersionInfo: wireVersionInfo(info), Plugins: wirePlugins(plugins),
		Resources: wireAll(rs, wireVersionResource)}
	if len(rs) == limit {
		out.Next = rs[len(rs)-1].ID
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) releaseVersion(w http.ResponseWriter, r *http.Request) error {
	e, v, err := s.envVersion(r)
	if err != nil {
		return err
	}
	rel, err := s.opts.Store.ReleaseVersion(r.Context(), e.ID, v)
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"version": v})
	s.released(r, e, rel)
	WriteJSON(w, http.StatusOK, wireRelease(rel))
	return nil
}

// rollbackVersion makes a new version equal to {version} (service
// instances' sets as they are now) and releases it: 201 with the release
// and the version it rolled back to.
func (s *Server) rollbackVersion(w http.ResponseWriter, r *http.Request) error {
	e, v, err := s.envVersion(r)
	if err != nil {
		return err
	}
	rb, err := s.opts.Store.RollbackVersion(r.Context(), e.ID, v)
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"version": rb.Version.Version, "rolled_back_from": v})
	s.released(r, e, rb.Release)
	s.prune(r, e)
	WriteJSON(w, http.StatusCreated, wireRollback(rb))
	return nil
}

func (s *Server) listResources(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 1000, 1, 10000)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.ResourceFilter{Agent: q.Get("agent"), Type: q.Get("type"), Result: q.Get("result"),
		Compliance: q.Get("compliance"), Orphans: q.Get("orphans") == "true", After: q.Get("after"), Limit: limit,
		Sort: q.Get("sort")}
	cursor := func(r store.ResourceState) string { return r.ResourceID }
	if f.Sort != "" {
		if _, ok := store.ResourceSorts[f.Sort]; !ok {
			return InvalidField("?sort", "must be agent, type or result (the id orders what they leave equal)")
		}
		// A sorted page's cursor holds the sort key and the id.
		if f.After != "" {
			b, err := base64.RawURLEncoding.DecodeString(f.After)
			key, id, ok := strings.Cut(string(b), "\x00")
			if err != nil || !ok {
				return InvalidField("?after", "is not a cursor of this sort (take next from the previous page)")
			}
			f.AfterKey, f.After = key, id
		}
		cursor = func(r store.ResourceState) string {
			return base64.RawURLEncoding.EncodeToString([]byte(r.SortKey(f.Sort) + "\x00" + r.ResourceID))
		}
	}
	rs, err := s.opts.Store.ListResources(r.Context(), e.ID, f)
	if err != nil {
		return err
	}
	writePage(w, rs, limit, cursor, wireResourceState)
	return nil
}

func (s *Server) getResource(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	rid, err := pathParam(chi.URLParam(r, "*"))
	if err != nil {
		return err
	}
	// .../resources/{rid}/actions: the action log of one resource. A
	// resource id ends in "]" (or "%5D"), so the suffix is unambiguous.
	if base, ok := strings.CutSuffix(chi.URLParam(r, "*"), "/actions"); ok {
		if rid, err = pathParam(base); err != nil {
			return err
		}
		return s.resourceActions(w, r, e, rid)
	}
	// .../resources/{rid}/facts: what the adapter discovered on the target.
	if base, ok := strings.CutSuffix(chi.URLParam(r, "*"), "/facts"); ok {
		if rid, err = pathParam(base); err != nil {
			return err
		}
		if _, err := s.opts.Store.GetResource(r.Context(), e.ID, rid); err != nil {
			return err
		}
		return s.writeFacts(w, r, e, rid)
	}
	// .../resources/{rid}/intent: the resource as its intent version
	// holds it, and what requires it there.
	if base, ok := strings.CutSuffix(chi.URLParam(r, "*"), "/intent"); ok {
		if rid, err = pathParam(base); err != nil {
			return err
		}
		return s.resourceIntent(w, r, e, rid)
	}
	st, err := s.opts.Store.GetResource(r.Context(), e.ID, rid)
	if err != nil {
		return err
	}
	acts, err := s.opts.Store.ListActions(r.Context(), e.ID, store.ActionFilter{ResourceID: rid, Limit: 20,
		Outputs: outputsFor(r, e)})
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, client.Resource{ResourceState: wireResourceState(st), Actions: wireAll(acts, wireAction)})
	return nil
}

// maxRequiredBy bounds the resources an intent lists as requiring one.
const maxRequiredBy = 1000

// resourceIntent answers GET .../resources/{rid}/intent.
func (s *Server) resourceIntent(w http.ResponseWriter, r *http.Request, e store.Environment, rid string) error {
	st, err := s.opts.Store.GetResource(r.Context(), e.ID, rid)
	if err != nil {
		return err
	}
	// The released version is what the resource is deployed to; before
	// any release, the version that last changed it.
	version := st.IntentVersion
	if e.ReleasedVersion != nil {
		version = e.ReleasedVersion
	}
	if version == nil {
		return store.NotFound("an intent of resource %s", rid)
	}
	v, by, err := s.opts.Store.ResourceIntent(r.Context(), e.ID, *version, rid, maxRequiredBy)
	if err != nil {
		return err
	}
	if by == nil {
		by = []string{}
	}
	WriteJSON(w, http.StatusOK, client.ResourceIntent{Version: *version, Resource: client.VersionResource(v), RequiredBy: by})
	return nil
}

func (s *Server) listActions(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	return s.writeActions(w, r, e, strings.TrimSpace(r.URL.Query().Get("resource")))
}

// resourceActions serves GET .../resources/{rid}/actions.
func (s *Server) resourceActions(w http.ResponseWriter, r *http.Request, e store.Environment, rid string) error {
	if _, err := s.opts.Store.GetResource(r.Context(), e.ID, rid); err != nil {
		return err
	}
	return s.writeActions(w, r, e, rid)
}

// writeActions renders one page of the action log, filtered by the query:
// action, result (one or several, comma-separated), run, since and until
// (RFC 3339), before (cursor), limit.
func (s *Server) writeActions(w http.ResponseWriter, r *http.Request, e store.Environment, rid string) error {
	q := r.URL.Query()
	limit, err := queryInt(r, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	f := store.ActionFilter{ResourceID: rid, Action: q.Get("action"), Limit: limit, Outputs: outputsFor(r, e)}
	for _, res := range strings.Split(q.Get("result"), ",") {
		if res = strings.TrimSpace(res); res != "" && !slices.Contains(f.Results, res) {
			f.Results = append(f.Results, res)
		}
	}
	if len(f.Results) > maxResultFilter {
		return InvalidField("?result", fmt.Sprintf("at most %d results", maxResultFilter))
	}
	if v := q.Get("run"); v != "" {
		// A run's records carry its workflow's id (a deploy run's, or a
		// dry-run's): the run's number names it, the id is looked up.
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return InvalidField("?run", "must be a run number (a whole number from 1)")
		}
		run, err := s.opts.Store.GetRun(r.Context(), e.ID, n)
		if err != nil {
			return err
		}
		f.WorkflowID = run.WorkflowID
	}
	switch f.Action {
	case "", string(ledger.ActionDeploy), string(ledger.ActionRepair), string(ledger.ActionDryrun):
	default:
		return InvalidField("?action", "must be deploy, repair or dryrun")
	}
	if c := q.Get("before"); c != "" {
		if f.Before, err = strconv.ParseInt(c, 10, 64); err != nil {
			return InvalidField("?before", "must be an action id")
		}
	}
	if f.Since, err = queryTime(r, "since"); err != nil {
		return err
	}
	if f.Until, err = queryTime(r, "until"); err != nil {
		return err
	}
	acts, err := s.opts.Store.ListActions(r.Context(), e.ID, f)
	if err != nil {
		return err
	}
	writePage(w, acts, limit, func(a store.Action) string { return strconv.FormatInt(a.ID, 10) }, wireAction)
	return nil
}

// listFacts serves GET .../facts?resource=: the facts of the environment,
// or of one resource.
func (s *Server) listFacts(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	return s.writeFacts(w, r, e, strings.TrimSpace(r.URL.Query().Get("resource")))
}

// writeFacts renders the facts of rid, or of every resource when rid is "".
func (s *Server) writeFacts(w http.ResponseWriter, r *http.Request, e store.Environment, rid string) error {
	limit, err := queryInt(r, "limit", maxFactPage, 1, maxFactPage)
	if err != nil {
		return err
	}
	var after store.FactKey
	if v := r.URL.Query().Get("after"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || json.Unmarshal(b, &after) != nil {
			return InvalidField("?after", "must be the next cursor of a previous page")
		}
	}
	facts, err := s.opts.Store.ListFactsPage(r.Context(), e.ID, rid, after, limit)
	if err != nil {
		return err
	}
	writePage(w, facts, limit, func(f store.Fact) string {
		b, _ := json.Marshal(store.FactKey{ResourceID: f.ResourceID, Name: f.Name})
		return base64.RawURLEncoding.EncodeToString(b)
	}, wireFact)
	return nil
}

// maxResultFilter bounds the results one ?result= lists (there are five).
const maxResultFilter = 10

// The largest pages of the lists that are not paged by their own limit
// parameter's range elsewhere.
const (
	maxNamePage = 1000
	maxFactPage = 10000
)

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 50, 1, 1000)
	if err != nil {
		return err
	}
	runs, err := s.opts.Store.ListRuns(r.Context(), e.ID, limit)
	if err != nil {
		return err
	}
	writeList(w, runs, wireDeployRun)
	return nil
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	run, err := strconv.ParseInt(chi.URLParam(r, "run"), 10, 64)
	if err != nil || run < 1 {
		return BadRequest("run %q is not a positive whole number", chi.URLParam(r, "run"))
	}
	out, err := s.opts.Store.GetRun(r.Context(), e.ID, run)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wireDeployRun(out))
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
