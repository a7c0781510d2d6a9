package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// linkModel is a service entity of issue 31's model: link, whose vlan_id
// the server allocates from the pool vlan, whose lifecycle (simple) names
// its two create-time auto transfers auto_validate and auto_creating, and
// lets a create begin in acknowledged.
func linkModel(root string) string {
	return `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

pools: vlan: lsm.#Pool & {kind: "vlan", from: 100, to: 199}

#Link: lsm.#Entity & {
	lifecycle: lsm.simple & {
		transfers: [{config_name: "auto_validate"}, {}, {}, {config_name: "auto_creating"}, ...]
		initial_states: ["acknowledged"]
	}
	identity: "name"
	parameter: {
		name:    =~"^[a-z]+$" @lsm(rw)
		vlan_id: int @lsm(r, allocate=vlan)
	}
	output: conf: fs.#File & {
		path:    "` + root + `/\(parameter.name).conf"
		content: "vlan=\(parameter.vlan_id)\n"
	}
}

services: link: #Link
`
}

// TestServiceModelInABrowser: the forms of issue 31's service model in
// Chromium against a real server, as an operator: the entity's
// auto-transfer switch auto_creating turned off (and a value the form
// does not offer refused with a sentence), a create's dry-run from the
// new-instance form (nothing created), a create that then waits in
// acknowledged, the instance's own switch turned on (it goes on to up by
// itself), a create in the initial state acknowledged, and the pools'
// pages from the catalog to the instance holding a value. A read token
// sees the switches without a form, and its forged post is refused.
func TestServiceModelInABrowser(t *testing.T) {
	c, s, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	ctx0 := context.Background()
	env := servertest.NewEnvironment(t, c, "model", nil)
	uploadInventoryModel(t, c, env, linkModel(t.TempDir()))
	op, err := c.CreateToken(ctx0, client.NewToken{Name: "model-operator", Role: "operator", Environments: []string{env}})
	if err != nil {
		t.Fatal(err)
	}
	reader := readToken(t, c, "model-reader", env)

	ctx := browser(t)
	base := s.URL() + "/console/"
	inv := base + "env/" + env + "/inventory"
	run(t, ctx, signIn(base, op.Secret, env))
	var text string

	// The entity's switches: auto_creating off.
	run(t, ctx,
		navigate(inv+"/link"),
		chromedp.WaitVisible(`#auto-auto_creating`, chromedp.ByID),
		chromedp.SetValue(`#auto-auto_creating`, "off", chromedp.ByID),
		chromedp.Click(`//button[text()="Save auto transfers"]`, chromedp.BySearch),
		chromedp.WaitVisible(`p.flash`, chromedp.ByQuery),
		chromedp.Text(`p.flash`, &text, chromedp.ByQuery),
	)
	if text != "Auto transfers of link saved: auto_creating off." {
		t.Errorf("after saving the entity's switches the page says %q", text)
	}
	accessible(t, ctx, "entity with its switches")
	ent, err := catalogConfig(c, env)
	if err != nil || ent.AutoTransferConfigs["auto_creating"] || !ent.AutoTransfers {
		t.Fatalf("the entity's config after the form: %+v, %v", ent, err)
	}
	// A value the form does not offer (a hand-edited page): a sentence,
	// and nothing saved.
	run(t, ctx,
		chromedp.Evaluate(`(() => { const s = document.getElementById("auto-auto_validate"); s.add(new Option("maybe", "maybe")); s.value = "maybe"; })()`, nil),
		chromedp.Click(`//button[text()="Save auto transfers"]`, chromedp.BySearch),
		chromedp.WaitVisible(`p.error`, chromedp.ByQuery),
		chromedp.Text(`p.error`, &text, chromedp.ByQuery),
	)
	if text != `auto_validate: "maybe" is neither on nor off.` {
		t.Errorf("a value neither on nor off: %q", text)
	}

	// A create's dry-run: the new-instance form's Dry-run, which creates
	// nothing and says what the create would do.
	run(t, ctx,
		navigate(inv+"/link/new"),
		chromedp.WaitVisible(`#attr-name`, chromedp.ByID),
		chromedp.SetValue(`#attr-name`, "one", chromedp.ByID),
		chromedp.Click(`//button[text()="Dry-run"]`, chromedp.BySearch),
		chromedp.WaitVisible(`p.flash, #dryrun-result`, chromedp.ByQuery),
		chromedp.Text(`main`, &text, chromedp.ByQuery),
	)
	if !strings.Contains(text, "Dry-run of the create: the new instance would lead to") {
		t.Errorf("after the create's dry-run the page says:\n%s", text)
	}
	if list := inventory(t, c, env); len(list) != 0 {
		t.Errorf("the create's dry-run created %+v", list)
	}

	// A create from the start: it validates by itself, then waits in
	// acknowledged (auto_creating is off).
	run(t, ctx,
		navigate(inv+"/link/new"),
		chromedp.WaitVisible(`#initial-state`, chromedp.ByID),
		shot(t, ctx, "instance-form-initial"),
	)
	accessible(t, ctx, "new link")
	run(t, ctx,
		chromedp.SetValue(`#attr-name`, "one", chromedp.ByID),
		chromedp.Click(`//button[text()="Create"]`, chromedp.BySearch),
		chromedp.WaitVisible(`p.flash`, chromedp.ByQuery),
	)
	waitInstancePage(t, ctx, "acknowledged")
	var effective string
	run(t, ctx, chromedp.Text(`//tr[th//code[text()="auto_creating"]]/td[3]`, &effective, chromedp.BySearch))
	if effective != "off" {
		t.Errorf("auto_creating is effectively %q for one, want off", effective)
	}
	// Its own switch on: it goes on to up by itself.
	run(t, ctx,
		chromedp.SetValue(`#auto-auto_creating`, "on", chromedp.ByID),
		chromedp.Click(`//button[text()="Save auto transfers"]`, chromedp.BySearch),
		// (The page may still show the create's flash until the save's
		// page replaces it.)
		chromedp.WaitVisible(`//p[@class="flash"][starts-with(., "Auto transfers")]`, chromedp.BySearch),
		chromedp.Text(`p.flash`, &text, chromedp.ByQuery),
		shot(t, ctx, "instance-auto-transfers"),
	)
	if text != "Auto transfers of this instance saved: auto_creating on." {
		t.Errorf("after saving the instance's switches the page says %q", text)
	}
	accessible(t, ctx, "instance with its switches")
	waitInstancePage(t, ctx, "up")
	run(t, ctx, chromedp.Text(`//tr[th//code[text()="auto_creating"]]/td[3]`, &effective, chromedp.BySearch))
	if effective != "on" {
		t.Errorf("auto_creating is effectively %q for one after its switch, want on", effective)
	}

	// A create in the initial state acknowledged: version 1 there, and
	// it waits (the entity's auto_creating is off).
	run(t, ctx,
		navigate(inv+"/link/new"),
		chromedp.WaitVisible(`#initial-state`, chromedp.ByID),
		chromedp.SetValue(`#attr-name`, "two", chromedp.ByID),
		chromedp.SetValue(`#initial-state`, "acknowledged", chromedp.ByID),
		chromedp.Click(`//button[text()="Create"]`, chromedp.BySearch),
		chromedp.WaitVisible(`p.flash`, chromedp.ByQuery),
		chromedp.Text(`p.flash`, &text, chromedp.ByQuery),
	)
	if !strings.Contains(text, "Created link two (state acknowledged, version 1)") {
		t.Errorf("a create in acknowledged: %q", text)
	}

	// The pools, from the catalog, to the instance holding 100.
	run(t, ctx,
		navigate(inv),
		chromedp.Click(`//a[text()="Allocation pools"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//a[text()="vlan"]`, chromedp.BySearch),
		chromedp.Text(`main`, &text, chromedp.ByQuery),
		shot(t, ctx, "pools"),
	)
	accessible(t, ctx, "pools")
	if !strings.Contains(text, "100–199\t100\t2\t98") {
		t.Errorf("the pools page:\n%s", text)
	}
	run(t, ctx,
		chromedp.Click(`//a[text()="vlan"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//td/code[text()="100"]`, chromedp.BySearch),
		chromedp.Text(`main`, &text, chromedp.ByQuery),
		shot(t, ctx, "pool"),
	)
	accessible(t, ctx, "pool")
	if !strings.Contains(text, "2 of 100 (98 free)") || !strings.Contains(text, "vlan_id") {
		t.Errorf("the pool's page:\n%s", text)
	}
	run(t, ctx,
		chromedp.Click(`//tr[td/code[text()="100"]]/td[3]/a`, chromedp.BySearch),
		chromedp.WaitVisible(`#instance-state`, chromedp.ByID),
		chromedp.Text(`//dt[text()="Identity"]/following-sibling::dd[1]`, &text, chromedp.BySearch),
	)
	if text != "one" {
		t.Errorf("the instance holding vlan 100:\n%s", text)
	}

	// A read token: the switches, no form; the pools; its forged post is
	// the API's 403.
	run(t, ctx, signOut(base), signIn(base, reader, env))
	var forms int
	run(t, ctx,
		navigate(inv+"/link"),
		chromedp.WaitVisible(`//section[@aria-labelledby="auto-transfers"]`, chromedp.BySearch),
		chromedp.Evaluate(`document.querySelectorAll('main form[method=post], main select[name^=cfg], main select[name=auto_transfers], main button[type=submit]:not(.filters button)').length`, &forms),
		chromedp.Text(`//span[@data-switch="auto_creating"]`, &text, chromedp.BySearch),
	)
	if forms != 0 || text != "off" {
		t.Errorf("a reader on the entity's page: %d forms or buttons, auto_creating %q", forms, text)
	}
	run(t, ctx,
		navigate(inv+"/link/one"),
		chromedp.WaitVisible(`//section[@aria-labelledby="auto-transfers"]`, chromedp.BySearch),
		chromedp.Evaluate(`document.querySelectorAll('main form[method=post], main button').length`, &forms),
		navigate(base+"env/"+env+"/pools/vlan"),
		chromedp.WaitVisible(`//td/code[text()="100"]`, chromedp.BySearch),
	)
	if forms != 0 {
		t.Errorf("a reader on an instance's page: %d forms or buttons", forms)
	}
	as := consoleAs{t: t, base: s.URL(), token: reader}
	form := url.Values{"csrf": {as.csrf()}, "auto_transfers": {"off"}, "was-auto_transfers": {"on"}}
	for _, path := range []string{"/inventory/link/config", "/inventory/link/one/config"} {
		if code, body, _ := as.do(http.MethodPost, "/console/env/"+env+path, form); code != http.StatusForbidden {
			t.Errorf("a reader's forged POST %s = %d:\n%s", path, code, body)
		}
	}
	if code, body, _ := as.do(http.MethodPost, "/console/env/"+env+"/inventory/link/new",
		url.Values{"csrf": {as.csrf()}, "attr-name": {"three"}, "dryrun": {"1"}}); code != http.StatusForbidden {
		t.Errorf("a reader's forged dry-run of a create = %d:\n%s", code, body)
	}
	if ent, err := catalogConfig(c, env); err != nil || !ent.AutoTransfers {
		t.Errorf("after the reader's posts the entity's config is %+v, %v", ent, err)
	}
}

// catalogConfig is link's config.
func catalogConfig(c *client.Client, env string) (client.EntityConfig, error) {
	var e client.ServiceEntity
	err := c.WithHeader("X-Intend-Environment", env).Do(context.Background(), http.MethodGet, "/lsm/v1/service_catalog/link", nil, &e)
	return e.Config, err
}

// inventory is link's live instances.
func inventory(t *testing.T, c *client.Client, env string) []client.ServiceInstance {
	t.Helper()
	var list struct {
		Items []client.ServiceInstance `json:"items"`
	}
	if err := c.WithHeader("X-Intend-Environment", env).Do(context.Background(), http.MethodGet, client.InventoryPath("link"), nil, &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitInstancePage reloads the instance's page (without its flash) until
// it shows state want, for at most 90 s.
func waitInstancePage(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var state, loc string
		run(t, ctx, chromedp.WaitVisible(`#instance-state`, chromedp.ByID), chromedp.Text(`#instance-state`, &state, chromedp.ByID),
			chromedp.Location(&loc))
		if state == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the instance is %s, not %s, after 90 s", state, want)
		}
		time.Sleep(500 * time.Millisecond)
		loc, _, _ = strings.Cut(loc, "?")
		run(t, ctx, navigate(loc))
	}
}
