package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// BenchmarkConsolePages times the console's pages of an environment with
// 10,000 resources, as a browser gets them (HTTP, the session cookie, the
// whole page): the environments, the environment, the first page of
// resources, a filtered page, the next page and one resource. Issue 17's
// bar: each under 300 ms. Run with make bench, or:
//
//	CI=1 go test ./console/ -run '^$' -bench ConsolePages -benchtime 20x
func BenchmarkConsolePages(b *testing.B) {
	c, s, _ := servertest.StartServer(b, server.Config{SchedulerPoll: time.Second})
	env := servertest.NewEnvironment(b, c, "scale", map[string]any{"auto_deploy": false})
	const n = 10000
	rs := make([]any, n)
	for i := range rs {
		p := filepath.Join("/tmp/intend-console-scale", fmt.Sprintf("f%05d", i))
		rs[i] = map[string]any{"id": fmt.Sprintf("fs::File[host%d,path=%s]", i%20, p),
			"attributes": map[string]any{"path": p, "content": "x\n"}}
	}
	body, _ := json.Marshal(map[string]any{"resources": rs})
	v, err := c.ExportVersion(context.Background(), env, body)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Release(context.Background(), env, v.Version); err != nil {
		b.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// The sign-in form first: its anti-forgery token and pre-session cookie.
	resp, err := hc.Get(s.URL() + "/console/login")
	if err != nil {
		b.Fatal(err)
	}
	form, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(form)
	if csrf == nil {
		b.Fatalf("the sign-in form has no csrf field:\n%s", form)
	}
	resp, err = hc.PostForm(s.URL()+"/console/login", url.Values{"token": {c.Token}, "csrf": {string(csrf[1])}})
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		b.Fatalf("sign in: %v %v", resp, err)
	}
	get := func(path, want string) time.Duration {
		start := time.Now()
		resp, err := hc.Get(s.URL() + path)
		if err != nil {
			b.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), want) {
			b.Fatalf("GET %s = %d, without %q:\n%.500s", path, resp.StatusCode, want, page)
		}
		return took
	}
	base := "/console/env/" + env
	pages := []struct{ name, path, want string }{
		{"environments", "/console/", env},
		{"environment", base, "Recent runs"},
		{"resources", base + "/resources", "100 resources (more on the next page)"},
		{"resources of one agent", base + "/resources?agent=host7", "host7"},
		{"one resource", base + "/resource?id=" + url.QueryEscape("fs::File[host3,path=/tmp/intend-console-scale/f00003]"), "Action log"},
	}
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for range b.N {
		for _, p := range pages {
			times[p.name] = append(times[p.name], get(p.path, p.want))
		}
	}
	b.StopTimer()
	for _, p := range pages {
		ts := times[p.name]
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		b.ReportMetric(float64(ts[len(ts)/2].Microseconds())/1000, "ms-median-"+strings.ReplaceAll(p.name, " ", "-"))
		b.Logf("%s: median %v, max %v over %d", p.name, ts[len(ts)/2], ts[len(ts)-1], len(ts))
	}
}
