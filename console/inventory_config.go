package console

import (
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
)

// The service model's switches and pools (issue 31): the auto-transfer
// config of an entity (on its instances' page) and of one instance (on
// its page), written through PATCH .../config as the CLI does, and the
// allocation pools with who holds which value.

// configRoutes are the config forms and the pools' pages.
func (c *Console) configRoutes(r chi.Router) {
	r.Post("/console/env/{env}/inventory/{entity}/config", c.entityConfig)
	r.Post("/console/env/{env}/inventory/{entity}/{id}/config", c.instanceConfig)
	r.Get("/console/env/{env}/pools", c.pools)
	r.Get("/console/env/{env}/pools/{pool}", c.pool)
}

func init() {
	// autoConfig draws an auto-transfer config: a form for an operator,
	// a table for the others.
	funcs["autoConfig"] = func(a *autoConfig, csrf string) (template.HTML, error) {
		var b strings.Builder
		err := autoConfigTemplate.Execute(&b, struct {
			*autoConfig
			CSRF string
		}{a, csrf})
		return template.HTML(b.String()), err // html/template escaped it
	}
	funcs["onOff"] = onOff
	// poolRange is a pool's values as the CLI prints them.
	funcs["poolRange"] = func(p client.Pool) string {
		if p.Kind == "cidr" {
			return fmt.Sprintf("/%d of %s", p.Size, p.Prefix)
		}
		return fmt.Sprintf("%d–%d", p.From, p.To)
	}
	autoConfigTemplate = template.Must(template.New("autoconfig").Funcs(funcs).Parse(autoConfigText))
}

//go:embed templates/autoconfig.tmpl
var autoConfigText string

var autoConfigTemplate *template.Template

// autoConfig is an entity's or an instance's auto-transfer config as a
// page shows it. Each input carries the value the page showed beside it
// (was-…), so a save sends only what the user changed, with nothing kept
// on the server between the page and the post.
type autoConfig struct {
	// Action is where the form posts; Instance: an instance's config
	// (whose names may be "default", the entity's entry).
	Action   string
	Instance bool
	Editable bool
	// Wide is the auto_transfers switch ("on" or "off"); Effective, for
	// an instance, whether the engine takes its auto transfers at all.
	Wide      string
	Effective bool
	Rows      []autoRow
}

// autoRow is one config name of the lifecycle.
type autoRow struct {
	Name string
	// Value is "on", "off" or, for an instance, "default".
	Value string
	// Inherited is the entity's value a default takes; Effective whether
	// the engine takes the name's transfers for this instance.
	Inherited string
	Effective bool
	// Transfers are the auto transfers the name switches.
	Transfers []string
}

