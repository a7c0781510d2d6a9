package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// slowResumeAPI is fakeAPI whose resume answers only when released, and
// tells whether its request was cancelled meanwhile.
type slowResumeAPI struct {
	fakeAPI
	started, release chan struct{}
	cancelled        chan bool
}

func (f *slowResumeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/api/v1/environments/prod/resume" {
		close(f.started)
		<-f.release
		f.cancelled <- r.Context().Err() != nil
		_, _ = w.Write([]byte(`{"name":"prod","halted":false}`))
		return
	}
	f.fakeAPI.ServeHTTP(w, r)
}

// TestWritesOutliveTheirBrowser: a form's post the console has taken is
// carried through to the API when its browser goes away meanwhile (a
// navigation started at once cancels the one in flight), while a page's
// read still ends with its browser.
func TestWritesOutliveTheirBrowser(t *testing.T) {
	api := &slowResumeAPI{started: make(chan struct{}), release: make(chan struct{}), cancelled: make(chan bool, 1)}
	c, err := New(Options{API: api})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	form := url.Values{"csrf": {c.csrf("good")}}
	ctx, leave := context.WithCancel(context.Background())
	r := httptest.NewRequest(http.MethodPost, "/console/env/prod/resume", strings.NewReader(form.Encode())).WithContext(ctx)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.AddCookie(&http.Cookie{Name: cookieName, Value: "good"})
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		done <- w
	}()
	select {
	case <-api.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the resume never reached the API")
	}
	leave() // the browser navigates elsewhere
	close(api.release)
	if <-api.cancelled {
		t.Error("the API's resume was cancelled when the browser left")
	}
	if w := <-done; w.Code != http.StatusSeeOther || !strings.Contains(w.Header().Get("Location"), "resumed") {
		t.Errorf("the resume answered %d %q", w.Code, w.Header().Get("Location"))
	}

	// A read ends with its browser.
	var readCtx context.Context
	probe := finishWrites(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { readCtx = r.Context() }))
	ctx, leave = context.WithCancel(context.Background())
	probe.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/console/", nil).WithContext(ctx))
	leave()
	if readCtx.Err() == nil {
		t.Error("a read outlived its browser")
	}
}
