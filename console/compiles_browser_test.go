package console_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/gittest"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestConsoleCompiles: an autonomous compile of a model with an error
// shows on the compiles page with its commit and the error's position.
func TestConsoleCompiles(t *testing.T) {
	// The API as production serves it: not wrapped in the OpenAPI
	// validator (which routes each request afresh, and once hid a console
	// bug that only the bare API shows).
	c, s, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second, DataDir: t.TempDir(), AllowLocalRepos: true,
		WrapHandler: func(h http.Handler) http.Handler { return h }})
	repo := gittest.New(t)
	commit := repo.Commit("main", map[string]*string{
		"intend.yaml": gittest.Text("name: site\n"),
		"main.cue":    gittest.Text("package main\n\nresources: {\n\tbroken: {id: 42}\n}\n"),
	})
	env := servertest.NewEnvironment(t, c, "compiles", map[string]any{"repo_url": repo.Bare, "repo_branch": "main"})
	var cp client.Compile
	if err := c.Do(context.Background(), http.MethodPost, "/api/v1/environments/"+env+"/compile", map[string]any{}, &cp); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for cp.FinishedAt == nil {
		if time.Now().After(deadline) {
			t.Fatalf("compile %d did not finish: %+v", cp.ID, cp)
		}
		time.Sleep(200 * time.Millisecond)
		if err := c.Do(context.Background(), http.MethodGet, "/api/v1/environments/"+env+"/compiles/"+itoa(cp.ID), nil, &cp); err != nil {
			t.Fatal(err)
		}
	}
	ctx := browser(t)
	var text string
	run(t, ctx,
		signIn(s.URL()+"/console/", c.Token, env),
		chromedp.Navigate(s.URL()+"/console/env/"+env+"/compiles"),
		chromedp.WaitVisible(`ul.problems`, chromedp.ByQuery),
		chromedp.Text(`main`, &text, chromedp.ByQuery),
		shot(t, ctx, "compiles"),
	)
	accessible(t, ctx, "compiles")
	for _, want := range []string{"Compile 1: failed", commit, "main.cue:4:15", "resources.broken.id"} {
		if !strings.Contains(text, want) {
			t.Errorf("the compiles page lacks %q:\n%s", want, text)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
