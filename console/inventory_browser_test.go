package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// inventoryModel is a model with one service entity, vm, of the simple
// lifecycle: a VM is a file under root named after it, holding its
// memory, disk class and backup setting. Its attributes have each kind
// of input the forms generate: a string with a pattern, an integer with
// bounds, an enum, a boolean, and an r attribute (left out of the forms).
func inventoryModel(root string) string {
	return `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#VM: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		// The VM's name.
		name: =~"^[a-z]+$" @lsm(rw)
		// Memory in GiB.
		memory: *2 | int & >=1 & <=64 @lsm(rw+)
		// The disk's class.
		disk: *"ssd" | "hdd" @lsm(rw+)
		// Whether the VM is backed up.
		backup: *false | bool @lsm(rw+)
		// The VM's name in DNS, computed by the model.
		fqdn: "\(name).vms.example.com" @lsm(r)
	}
	output: {
		conf: fs.#File & {
			path:    "` + root + `/\(parameter.name).conf"
			content: "memory=\(parameter.memory)\ndisk=\(parameter.disk)\nbackup=\(parameter.backup)\n"
		}
	}
}

services: vm: #VM
`
}

// uploadInventoryModel puts a project with mainCUE as env's model, which
// registers its service entities in the catalog.
func uploadInventoryModel(t *testing.T, c *client.Client, env, mainCUE string) {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{"intend.yaml": "name: console\n", "main.cue": mainCUE} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	packed, err := project.Archive(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(context.Background(), http.MethodPut, client.EnvPath(env, "model"),
		client.Raw{ContentType: "application/gzip", Body: packed.Archive}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestInventoryInABrowser: the service catalog, an entity's instances and
// one instance in Chromium against a real server: a create through the
// generated form (refused first by the console's check of a value, then
// by the API's 422 for a missing attribute, each shown next to its field
// with the values typed kept), the instance reaching up, an update,
// a rollback to the first version from the log (and its dry-run),
// Delete, and a read token that sees no button.
func TestInventoryInABrowser(t *testing.T) {
	c, s, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	ctx0 := context.Background()
	env := servertest.NewEnvironment(t, c, "inventory", nil)
	root := t.TempDir()
	uploadInventoryModel(t, c, env, inventoryModel(root))
	// A second VM, made by the API, for the read token to look at.
	if _, err := c.CreateInstance(ctx0, env, "vm", client.CreateInstanceRequest{Attributes: map[string]any{"name": "db", "memory": 8}}); err != nil {
		t.Fatal(err)
	}
	reader := readToken(t, c, "inventory-reader", env)

	ctx := browser(t)
	base := s.URL() + "/console/"
	inv := base + "env/" + env + "/inventory"
	run(t, ctx, signIn(base, c.Token, env))

	// The catalog: the entity, its attributes and its lifecycle.
	var text string
	run(t, ctx,
		chromedp.Navigate(inv),
		chromedp.WaitVisible(`//h2/a[text()="vm"]`, chromedp.BySearch),
		chromedp.Text(`main`, &text, chromedp.ByQuery),
		shot(t, ctx, "catalog"),
	)
	accessible(t, ctx, "catalog")
	for _, want := range []string{"memory", "rw+", "integer (≥1, ≤64)", `one of "ssd", "hdd"`, "fqdn", "update_acknowledged", "on_delete"} {
		if !strings.Contains(text, want) {
			t.Errorf("the catalog lacks %q:\n%s", want, text)
		}
	}

	// The create form: a name the schema's pattern refuses is refused by
	// the console, next to its field, with what was typed kept.
	var described, kept, memKept string
	var hasFqdn bool
	run(t, ctx,
		chromedp.Click(`//a[text()="New vm"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#attr-name`, chromedp.ByID),
		chromedp.Evaluate(`document.getElementById('attr-fqdn') !== null`, &hasFqdn),
		chromedp.SetValue(`#attr-name`, "Web1", chromedp.ByID),
		chromedp.SetValue(`#attr-memory`, "4", chromedp.ByID),
		chromedp.SetValue(`#attr-disk`, `"hdd"`, chromedp.ByID),
		chromedp.Click(`//button[text()="Create"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#attr-name-error`, chromedp.ByID),
		chromedp.Text(`#attr-name-error`, &text, chromedp.ByID),
		chromedp.AttributeValue(`#attr-name`, "aria-describedby", &described, nil, chromedp.ByID),
		chromedp.Value(`#attr-name`, &kept, chromedp.ByID),
		chromedp.Value(`#attr-memory`, &memKept, chromedp.ByID),
		shot(t, ctx, "instance-form-error"),
	)
	accessible(t, ctx, "instance-form-error")
	if hasFqdn {
		t.Error("the create form has the r attribute fqdn")
	}
	if !strings.Contains(text, "must match the pattern ^[a-z]+$") || !strings.Contains(described, "attr-name-error") ||
		kept != "Web1" || memKept != "4" {
		t.Errorf("the refused name: error %q, described by %q, kept %q and memory %q", text, described, kept, memKept)
	}
	// No name at all: the API's 422 (/attributes/name), next to the field.
	run(t, ctx,
		chromedp.Evaluate(`document.getElementById("attr-name").value = ""`, nil),
		chromedp.Click(`//button[text()="Create"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//p[@id="attr-name-error"][contains(., "required")]`, chromedp.BySearch),
		chromedp.Value(`#attr-memory`, &memKept, chromedp.ByID),
		chromedp.Value(`#attr-disk`, &kept, chromedp.ByID),
	)
	if memKept != "4" || kept != `"hdd"` {
		t.Errorf("after the API's 422 the form lost its values: memory %q, disk %q", memKept, kept)
	}
	// A good create: the instance's page, with a flash, then up. The
	// environment is halted until the page is shown, so that the
	// instance moves on after the page loaded, however fast its deploy
	// and however slow the browser on a busy machine.
	if err := c.Do(ctx0, http.MethodPost, client.EnvPath(env, "halt"), nil, nil); err != nil {
		t.Fatal(err)
	}
	run(t, ctx,
		chromedp.SetValue(`#attr-name`, "web", chromedp.ByID),
		chromedp.Click(`//button[text()="Create"]`, chromedp.BySearch),
		chromedp.WaitVisible(`p.flash`, chromedp.ByQuery),
		chromedp.Text(`p.flash`, &text, chromedp.ByQuery),
	)
	if !strings.Contains(text, "Created vm web") {
		t.Errorf("after the create the page says %q", text)
	}
	var loaded string
	run(t, ctx, chromedp.Text(`#instance-state`, &loaded, chromedp.ByID))
	if loaded == "up" {
		t.Fatalf("the instance was up when its page loaded, with its environment halted")
	}
	if err := c.Do(ctx0, http.MethodPost, client.EnvPath(env, "resume"), nil, nil); err != nil {
		t.Fatal(err)
	}
	// The page follows the instance without a reload (its event stream):
	// its state reaches up, and it says the instance moved past the
	// version it was loaded with.
	deadline := time.Now().Add(90 * time.Second)
	for {
		var state string
		var movedShown bool
		run(t, ctx, chromedp.Text(`#instance-state`, &state, chromedp.ByID),
			chromedp.Evaluate(`!document.querySelector("[data-moved]").hidden`, &movedShown))
		if state == "up" && movedShown {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("without a reload the page shows state %q (moved notice %v) after 90 s, want up", state, movedShown)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The notice's link reloads the page, at the new version.
	run(t, ctx, chromedp.Click(`//p[@data-moved]/a`, chromedp.BySearch), chromedp.WaitVisible(`//h2[text()="Log"]`, chromedp.BySearch))
	waitInstance := func(want string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			var state string
			run(t, ctx, chromedp.WaitVisible(`#instance-state`, chromedp.ByID), chromedp.Text(`#instance-state`, &state, chromedp.ByID))
			if state == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the instance is %s, not %s, after 90 s", state, want)
			}
			time.Sleep(500 * time.Millisecond)
			// Reload without the flash, which said what the request did.
			var loc string
			run(t, ctx, chromedp.Location(&loc))
			loc, _, _ = strings.Cut(loc, "?")
			run(t, ctx, chromedp.Navigate(loc))
		}
	}
	waitInstance("up")
	run(t, ctx,
		chromedp.WaitVisible(`//h2[text()="Log"]`, chromedp.BySearch),
		chromedp.Text(`main`, &text, chromedp.ByQuery),
		shot(t, ctx, "instance"),
	)
	accessible(t, ctx, "instance")
	for _, want := range []string{"web.vms.example.com", "fs::File", "deployed", "creating", "Update", "Delete"} {
		if !strings.Contains(text, want) {
			t.Errorf("the instance page lacks %q:\n%s", want, text)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(root, "web.conf")); string(got) != "memory=4\ndisk=hdd\nbackup=false\n" {
		t.Errorf("web.conf = %q", got)
	}

	// The update form: a memory out of bounds is refused next to it; a
	// good one is requested, and deployed.
	run(t, ctx,
		chromedp.SetValue(`#attr-memory`, "100", chromedp.ByID),
		chromedp.Click(`//button[text()="Update"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#attr-memory-error`, chromedp.ByID),
		chromedp.Text(`#attr-memory-error`, &text, chromedp.ByID),
	)
	if !strings.Contains(text, "at most 64") {
		t.Errorf("memory 100: %q", text)
	}
	run(t, ctx,
		chromedp.SetValue(`#attr-memory`, "6", chromedp.ByID),
		chromedp.Click(`#attr-backup`, chromedp.ByID),
		chromedp.Click(`//button[text()="Update"]`, chromedp.BySearch),
		chromedp.WaitVisible(`p.flash`, chromedp.ByQuery),
		chromedp.Text(`p.flash`, &text, chromedp.ByQuery),
	)
	if !strings.Contains(text, "Update requested") {
		t.Errorf("after the update the page says %q", text)
	}
	waitInstance("up")
	if got, _ := os.ReadFile(filepath.Join(root, "web.conf")); string(got) != "memory=6\ndisk=hdd\nbackup=true\n" {
		t.Errorf("web.conf after the update = %q", got)
	}

	// Back to the first version, from the log: its dry-run first (which
	// changes nothing), then the rollback, which asks first; the
	// instance's attributes are version 1's again, and deployed.
	var page string
	run(t, ctx, chromedp.Location(&page))
	page, _, _ = strings.Cut(page, "?")
	// The page shown is the update's answer (update_start): loaded again,
	// its forms name the version the instance is up at.
	run(t, ctx,
		navigate(page),
		chromedp.Click(`//button[@aria-label="Dry-run the rollback to version 1"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//p[@class="flash"][starts-with(., "Dry-run of the rollback")]`, chromedp.BySearch),
		chromedp.Text(`p.flash`, &text, chromedp.ByQuery),
	)
	if !strings.Contains(text, "Dry-run of the rollback: up would lead to") {
		t.Errorf("after the rollback's dry-run the page says %q", text)
	}
	run(t, ctx,
		navigate(page),
		chromedp.Click(`//button[@aria-label="Roll back to this version: 1"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//section[contains(@class, "confirm")]//button`, chromedp.BySearch),
		chromedp.Text(`//section[contains(@class, "confirm")]//button`, &text, chromedp.BySearch),
	)
	if text != "Roll back to version 1" {
		t.Errorf("the rollback's confirmation offers %q", text)
	}
	run(t, ctx,
		chromedp.Click(`//section[contains(@class, "confirm")]//button`, chromedp.BySearch),
		chromedp.WaitVisible(`//p[@class="flash"][starts-with(., "Rollback")]`, chromedp.BySearch),
		chromedp.Text(`p.flash`, &text, chromedp.ByQuery),
	)
	if !strings.HasPrefix(text, "Rollback to version 1 requested") {
		t.Errorf("after the rollback the page says %q", text)
	}
	waitInstance("up")
	if got, _ := os.ReadFile(filepath.Join(root, "web.conf")); string(got) != "memory=4\ndisk=hdd\nbackup=false\n" {
		t.Errorf("web.conf after the rollback to version 1 = %q", got)
	}
	if vm, err := c.Instance(ctx0, env, "vm", "web"); err != nil || fmt.Sprintf("%v %v %v", vm.Active["memory"], vm.Active["disk"], vm.Active["backup"]) != "4 hdd false" {
		t.Errorf("the instance's attributes after the rollback to version 1: %v, %v", vm.Active, err)
	}

	// The instances, filtered on up.
	run(t, ctx,
		chromedp.Navigate(inv+"/vm?state=up"),
		chromedp.WaitVisible(`//a[text()="web"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//a[text()="db"]`, chromedp.BySearch),
		shot(t, ctx, "instances"),
		chromedp.Navigate(inv+"/vm?state=rejected"),
		chromedp.WaitVisible(`main`, chromedp.ByQuery),
		chromedp.Text(`main`, &text, chromedp.ByQuery),
	)
	if !strings.Contains(text, "No instance in state rejected") {
		t.Errorf("filtered on rejected:\n%s", text)
	}

	// Delete: the instance goes, and its file.
	run(t, ctx,
		chromedp.Navigate(inv+"/vm?state=up"),
		chromedp.Click(`//a[text()="web"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//button[text()="Delete"]`, chromedp.BySearch),
		chromedp.Click(`//button[text()="Delete"]`, chromedp.BySearch),
		// It asks first.
		chromedp.WaitVisible(`//section[contains(@class, "confirm")]//button`, chromedp.BySearch),
		chromedp.Click(`//section[contains(@class, "confirm")]//button`, chromedp.BySearch),
		chromedp.WaitVisible(`p.flash`, chromedp.ByQuery),
		chromedp.Text(`p.flash`, &text, chromedp.ByQuery),
	)
	if !strings.Contains(text, "Delete requested") {
		t.Errorf("after Delete the page says %q", text)
	}
	waitInstance("terminated")
	if _, err := os.Stat(filepath.Join(root, "web.conf")); !os.IsNotExist(err) {
		t.Errorf("web.conf after the delete: %v", err)
	}

	// A read token: the catalog, instances and an instance without a
	// button or form.
	run(t, ctx, signOut(base), signIn(base, reader, env))
	var buttons, links int
	run(t, ctx,
		chromedp.Navigate(inv),
		chromedp.WaitVisible(`//h2/a[text()="vm"]`, chromedp.BySearch),
		chromedp.Evaluate(`document.querySelectorAll('main button, main a.button').length`, &links),
		chromedp.Navigate(inv+"/vm/db"),
		chromedp.WaitVisible(`#instance-state`, chromedp.ByID),
		chromedp.Evaluate(`document.querySelectorAll('main button, main form[method=post], main a.button').length`, &buttons),
	)
	if links != 0 || buttons != 0 {
		t.Errorf("a read token sees %d buttons on the catalog and %d on an instance; want none", links, buttons)
	}
	run(t, ctx, chromedp.Navigate(inv+"/vm/new"), chromedp.WaitVisible(`p.error`, chromedp.ByQuery), chromedp.Text(`p.error`, &text, chromedp.ByQuery))
	if !strings.Contains(text, "may not create") {
		t.Errorf("a read token's create form: %q", text)
	}
	fmt.Fprintf(os.Stderr, "inventory screenshots: %s\n", t.ArtifactDir())
}
