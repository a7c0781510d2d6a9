package devcluster_test

import (
	"context"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/intendhq/intend/internal/devcluster"
)

// consoleEnv is the environment the console's walk edits.
const consoleEnv = "console"

// consoleAcrossReplicas walks the web console in Chromium through the
// load balancer, each form rendered by one replica and posted to the
// other (as a load balancer without sticky sessions does): sign in, save
// a setting, sign out. The
// anti-forgery tokens and the sign-in form's token are signed with a key
// the replicas share (in PostgreSQL); with a key of each process's own,
// every one of these posts was refused with 403 "The form is stale", and
// the Helm chart's two replicas made the console unusable.
func consoleAcrossReplicas(t *testing.T, c *devcluster.Cluster) {
	ctx := context.Background()
	if _, err := c.Client().EnsureEnvironment(ctx, devcluster.Project, consoleEnv); err != nil {
		t.Fatal(err)
	}
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: run make tools (it installs Debian's chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The browser lives as long as the context of its first Run.
	if err := chromedp.Run(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// Through the load balancer, one origin as in production (the
	// console's Content-Security-Policy allows forms to post to it only);
	// the browser chooses the replica of each request
	// (devcluster.ReplicaHeader), and the page says which one served it.
	base := c.URL + "/console/"
	var served atomic.Value // the replica of the last document
	served.Store("")
	on := func(replica string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			return network.SetExtraHTTPHeaders(network.Headers{devcluster.ReplicaHeader: replica}).Do(ctx)
		})
	}
	step := func(what string, actions ...chromedp.Action) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, time.Minute)
		defer cancel()
		if err := chromedp.Run(sctx, actions...); err != nil {
			var url, text string
			dctx, cancel := context.WithTimeout(bctx, 5*time.Second)
			defer cancel()
			_ = chromedp.Run(dctx, chromedp.Location(&url), chromedp.Text(`body`, &text, chromedp.ByQuery))
			t.Fatalf("%s: %v\nat %s:\n%.1000s", what, err, url, text)
		}
	}
	// servedBy checks that the last document came from replica want.
	servedBy := func(what, want string) {
		t.Helper()
		if got := served.Load(); got != want {
			t.Fatalf("%s: the page came from server-%v, want server-%s: the walk did not cross", what, got, want)
		}
	}
	// Listen on the browser's context: a step's ends with the step.
	chromedp.ListenTarget(bctx, func(ev any) {
		if r, ok := ev.(*network.EventResponseReceived); ok && r.Type == network.ResourceTypeDocument {
			v, _ := r.Response.Headers[devcluster.ReplicaHeader].(string)
			served.Store(v)
		}
	})
	step("start", network.Enable())

	var flash string
	step("sign in: the form of server-1 posted to server-2",
		on("1"),
		chromedp.Navigate(base+"login"),
		chromedp.WaitVisible(`#token`, chromedp.ByID),
	)
	servedBy("the sign-in form", "1")
	step("sign in: the form of server-1 posted to server-2",
		chromedp.SetValue(`#token`, c.Token, chromedp.ByID),
		on("2"),
		chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(`//main//a[text()="`+consoleEnv+`"]`, chromedp.BySearch),
	)
	servedBy("the environments after the sign-in", "2")
	step("save a setting: the form of server-2 posted to server-1",
		chromedp.Navigate(base+"env/"+consoleEnv),
		chromedp.WaitVisible(`#s-deploy_interval`, chromedp.ByID),
		chromedp.SetValue(`#s-deploy_interval`, "900", chromedp.ByID),
		on("1"),
		chromedp.Click(`//button[text()="Save settings"]`, chromedp.BySearch),
		chromedp.WaitVisible(`p.flash`, chromedp.ByQuery),
		chromedp.Text(`p.flash`, &flash, chromedp.ByQuery),
	)
	servedBy("the environment after Save settings", "1")
	if !strings.Contains(flash, "Settings saved: deploy_interval") {
		t.Fatalf("after Save settings: %q", flash)
	}
	if e, err := c.Client().Environment(ctx, consoleEnv); err != nil || e.Settings.DeployInterval != 900 {
		t.Errorf("deploy_interval after the save = %+v %v", e.Settings, err)
	}
	step("sign out: the form of server-1 posted to server-2",
		chromedp.Navigate(base),
		chromedp.WaitVisible(`//button[text()="Sign out"]`, chromedp.BySearch),
		on("2"),
		chromedp.Click(`//button[text()="Sign out"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#token`, chromedp.ByID),
	)
	servedBy("the sign-in page after Sign out", "2")
	// Signed out on server-2 is signed out on server-1.
	step("server-1 after the sign-out",
		on("1"),
		chromedp.Navigate(base),
		chromedp.WaitVisible(`#token`, chromedp.ByID),
	)
	servedBy("the console after the sign-out", "1")
}
