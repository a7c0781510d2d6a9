package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/intendhq/intend/internal/oidc/oidctest"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestConsoleOIDCSignIn: with an OpenID Connect issuer configured, the
// sign-in page offers it; the browser goes through the issuer's
// authorization code flow (PKCE) and comes back signed in with the
// issuer's ID token, with the role its claim grants; an issuer that
// refuses the user gets a readable message.
func TestConsoleOIDCSignIn(t *testing.T) {
	iss := oidctest.NewIssuer(t)
	c, s, _ := servertest.StartServer(t, server.Config{SchedulerPoll: time.Second,
		OIDC: &server.OIDCConfig{Issuer: iss.URL(), Audience: "intend-console"}})
	env := servertest.NewEnvironment(t, c, "oidc", nil)
	iss.SetLogin(map[string]any{"sub": "alice", "intend_roles": []string{"operator@" + env}})
	ctx := browser(t)
	base := s.URL() + "/console/"
	var who, role, buttons string
	run(t, ctx,
		chromedp.Navigate(base+"env/"+env),
		chromedp.WaitVisible(`//a[text()="Sign in with OpenID Connect"]`, chromedp.BySearch),
		shot(t, ctx, "login-oidc"),
		chromedp.Click(`//a[text()="Sign in with OpenID Connect"]`, chromedp.BySearch),
		// Back from the issuer, on the page asked for at first.
		chromedp.WaitVisible(`//h2[text()="Recent runs"]`, chromedp.BySearch),
		chromedp.Text(`.who span`, &who, chromedp.ByQuery),
		chromedp.Text(`.role`, &role, chromedp.ByQuery),
		chromedp.Text(`.actions`, &buttons, chromedp.ByQuery),
	)
	if who != "oidc:alice" || role != "operator" || !strings.Contains(buttons, "Deploy") {
		t.Errorf("signed in as %q with role %q and buttons %q, want oidc:alice, operator, Deploy", who, role, buttons)
	}
	accessible(t, ctx, "sign-in with OIDC")

	// The issuer says no: the console says so, and nobody is signed in.
	iss.SetLogin(nil)
	var msg string
	run(t, ctx,
		signOut(base),
		chromedp.Click(`//a[text()="Sign in with OpenID Connect"]`, chromedp.BySearch),
		chromedp.WaitVisible(`p.error`, chromedp.ByQuery),
		chromedp.Text(`p.error`, &msg, chromedp.ByQuery),
	)
	if !strings.Contains(msg, "access_denied") {
		t.Errorf("a refused sign-in says %q", msg)
	}
}
