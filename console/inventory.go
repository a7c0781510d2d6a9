package console

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
)

// The service catalog and inventory: the entities with their attributes
// and lifecycles, an entity's instances, one instance with its three
// attribute sets, log and resources, and the forms that create, update,
// transfer, delete and roll back instances (through the /lsm API, with the user's
// token and the environment's header).

// inventoryRoutes are the pages of the service catalog and inventory.
func (c *Console) inventoryRoutes(r chi.Router) {
	r.Get("/console/env/{env}/inventory", c.catalog)
	r.Get("/console/env/{env}/inventory/{entity}", c.instances)
	r.Get("/console/env/{env}/inventory/{entity}/new", c.newInstance)
	r.Post("/console/env/{env}/inventory/{entity}/new", c.createInstance)
	r.Get("/console/env/{env}/inventory/{entity}/{id}", c.instance)
	r.Get("/console/env/{env}/inventory/{entity}/{id}/events", c.instanceEvents)
	r.Post("/console/env/{env}/inventory/{entity}/{id}/update", c.updateInstance)
	r.Post("/console/env/{env}/inventory/{entity}/{id}/state", c.transferInstance)
	r.Post("/console/env/{env}/inventory/{entity}/{id}/delete", c.deleteInstance)
	r.Post("/console/env/{env}/inventory/{entity}/{id}/rollback", c.rollbackInstance)
	r.Post("/console/env/{env}/inventory/{entity}/{id}/dryrun", c.dryrunInstanceWrite)
	r.Post("/console/env/{env}/inventory/{entity}/{id}/metadata", c.instanceMetadata)
	c.configRoutes(r)
}