// configNames are the config names of l's auto transfers, sorted, with
// the transfers each switches.
func configNames(l client.Lifecycle) ([]string, map[string][]string) {
	by := map[string][]string{}
	for _, t := range l.Transfers {
		if t.Trigger == "auto" && t.ConfigName != "" {
			by[t.ConfigName] = append(by[t.ConfigName], t.Source+" → "+t.Target)
		}
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, by
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// entityAutoConfig is the entity's config for its instances' page.
func entityAutoConfig(env string, e client.CatalogEntity, editable bool) *autoConfig {
	a := &autoConfig{Action: "/console/env/" + url.PathEscape(env) + "/inventory/" + url.PathEscape(e.Name) + "/config",
		Editable: editable, Wide: onOff(e.Config.AutoTransfers), Effective: e.Config.AutoTransfers}
	names, by := configNames(e.Lifecycle)
	for _, n := range names {
		v, ok := e.Config.AutoTransferConfigs[n]
		a.Rows = append(a.Rows, autoRow{Name: n, Value: onOff(v || !ok), Effective: e.Config.AutoTransfers && (v || !ok), Transfers: by[n]})
	}
	return a
}

// instanceAutoConfig is an instance's config (GET .../config) for its
// page.
func instanceAutoConfig(env string, e client.CatalogEntity, c client.InstanceConfig, editable bool) *autoConfig {
	a := &autoConfig{Action: "/console/env/" + url.PathEscape(env) + "/inventory/" + url.PathEscape(e.Name) + "/" + url.PathEscape(c.ID) + "/config",
		Instance: true, Editable: editable, Wide: onOff(c.AutoTransfers), Effective: c.Effective.AutoTransfers}
	names, by := configNames(e.Lifecycle)
	for _, n := range names {
		row := autoRow{Name: n, Value: "default", Effective: c.Effective.AutoTransferConfigs[n], Transfers: by[n]}
		if v, ok := c.AutoTransferConfigs[n]; ok {
			row.Value = onOff(v)
		}
		ev, ok := e.Config.AutoTransferConfigs[n]
		row.Inherited = onOff(ev || !ok)
		a.Rows = append(a.Rows, row)
	}
	return a
}

// configPatch is the body of PATCH .../config: the keys the user changed
// (a nil entry: back to the default).
type configPatch struct {
	AutoTransfers       *bool            `json:"auto_transfers,omitempty"`
	AutoTransferConfigs map[string]*bool `json:"auto_transfer_configs,omitempty"`
}

// parseConfig reads a posted config form: the values that differ from
// those the page showed (was-…), each checked against what the
// lifecycle l names. It returns what to send, or what is wrong.
func parseConfig(in url.Values, l client.Lifecycle, instance bool) (configPatch, string) {
	var p configPatch
	switch v := in.Get("auto_transfers"); {
	case v != "on" && v != "off":
		return p, fmt.Sprintf("Auto transfers: %q is neither on nor off.", v)
	case v != in.Get("was-auto_transfers"):
		b := v == "on"
		p.AutoTransfers = &b
	}
	names, _ := configNames(l)
	var posted []string
	for k := range in {
		if n, ok := strings.CutPrefix(k, "cfg-"); ok {
			posted = append(posted, n)
		}
	}
	sort.Strings(posted)
	for _, n := range posted {
		if !slices.Contains(names, n) {
			return p, fmt.Sprintf("The lifecycle %s has no auto transfer named %q (it has: %s); reload the page.",
				l.Name, n, strings.Join(names, ", "))
		}
		v := in.Get("cfg-" + n)
		var b *bool
		switch {
		case v == "on" || v == "off":
			x := v == "on"
			b = &x
		case v == "default" && instance:
		case instance:
			return p, fmt.Sprintf("%s: %q is not on, off or default.", n, v)
		default:
			return p, fmt.Sprintf("%s: %q is neither on nor off.", n, v)
		}
		if v == in.Get("was-cfg-"+n) {
			continue
		}
		if p.AutoTransferConfigs == nil {
			p.AutoTransferConfigs = map[string]*bool{}
		}
		p.AutoTransferConfigs[n] = b
	}
	if p.AutoTransfers == nil && p.AutoTransferConfigs == nil {
		return p, "Nothing changed: change a switch before saving."
	}
	return p, ""
}

// said is what a saved config changed, for the flash.
func (p configPatch) said() string {
	var parts []string
	if p.AutoTransfers != nil {
		parts = append(parts, "auto transfers "+onOff(*p.AutoTransfers))
	}
	names := make([]string, 0, len(p.AutoTransferConfigs))
	for n := range p.AutoTransferConfigs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := "default"
		if b := p.AutoTransferConfigs[n]; b != nil {
			v = onOff(*b)
		}
		parts = append(parts, n+" "+v)
	}
	return strings.Join(parts, ", ")
}

// configRefused is a refusal a config form shows on its page: the
// console's check (text), or the API's 422 or 409.
func configRefused(err error) (int, string, bool) {
	if p, ok := formProblem(err); ok {
		msg := problemText(&client.Problem{Title: p.Title, Detail: p.Detail})
		for _, e := range p.Errors {
			msg += " " + strings.TrimPrefix(e.Field, "/") + ": " + e.Detail
		}
		return p.Status, msg, true
	}
	return 0, "", false
}

func (c *Console) entityConfig(w http.ResponseWriter, r *http.Request) {
	u, env, entity, ok := c.entityParams(w, r)
	if !ok || !c.postedForm(w, r, u) {
		return
	}
	refused := func(status int, msg string) { c.instancesPage(w, r, status, msg) }
	path := "/lsm/v1/service_catalog/" + url.PathEscape(entity) + "/config"
	if p, ok := c.saveConfig(w, r, u, env, entity, path, false, nil, refused); ok {
		http.Redirect(w, r, c.flashURL(r, "/console/env/"+url.PathEscape(env)+"/inventory/"+url.PathEscape(entity),
			fmt.Sprintf("Auto transfers of %s saved: %s.", entity, p.said())), http.StatusSeeOther)
	}
}

func (c *Console) instanceConfig(w http.ResponseWriter, r *http.Request) {
	u, env, entity, id, ok := c.instanceParams(w, r)
	if !ok || !c.postedForm(w, r, u) {
		return
	}
	refused := func(status int, msg string) { c.instancePage(w, r, status, nil, msg) }
	var out client.InstanceConfig
	if p, ok := c.saveConfig(w, r, u, env, entity, client.InventoryPath(entity, id, "config"), true, &out, refused); ok {
		c.toInstance(w, r, env, entity, client.ServiceInstance{ID: out.ID}, "Auto transfers of this instance saved: "+p.said()+".")
	}
}

// saveConfig PATCHes the auto-transfer config the posted form gives
// (parseConfig; instance: an instance's, with "default") to path, into
// out. A form it refuses, or the API's 4xx, goes to refused (the page
// again, with the sentence); another error to c.fail. ok: saved.
func (c *Console) saveConfig(w http.ResponseWriter, r *http.Request, u *user, env, entity, path string, instance bool, out any,
	refused func(status int, msg string)) (configPatch, bool) {
	e, err := catalogEntity(r, u, env, entity)
	if err != nil {
		c.fail(w, r, err)
		return configPatch{}, false
	}
	p, bad := parseConfig(r.PostForm, e.Lifecycle, instance)
	if bad != "" {
		refused(http.StatusUnprocessableEntity, bad)
		return p, false
	}
	if err := u.lsm(env).Do(r.Context(), http.MethodPatch, path, p, out); err != nil {
		if status, msg, ok := configRefused(err); ok {
			refused(status, msg)
		} else {
			c.fail(w, r, err)
		}
		return p, false
	}
	return p, true
}

// poolsData is the pools page's.
type poolsData struct {
	Items []client.Pool
}

func (c *Console) pools(w http.ResponseWriter, r *http.Request) {
	u, env := userOf(r), chi.URLParam(r, "env")
	var list listPage[client.Pool]
	if err := u.lsm(env).Do(r.Context(), http.MethodGet, "/lsm/v1/pools", nil, &list); err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "pools", page{Title: "Allocation pools of " + env, Env: env, Data: poolsData{Items: list.Items}})
}

// poolPage is how many allocations a pool's page shows.
const poolPage = 100

func (c *Console) pool(w http.ResponseWriter, r *http.Request) {
	u, env, name := userOf(r), chi.URLParam(r, "env"), chi.URLParam(r, "pool")
	if name == "" || len(name) > 128 {
		c.badRequest(w, r, http.StatusNotFound, "Name a pool.")
		return
	}
	q := url.Values{"limit": {strconv.Itoa(poolPage)}}
	if after := r.URL.Query().Get("after"); after != "" {
		q.Set("after", after)
	}
	var p client.PoolView
	if err := u.lsm(env).Do(r.Context(), http.MethodGet, "/lsm/v1/pools/"+url.PathEscape(name)+"?"+q.Encode(), nil, &p); err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "pool", page{Title: "Pool " + name, Env: env, Data: p})
}
