package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestVersionsInABrowser exports two versions of a file (its content, of
// several lines, and its mode change), walks the versions page, opens the
// diff of 1 → 2 and reads the content's change as a unified diff,
// releases 2 and rolls back to 1 with the buttons (reading the flash),
// starts a dry-run of 2 and reads what it would change; and checks that a
// read token has no Release, Rollback or Dry-run button.
func TestVersionsInABrowser(t *testing.T) {
	c, s, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	env := servertest.NewEnvironment(t, c, "versions", nil)
	file := filepath.Join(t.TempDir(), "motd")
	rid := "fs::File[localhost,path=" + file + "]"
	version := func(content, mode string) []byte {
		b, _ := json.Marshal(map[string]any{"resources": []any{map[string]any{"id": rid,
			"attributes": map[string]any{"path": file, "content": content, "mode": mode}}}})
		return b
	}
	ctx := context.Background()
	req := servertest.Release(t, c, env, version("one\ntwo\nthree\n", "0644"))
	if _, err := c.WaitRequest(ctx, env, req, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExportVersion(ctx, env, version("one\n2\nthree\n", "0640")); err != nil {
		t.Fatal(err)
	}
	reader := readToken(t, c, "versions-reader", env)

	b := browser(t)
	base := s.URL() + "/console/"
	versions := base + "env/" + env + "/versions"
	var text, diff string
	run(t, b,
		signIn(base, c.Token, env),
		chromedp.Navigate(versions),
		chromedp.WaitVisible(`//button[@aria-label="Release version 2"]`, chromedp.BySearch),
		chromedp.Text(`table.versions`, &text, chromedp.ByQuery),
		shot(t, b, "versions"),
	)
	accessible(t, b, "versions")
	if !strings.Contains(text, "released") || !strings.Contains(text, "not released") {
		t.Errorf("the versions table does not say which version is released:\n%s", text)
	}

	// The diff form is filled with the two newest versions: 1 → 2.
	run(t, b,
		chromedp.Click(`//button[text()="Show the diff"]`, chromedp.BySearch),
		chromedp.WaitVisible(`pre.udiff`, chromedp.ByQuery),
		chromedp.Text(`pre.udiff`, &diff, chromedp.ByQuery),
		chromedp.Text(`main`, &text, chromedp.ByQuery),
		shot(t, b, "diff"),
	)
	accessible(t, b, "diff")
	for _, want := range []string{"@@ -1,3 +1,3 @@", " one", "-two", "+2", " three"} {
		if !strings.Contains(diff+"\n", want+"\n") {
			t.Errorf("the content's unified diff lacks the line %q:\n%s", want, diff)
		}
	}
	if !strings.Contains(text, "Version 1 → 2") || !strings.Contains(text, `"0644" → "0640"`) || !strings.Contains(text, rid) {
		t.Errorf("the diff page lacks its title, the mode's change or the resource:\n%s", text)
	}

	// Release 2, then roll back to 1: each says what it did.
	run(t, b,
		chromedp.Navigate(versions),
		chromedp.Click(`//button[@aria-label="Release version 2"]`, chromedp.BySearch),
		chromedp.WaitVisible(`p.flash`, chromedp.ByQuery),
		chromedp.Text(`p.flash`, &text, chromedp.ByQuery),
	)
	if !strings.Contains(text, "Version 2 released (deploy request") {
		t.Errorf("after Release the page says %q", text)
	}
	// Rollback asks first, on a page of its own; then it is done.
	run(t, b,
		chromedp.Click(`//button[@aria-label="Roll back to version 1"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//h1[contains(text(), "to version 1?")]`, chromedp.BySearch),
		shot(t, b, "confirm"),
	)
	accessible(t, b, "the rollback's confirmation")
	run(t, b,
		chromedp.Click(`//section[contains(@class, "confirm")]//button[text()="Roll back to version 1"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//p[@class="flash" and contains(text(), "Rolled back")]`, chromedp.BySearch),
		chromedp.Text(`p.flash`, &text, chromedp.ByQuery),
	)
	m := regexp.MustCompile(`^Rolled back to version 1: version 3, a copy of it, released \(deploy request (\d+)\)\.$`).FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		t.Fatalf("after Rollback the page says %q", text)
	}
	// The target holds version 1 (3) again before the dry-run of 2.
	rb, _ := strconv.ParseInt(m[1], 10, 64)
	if _, err := c.WaitRequest(ctx, env, rb, time.Minute, nil); err != nil {
		t.Fatal(err)
	}

	// A dry-run of version 2: its page, until it finished.
	run(t, b,
		chromedp.Click(`//button[@aria-label="Dry-run version 2"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//h1[starts-with(text(), "Dry-run")]`, chromedp.BySearch),
		chromedp.Text(`p.flash`, &text, chromedp.ByQuery),
	)
	if !strings.Contains(text, "of version 2 started") {
		t.Errorf("after Dry-run the page says %q", text)
	}
	var page string
	run(t, b, chromedp.Location(&page))
	for deadline := time.Now().Add(time.Minute); ; {
		run(t, b, chromedp.Navigate(page), chromedp.WaitVisible(`main`, chromedp.ByQuery), chromedp.Text(`main`, &text, chromedp.ByQuery))
		if !strings.Contains(text, "still running") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dry-run did not finish:\n%s", text)
		}
		time.Sleep(500 * time.Millisecond)
	}
	run(t, b, chromedp.Text(`pre.udiff`, &diff, chromedp.ByQuery), shot(t, b, "dryrun"))
	if !strings.Contains(text, rid) || !strings.Contains(text, "modified") || !strings.Contains(diff+"\n", "-two\n") || !strings.Contains(diff+"\n", "+2\n") {
		t.Errorf("the dry-run page lacks the file's changes:\n%s\n%s", text, diff)
	}

	// A read token: the versions and the diff form, no button that writes.
	var forms int
	run(t, b,
		signOut(base),
		signIn(base, reader, env),
		chromedp.Navigate(versions),
		chromedp.WaitVisible(`//button[text()="Show the diff"]`, chromedp.BySearch),
		chromedp.Evaluate(`document.querySelectorAll('main form[method="post"]').length + [...document.querySelectorAll('main button')].filter(b => b.textContent != 'Show the diff').length`, &forms),
		chromedp.Text(`main`, &text, chromedp.ByQuery),
	)
	if forms != 0 || !strings.Contains(text, "version 3 is released") {
		t.Errorf("a read token sees %d write forms and buttons:\n%s", forms, text)
	}
	fmt.Fprintf(os.Stderr, "versions screenshots: %s\n", t.ArtifactDir())
}