func init() {
	// json is a value as compact JSON ("—" for none).
	funcs["json"] = func(v any) string {
		if v == nil {
			return "—"
		}
		if raw, ok := v.(json.RawMessage); ok {
			if len(raw) == 0 {
				return "—"
			}
			return compactJSON(raw)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
	// flatAttributes lists attributes with, after each embedded one, the
	// attributes inside it, named by their path (routes[*].upstream).
	funcs["flatAttributes"] = func(specs []client.AttributeSpec) []client.AttributeSpec { return flatAttributes(specs, "") }
	// schemaType is an attribute's type, from its JSON Schema.
	funcs["schemaType"] = func(raw json.RawMessage) string {
		var s schema
		if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
			return "any"
		}
		switch {
		case len(s.Enum) > 0:
			var l []string
			for _, e := range s.Enum {
				l = append(l, compactJSON(e))
			}
			return "one of " + strings.Join(l, ", ")
		case len(s.Const) > 0:
			return "always " + compactJSON(s.Const)
		}
		t := s.typeName()
		if t == "" {
			if s.Type == nil {
				return "any"
			}
			t = fmt.Sprint(s.Type)
		}
		var b []string
		for _, x := range []struct {
			op string
			v  *float64
		}{{"≥", s.Minimum}, {">", s.ExclusiveMinimum}, {"≤", s.Maximum}, {"<", s.ExclusiveMaximum}} {
			if x.v != nil {
				b = append(b, x.op+num(*x.v))
			}
		}
		for _, p := range s.patterns() {
			b = append(b, "matching "+p)
		}
		if len(b) > 0 {
			t += " (" + strings.Join(b, ", ") + ")"
		}
		return t
	}
	// described is the id of a field's help and error texts, for
	// aria-describedby.
	funcs["describedBy"] = func(f *field) string {
		var ids []string
		if f.Description != "" || f.Default != "" || f.References != "" {
			ids = append(ids, f.ID+"-help")
		}
		if f.Error != "" {
			ids = append(ids, f.ID+"-error")
		}
		return strings.Join(ids, " ")
	}
	// fields draws a form's fields, each with its label, help and error.
	funcs["fields"] = func(f *form) (template.HTML, error) {
		var b strings.Builder
		err := fieldsTemplate.Execute(&b, f)
		return template.HTML(b.String()), err // html/template escaped it
	}
	fieldsTemplate = template.Must(template.New("fields").Funcs(funcs).Parse(fieldsText))
}

// fieldsTemplate draws a form's fields (the create and update forms').
//
//go:embed templates/fields.tmpl
var fieldsText string

var fieldsTemplate *template.Template

// entityName is what an entity's name may be (docs/lsm.md); an instance
// is named by its id or identity, a path segment of bounded length.
var (
	entityName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,127}$`)
	uuidText   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	stateName  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

// lsm is the user's client with the environment's /lsm header.
func (u *user) lsm(env string) *client.Client { return u.api.WithHeader("X-Intend-Environment", env) }

// badRequest shows what is wrong with a request the console refused
// before it reached the API.
func (c *Console) badRequest(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", page{Title: http.StatusText(status), Env: chi.URLParam(r, "env"), Error: msg})
}

// stale refuses a form without the user's anti-forgery token.
func (c *Console) stale(w http.ResponseWriter, r *http.Request) {
	c.badRequest(w, r, http.StatusForbidden,
		"The form is stale (the server restarted, or you signed in again); go back and submit it again.")
}

// entityParams are the env and entity of a request, or false after a
// page saying the entity's name is not one.
func (c *Console) entityParams(w http.ResponseWriter, r *http.Request) (*user, string, string, bool) {
	u, env, entity := userOf(r), chi.URLParam(r, "env"), chi.URLParam(r, "entity")
	if !entityName.MatchString(entity) {
		c.badRequest(w, r, http.StatusNotFound, fmt.Sprintf("%q is not the name of a service entity.", entity))
		return nil, "", "", false
	}
	return u, env, entity, true
}

// instanceParams adds the instance's id (or identity).
func (c *Console) instanceParams(w http.ResponseWriter, r *http.Request) (*user, string, string, string, bool) {
	u, env, entity, ok := c.entityParams(w, r)
	if !ok {
		return nil, "", "", "", false
	}
	id := chi.URLParam(r, "id")
	if id == "" || len(id) > 256 {
		c.badRequest(w, r, http.StatusNotFound, "Name an instance by its id or identity.")
		return nil, "", "", "", false
	}
	return u, env, entity, id, true
}

// catalogEntity reads an entity of the catalog.
func catalogEntity(r *http.Request, u *user, env, entity string) (client.CatalogEntity, error) {
	var e client.CatalogEntity
	err := u.lsm(env).Do(r.Context(), http.MethodGet, "/lsm/v1/service_catalog/"+url.PathEscape(entity), nil, &e)
	return e, err
}

// stateRow is one state of a lifecycle with its instance count and the
// transfers that leave it.
type stateRow struct {
	client.LifecycleState
	Start     bool
	Count     int
	Transfers []client.Transfer
}

// lifecycleRows are the lifecycle's states, the start first then in the
// order the transfers reach them (a walk of the diagram), with counts.
func lifecycleRows(l client.Lifecycle, counts map[string]int) []stateRow {
	var order []string
	seen := map[string]bool{}
	queue := []string{l.Start}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if seen[s] || s == "" {
			continue
		}
		seen[s] = true
		order = append(order, s)
		for _, t := range l.Transfers {
			if t.Source == s {
				queue = append(queue, t.Target)
				if t.Error != "" {
					queue = append(queue, t.Error)
				}
			}
		}
	}
	var rest []string
	for s := range l.States {
		if !seen[s] {
			rest = append(rest, s)
		}
	}
	sort.Strings(rest)
	order = append(order, rest...)
	rows := make([]stateRow, 0, len(order))
	for _, s := range order {
		st := l.States[s]
		if st.Name == "" {
			st.Name = s
		}
		row := stateRow{LifecycleState: st, Start: s == l.Start, Count: counts[s]}
		for _, t := range l.Transfers {
			if t.Source == s {
				row.Transfers = append(row.Transfers, t)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// catalogData is the catalog page's.
type catalogData struct {
	Entities []catalogEntry
	Operator bool
}

type catalogEntry struct {
	client.ServiceEntity
	States  []stateRow
	Diagram diagram
	Total   int
}

func (c *Console) catalog(w http.ResponseWriter, r *http.Request) {
	u, env := userOf(r), chi.URLParam(r, "env")
	var list struct {
		Items []client.ServiceEntity `json:"items"`
	}
	if err := u.lsm(env).Do(r.Context(), http.MethodGet, "/lsm/v1/service_catalog", nil, &list); err != nil {
		c.fail(w, r, err)
		return
	}
	d := catalogData{Operator: u.may(env, auth.RoleOperator)}
	for _, e := range list.Items {
		entry := catalogEntry{ServiceEntity: e, States: lifecycleRows(e.Lifecycle, e.Instances)}
		entry.Diagram = layout(e.Name, e.Lifecycle, entry.States)
		for _, n := range e.Instances {
			entry.Total += n
		}
		d.Entities = append(d.Entities, entry)
	}
	c.render(w, r, http.StatusOK, "catalog", page{Title: "Service catalog of " + env, Env: env, Data: d})
}

// instancesData is an entity's page: one page of its instances.
type instancesData struct {
	Entity   client.CatalogEntity
	States   []string
	State    string
	Deleted  bool
	DeletedQ string // "1" when Deleted, for the next page's link
	Items    []client.ServiceInstance
	Next     string
	Operator bool
	// Auto is the entity's auto-transfer config.
	Auto *autoConfig
}

// instancesPage is how many instances a page shows.
const instancesPage = 50

func (c *Console) instances(w http.ResponseWriter, r *http.Request) {
	c.instancesPage(w, r, http.StatusOK, "")
}

// instancesPage shows an entity's instances, with errText (a config form
// refused) and status.
func (c *Console) instancesPage(w http.ResponseWriter, r *http.Request, status int, errText string) {
	u, env, entity, ok := c.entityParams(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	d := instancesData{State: q.Get("state"), Deleted: q.Get("deleted") != "", Operator: u.may(env, auth.RoleOperator)}
	after := q.Get("after")
	if d.Deleted {
		d.DeletedQ = "1"
	}
	if d.State != "" && !stateName.MatchString(d.State) {
		c.badRequest(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a state.", d.State))
		return
	}
	if after != "" && !uuidText.MatchString(after) {
		c.badRequest(w, r, http.StatusBadRequest, "The page cursor (after) is not an instance id; start from the first page.")
		return
	}
	var err error
	if d.Entity, err = catalogEntity(r, u, env, entity); err != nil {
		c.fail(w, r, err)
		return
	}
	for s := range d.Entity.Lifecycle.States {
		d.States = append(d.States, s)
	}
	sort.Strings(d.States)
	if d.State != "" && !slices.Contains(d.States, d.State) {
		c.badRequest(w, r, http.StatusBadRequest, fmt.Sprintf("The lifecycle %s has no state %q.", d.Entity.Lifecycle.Name, d.State))
		return
	}
	api := url.Values{"limit": {strconv.Itoa(instancesPage)}}
	if d.State != "" {
		api.Set("state", d.State)
	}
	if d.Deleted {
		api.Set("deleted", "true")
	}
	if after != "" {
		api.Set("after", after)
	}
	var list struct {
		Items []client.ServiceInstance `json:"items"`
		Next  string                   `json:"next"`
	}
	if err := u.lsm(env).Do(r.Context(), http.MethodGet, client.InventoryPath(entity)+"?"+api.Encode(), nil, &list); err != nil {
		c.fail(w, r, err)
		return
	}
	d.Items, d.Next = list.Items, list.Next
	d.Auto = entityAutoConfig(env, d.Entity, d.Operator)
	c.render(w, r, status, "instances", page{Title: "Instances of " + entity, Env: env, Data: d, Error: errText})
}

// instanceData is one instance's page.
type instanceData struct {
	Entity    client.CatalogEntity
	Instance  client.InstanceView
	Sets      []setRow
	Log       []logRow
	Resources []client.ResourceState
	// Transfers are the api transfers the lifecycle allows from the
	// instance's state; Update and Delete whether it takes those.
	Transfers      []client.Transfer
	Update, Delete bool
	Operator       bool
	Form           *form
	// Rollback: some row of the log offers a rollback to its version.
	Rollback bool
	// Diagnosis says why the instance was rejected or failed: its newest
	// failed validation and its resources not deployed as intended (nil
	// when it has neither).
	Diagnosis *client.Diagnosis
	// Auto is the instance's auto-transfer config (nil once terminated).
	Auto *autoConfig
	// LogNext is the cursor of the log's older versions ("": none);
	// LogBefore the version this page of the log starts before (0: the
	// newest).
	LogNext   string
	LogBefore int64
}

// instanceLogPage is how many versions of an instance's log its page
// shows at a time.
const instanceLogPage = 100

// logRow is one version of the instance's log, with the transfer that
// made it.
type logRow struct {
	client.InstanceLogEntry
	// Rollback: an operator may roll the instance back to this version.
	Rollback bool
	Transfer struct {
		Source     string   `json:"source"`
		Target     string   `json:"target"`
		Trigger    string   `json:"trigger"`
		Error      bool     `json:"error"`
		Actor      string   `json:"actor"`
		Operations []string `json:"operations"`
	}
}

// setRow is one attribute in the instance's three sets.
type setRow struct {
	Name                        string
	Modifier                    string
	Candidate, Active, Rollback any
	InCandidate, InActive, InRb bool
}

func (c *Console) instance(w http.ResponseWriter, r *http.Request) {
	c.instancePage(w, r, http.StatusOK, nil, "")
}

// instancePage shows an instance; with f, its update form as submitted
// (with its errors), and status.
func (c *Console) instancePage(w http.ResponseWriter, r *http.Request, status int, f *form, errText string) {
	u, env, entity, id, ok := c.instanceParams(w, r)
	if !ok {
		return
	}
	var d instanceData
	var err error
	if d.Entity, err = catalogEntity(r, u, env, entity); err != nil {
		c.fail(w, r, err)
		return
	}
	if d.Instance, err = u.api.Instance(r.Context(), env, entity, id); err != nil {
		c.fail(w, r, err)
		return
	}
	base := client.InventoryPath(entity, d.Instance.ID)
	var log client.List[client.InstanceLogEntry]
	logPath := fmt.Sprintf("%s/log?limit=%d", base, instanceLogPage)
	if v := r.URL.Query().Get("log_before"); v != "" {
		before, err := strconv.ParseInt(v, 10, 64)
		if err != nil || before < 1 {
			c.badRequest(w, r, http.StatusBadRequest, "log_before names a version of the log: a whole number from 1.")
			return
		}
		d.LogBefore = before
		logPath += "&before=" + v
	}
	var res struct {
		Items []client.ResourceState `json:"items"`
	}
	for _, get := range []struct {
		path string
		out  any
	}{{logPath, &log}, {base + "/resources", &res}} {
		if err := u.lsm(env).Do(r.Context(), http.MethodGet, get.path, nil, get.out); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	d.Resources = res.Items
	var diag client.Diagnosis
	if err := u.lsm(env).Do(r.Context(), http.MethodGet, base+"/diagnose", nil, &diag); err != nil {
		c.fail(w, r, err)
		return
	}
	if diag.Validation != nil || len(diag.Resources) > 0 {
		d.Diagnosis = &diag
	}
	d.LogNext = log.Next
	for _, e := range log.Items {
		row := logRow{InstanceLogEntry: e}
		_ = json.Unmarshal(e.Event, &row.Transfer)
		d.Log = append(d.Log, row)
	}
	d.Operator = u.may(env, auth.RoleOperator)
	inst := d.Instance
	if !inst.Deleted {
		var cfg client.InstanceConfig
		if err := u.lsm(env).Do(r.Context(), http.MethodGet, base+"/config", nil, &cfg); err != nil {
			c.fail(w, r, err)
			return
		}
		d.Auto = instanceAutoConfig(env, d.Entity, cfg, d.Operator)
	}
	for _, t := range d.Entity.Lifecycle.Transfers {
		if t.Source != inst.State {
			continue
		}
		switch t.Trigger {
		case "api":
			d.Transfers = append(d.Transfers, t)
		case "on_update":
			d.Update = true
		case "on_delete":
			d.Delete = true
		}
	}
	d.Sets = attributeRows(d.Entity.Attributes, inst.AttributeSets)
	// A rollback is an update to the attributes of an earlier version
	// (its active set, or its candidate set when it had none): offered
	// where the API would take it, on a live instance whose state takes
	// an update, to a version before the current one that holds a set.
	if d.Operator && d.Update && !inst.Deleted {
		for i := range d.Log {
			e := &d.Log[i]
			if e.Version < inst.Version && (len(e.Active) > 0 || len(e.Candidate) > 0) {
				e.Rollback, d.Rollback = true, true
			}
		}
	}
	// A submitted form is shown again (with its errors) even if the
	// instance has moved on to a state that takes no update.
	if (d.Update || f != nil) && d.Operator {
		if f == nil {
			f = newForm(d.Entity.EntityDefinition, true, currentAttributes(inst.AttributeSets))
			f.CurrentVersion = inst.Version
		}
		if len(f.Fields) > 0 {
			d.Form = f
		}
	}
	c.render(w, r, status, "instance", page{Title: entity + " " + instanceName(inst.ServiceInstance), Env: env, Data: d, Error: errText})
}

// instanceName is an instance's identity, or its id.
func instanceName(i client.ServiceInstance) string {
	if i.Identity != "" {
		return i.Identity
	}
	return i.ID
}

// currentAttributes are what an update starts from: the candidate set,
// or the active one when there is none.
func currentAttributes(s client.AttributeSets) map[string]any {
	if s.Candidate != nil {
		return s.Candidate
	}
	return s.Active
}

// attributeRows are the attributes of the three sets, the entity's
// first in its order, then any other a set holds.
func attributeRows(specs []client.AttributeSpec, s client.AttributeSets) []setRow {
	var rows []setRow
	seen := map[string]bool{}
	add := func(name, mod string) {
		if seen[name] {
			return
		}
		seen[name] = true
		row := setRow{Name: name, Modifier: mod}
		row.Candidate, row.InCandidate = s.Candidate[name]
		row.Active, row.InActive = s.Active[name]
		row.Rollback, row.InRb = s.Rollback[name]
		rows = append(rows, row)
	}
	for _, a := range specs {
		add(a.Name, a.Modifier)
	}
	var extra []string
	for _, set := range []map[string]any{s.Candidate, s.Active, s.Rollback} {
		for k := range set {
			if !seen[k] {
				extra = append(extra, k)
			}
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		add(k, "")
	}
	return rows
}

// formData is the create page's.
type formData struct {
	Entity client.CatalogEntity
	Form   *form
	// Initial are the states a create may begin in, when the lifecycle
	// declares initial_states (the start first); InitialError what is
	// wrong with the one posted.
	Initial      []option
	InitialError string
	// Dryrun says what the create's dry-run found when it did not go to
	// a dry-run's page; Problems are its validation's errors.
	Dryrun   string
	Problems json.RawMessage
}

// newFormData is the create form of e, with the initial state chosen.
func newFormData(e client.CatalogEntity, f *form, initial string) formData {
	d := formData{Entity: e, Form: f}
	if len(e.Lifecycle.InitialStates) == 0 {
		return d
	}
	if initial == "" {
		initial = e.Lifecycle.Start
	}
	d.Initial = []option{{Value: e.Lifecycle.Start, Label: e.Lifecycle.Start + " (the lifecycle's start)", Selected: initial == e.Lifecycle.Start}}
	for _, s := range e.Lifecycle.InitialStates {
		if s != e.Lifecycle.Start {
			d.Initial = append(d.Initial, option{Value: s, Label: s, Selected: s == initial})
		}
	}
	return d
}

func (c *Console) newInstance(w http.ResponseWriter, r *http.Request) {
	u, env, entity, ok := c.entityParams(w, r)
	if !ok {
		return
	}
	e, err := catalogEntity(r, u, env, entity)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if !u.may(env, auth.RoleOperator) {
		c.badRequest(w, r, http.StatusForbidden, "Your role in "+env+" may not create instances (operator or admin may).")
		return
	}
	c.render(w, r, http.StatusOK, "entity", page{Title: "New " + entity, Env: env,
		Data: newFormData(e, newForm(e.EntityDefinition, false, nil), "")})
}

// maxForm bounds a form's body.
const maxForm = 64 << 10

// postedForm reads a posted form, bounded by maxForm, and checks its
// anti-forgery token (signed with the key the replicas share, so any
// replica takes it); false after a page saying what is wrong.
func (c *Console) postedForm(w http.ResponseWriter, r *http.Request, u *user) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.badRequest(w, r, http.StatusRequestEntityTooLarge, "The form is too large or malformed.")
		return false
	}
	if !c.checkCSRF(r, u.token) {
		c.stale(w, r)
		return false
	}
	return true
}

func (c *Console) createInstance(w http.ResponseWriter, r *http.Request) {
	u, env, entity, ok := c.entityParams(w, r)
	if !ok {
		return
	}
	if !c.postedForm(w, r, u) {
		return
	}
	e, err := catalogEntity(r, u, env, entity)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	f := newForm(e.EntityDefinition, false, nil)
	attrs := f.parse(r.PostForm)
	initial := r.PostFormValue("initial_state")
	d := newFormData(e, f, initial)
	show := func(status int, msg string) {
		c.render(w, r, status, "entity", page{Title: "New " + entity, Env: env, Error: msg, Data: d})
	}
	req := client.CreateInstanceRequest{Attributes: attrs}
	if initial != "" && initial != e.Lifecycle.Start {
		if !slices.Contains(e.Lifecycle.InitialStates, initial) {
			d.InitialError = fmt.Sprintf("%q is not a state a create may begin in: choose %s or one of %s.", initial,
				e.Lifecycle.Start, strings.Join(e.Lifecycle.InitialStates, ", "))
		}
		req.InitialState = initial
	}
	if f.hasFieldErrors() || d.InitialError != "" {
		show(http.StatusUnprocessableEntity, "Some values are not valid; see the fields below.")
		return
	}
	var inst client.ServiceInstance
	var rep client.InstanceDryrunReport
	dryrun := r.PostFormValue("dryrun") != ""
	if dryrun {
		err = u.lsm(env).Do(r.Context(), http.MethodPost, client.InventoryPath(entity, "dryrun"), req, &rep)
	} else {
		inst, err = u.api.CreateInstance(r.Context(), env, entity, req)
	}
	if err != nil {
		if p, ok := formProblem(err); ok {
			f.setErrors(p)
			show(p.Status, problemText(&client.Problem{Title: p.Title, Detail: p.Detail}))
			return
		}
		c.fail(w, r, err)
		return
	}
	if dryrun {
		// As the instance's dry-runs: the dry-run's page when one runs on
		// the targets, else the form as posted, saying what was found.
		d.Dryrun = dryrunSummary(rep)
		if rep.Dryrun != nil && rep.Validation.OK {
			http.Redirect(w, r, c.flashURL(r, fmt.Sprintf("/console/env/%s/dryrun/%d", url.PathEscape(env), rep.Dryrun.Run), d.Dryrun),
				http.StatusSeeOther)
			return
		}
		d.Problems = rep.Validation.Errors
		show(http.StatusOK, "")
		return
	}
	c.toInstance(w, r, env, entity, inst, fmt.Sprintf("Created %s %s (state %s, version %d).", entity, instanceName(inst), inst.State, inst.Version))
}

// formProblem is a problem a form shows with its fields: an invalid
// request (422) or a conflict (409, e.g. an identity taken or a stale
// version).
func formProblem(err error) (*client.Problem, bool) {
	var p *client.Problem
	if errors.As(err, &p) && (p.Status == http.StatusUnprocessableEntity || p.Status == http.StatusConflict) {
		return p, true
	}
	return nil, false
}

// toInstance sends the browser to the instance's page with a flash.
func (c *Console) toInstance(w http.ResponseWriter, r *http.Request, env, entity string, inst client.ServiceInstance, flash string) {
	http.Redirect(w, r, c.flashURL(r, "/console/env/"+url.PathEscape(env)+"/inventory/"+url.PathEscape(entity)+"/"+url.PathEscape(inst.ID),
		flash), http.StatusSeeOther)
}

// instanceForm checks a form posted on an instance: its size, its
// anti-forgery token and its current_version.
func (c *Console) instanceForm(w http.ResponseWriter, r *http.Request) (*user, string, string, string, int64, bool) {
	u, env, entity, id, ok := c.instanceParams(w, r)
	if !ok {
		return nil, "", "", "", 0, false
	}
	if !c.postedForm(w, r, u) {
		return nil, "", "", "", 0, false
	}
	v, err := strconv.ParseInt(r.PostFormValue("current_version"), 10, 64)
	if err != nil || v < 1 {
		c.badRequest(w, r, http.StatusUnprocessableEntity, "The form lacks the instance's version (current_version): reload the instance and try again.")
		return nil, "", "", "", 0, false
	}
	return u, env, entity, id, v, true
}

func (c *Console) updateInstance(w http.ResponseWriter, r *http.Request) {
	u, env, entity, id, version, ok := c.instanceForm(w, r)
	if !ok {
		return
	}
	e, err := catalogEntity(r, u, env, entity)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	inst, err := u.api.Instance(r.Context(), env, entity, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	f := newForm(e.EntityDefinition, true, nil)
	f.CurrentVersion = version
	attrs := f.parse(r.PostForm)
	if f.hasFieldErrors() {
		c.instancePage(w, r, http.StatusUnprocessableEntity, f, "Some values are not valid; see the update form below.")
		return
	}
	attrs = changed(attrs, currentAttributes(inst.AttributeSets))
	if len(attrs) == 0 {
		f.Errors = append(f.Errors, "Nothing changed: change a value before updating.")
		c.instancePage(w, r, http.StatusUnprocessableEntity, f, "Nothing to update.")
		return
	}
	out, err := u.api.UpdateInstance(r.Context(), env, entity, inst.ID, client.UpdateInstanceRequest{CurrentVersion: version, Attributes: attrs})
	if err != nil {
		if p, ok := formProblem(err); ok {
			f.setErrors(p)
			c.instancePage(w, r, p.Status, f, problemText(&client.Problem{Title: p.Title, Detail: p.Detail}))
			return
		}
		c.fail(w, r, err)
		return
	}
	c.toInstance(w, r, env, entity, out, fmt.Sprintf("Update requested (state %s, version %d).", out.State, out.Version))
}

func (c *Console) transferInstance(w http.ResponseWriter, r *http.Request) {
	u, env, entity, id, version, ok := c.instanceForm(w, r)
	if !ok {
		return
	}
	target := r.PostFormValue("target")
	if !stateName.MatchString(target) {
		c.badRequest(w, r, http.StatusUnprocessableEntity, "Name the state to move the instance to.")
		return
	}
	out, err := u.api.SetInstanceState(r.Context(), env, entity, id, client.SetStateRequest{CurrentVersion: version, TargetState: target})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.toInstance(w, r, env, entity, out, fmt.Sprintf("Moved to %s (version %d).", out.State, out.Version))
}

// dryrunInstanceWrite dry-runs the delete, the move to a state or the
// rollback to a version the instance page offers: refused, the write's problem; else the dry-run's
// page on the targets (or, with nothing to dry-run there, the instance
// with what the write would do).
func (c *Console) dryrunInstanceWrite(w http.ResponseWriter, r *http.Request) {
	u, env, entity, id, version, ok := c.instanceForm(w, r)
	if !ok {
		return
	}
	body := client.InstanceWriteDryrun{CurrentVersion: version, Operation: r.PostFormValue("operation")}
	switch body.Operation {
	case "delete":
	case "set_state":
		body.TargetState = r.PostFormValue("target")
		if !stateName.MatchString(body.TargetState) {
			c.badRequest(w, r, http.StatusUnprocessableEntity, "Name the state to move the instance to.")
			return
		}
	case "rollback":
		if body.ToVersion, ok = c.toVersion(w, r, version); !ok {
			return
		}
	default:
		c.badRequest(w, r, http.StatusUnprocessableEntity, "Name the write to dry-run (delete, set_state or rollback).")
		return
	}
	d, err := u.api.DryrunInstanceWrite(r.Context(), env, entity, id, body)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	flash := dryrunSummary(d)
	if d.Validation.OK && d.Dryrun != nil {
		http.Redirect(w, r, c.flashURL(r, fmt.Sprintf("/console/env/%s/dryrun/%d", url.PathEscape(env), d.Dryrun.Run), flash),
			http.StatusSeeOther)
		return
	}
	c.toInstance(w, r, env, entity, client.ServiceInstance{ID: d.ID}, flash)
}

// dryrunSummary says what a dry-run of a write found: where the write
// would lead and, when nothing ran on the targets, why.
func dryrunSummary(d client.InstanceDryrunReport) string {
	from := d.State
	if from == "" {
		from = "the new instance"
	}
	s := fmt.Sprintf("Dry-run of the %s: %s would lead to %s (resources: %s).", strings.ReplaceAll(d.Operation, "_", "-"),
		from, d.ResultingState, d.ExportMode)
	switch {
	case !d.Validation.OK:
		s += " Its validation would fail."
	case d.Dryrun != nil:
	case d.DesiredState != nil && len(d.DesiredState.Removed) > 0:
		s += fmt.Sprintf(" %d resources would leave the model.", len(d.DesiredState.Removed))
	case d.DesiredState != nil && len(d.DesiredState.Added) == 0 && len(d.DesiredState.Modified) == 0:
		s += " No resource would change."
	}
	return s
}

// instanceMetadata sets one metadata key of an instance (its value JSON
// when it parses as JSON, else the text), or removes it when the value
// is empty. No transfer: the instance's version stays.
func (c *Console) instanceMetadata(w http.ResponseWriter, r *http.Request) {
	u, env, entity, id, ok := c.instanceParams(w, r)
	if !ok {
		return
	}
	if !c.postedForm(w, r, u) {
		return
	}
	key, raw := r.PostFormValue("key"), strings.TrimSpace(r.PostFormValue("value"))
	if key == "" {
		c.badRequest(w, r, http.StatusUnprocessableEntity, "Name the metadata key to set.")
		return
	}
	var value any = raw
	if raw == "" {
		value = nil
	} else if json.Valid([]byte(raw)) {
		value = json.RawMessage(raw)
	}
	out, err := u.api.WriteInstanceMetadata(r.Context(), env, entity, id, map[string]any{key: value}, false)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	flash := fmt.Sprintf("Metadata %s set.", key)
	if value == nil {
		flash = fmt.Sprintf("Metadata %s removed.", key)
	}
	c.toInstance(w, r, env, entity, out, flash)
}

func (c *Console) deleteInstance(w http.ResponseWriter, r *http.Request) {
	u, env, entity, id, version, ok := c.instanceForm(w, r)
	if !ok {
		return
	}
	if !c.confirmed(w, r, fmt.Sprintf("Delete %s %s?", entity, id),
		"Its lifecycle's delete transfer runs: the instance's resources are removed from their targets.",
		"Delete "+id, "/console/env/"+url.PathEscape(env)+"/inventory/"+url.PathEscape(entity)+"/"+url.PathEscape(id)) {
		return
	}
	out, err := u.api.DeleteInstance(r.Context(), env, entity, id, version)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.toInstance(w, r, env, entity, out, fmt.Sprintf("Delete requested (state %s, version %d).", out.State, out.Version))
}

// toVersion is the version a rollback form names (to_version), one
// before the instance's version; false after a page saying it is none.
func (c *Console) toVersion(w http.ResponseWriter, r *http.Request, version int64) (int64, bool) {
	to, err := strconv.ParseInt(r.PostFormValue("to_version"), 10, 64)
	if err != nil || to < 1 || to >= version {
		c.badRequest(w, r, http.StatusUnprocessableEntity, fmt.Sprintf(
			"Name the version to roll back to (to_version): one of the log's, before the current one (%d).", version))
		return 0, false
	}
	return to, true
}

// rollbackInstance restores the attributes the instance had at an
// earlier version of its log (POST .../rollback, which sends them as an
// update), after asking. A refusal (a stale page's 409, a version that
// holds nothing to restore) is shown on the instance's page as it is now.
func (c *Console) rollbackInstance(w http.ResponseWriter, r *http.Request) {
	u, env, entity, id, version, ok := c.instanceForm(w, r)
	if !ok {
		return
	}
	// Asked before the confirmation, which a read token should not get.
	if !u.may(env, auth.RoleOperator) {
		c.badRequest(w, r, http.StatusForbidden, "Your role in "+env+" may not roll back instances (operator or admin may).")
		return
	}
	to, ok := c.toVersion(w, r, version)
	if !ok {
		return
	}
	if !c.confirmed(w, r, fmt.Sprintf("Roll %s %s back to version %d?", entity, id, to),
		fmt.Sprintf("The attributes it had at version %d are sent as an update of version %d: the lifecycle validates and deploys them as any update.", to, version),
		fmt.Sprintf("Roll back to version %d", to), "/console/env/"+url.PathEscape(env)+"/inventory/"+url.PathEscape(entity)+"/"+url.PathEscape(id)) {
		return
	}
	var out client.ServiceInstance
	err := u.lsm(env).Do(r.Context(), http.MethodPost, client.InventoryPath(entity, id, "rollback"),
		client.InstanceRollbackRequest{CurrentVersion: version, ToVersion: to}, &out)
	if err != nil {
		if p, ok := formProblem(err); ok {
			c.instancePage(w, r, p.Status, nil, problemText(p))
			return
		}
		c.fail(w, r, err)
		return
	}
	c.toInstance(w, r, env, entity, out, fmt.Sprintf("Rollback to version %d requested (state %s, version %d).", to, out.State, out.Version))
}

// flatAttributes lists specs and, after each embedded attribute, the
// attributes inside it named by their wild dict path under prefix
// (routes[*].upstream, mgmt.host); a keyed list's modifier names its key.
func flatAttributes(specs []client.AttributeSpec, prefix string) []client.AttributeSpec {
	var out []client.AttributeSpec
	for _, a := range specs {
		if prefix != "" {
			a.Name = prefix + pathKey(a.Name)
		}
		if a.Embedded != nil && len(a.Embedded.Key) > 0 {
			a.Modifier += ", key=" + strings.Join(a.Embedded.Key, ", key=")
		}
		out = append(out, a)
		if a.Embedded != nil {
			inner := a.Name + "."
			if a.Embedded.List {
				inner = a.Name + "[*]."
			}
			out = append(out, flatAttributes(a.Embedded.Attributes, inner)...)
		}
	}
	return out
}

// pathKey is a key as a dict path writes it (package dictpath): its
// special characters escaped, the empty key \0.
func pathKey(k string) string {
	if k == "" {
		return `\0`
	}
	var b strings.Builder
	for _, c := range k {
		if strings.ContainsRune(`.[]=,*\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
