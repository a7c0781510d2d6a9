package rest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
)

// TestHostileAnswersAreRefusedInBoundedMemory has a server (an httptest
// one: no real API answers this way on demand) answer without end, with a
// body nested 100,000 deep, and with a body just over max_body: each is a
// permanent error, in bounded memory and time.
func TestHostileAnswersAreRefusedInBoundedMemory(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/endless":
			chunk := []byte(strings.Repeat("[", 64<<10))
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/deep":
			io.WriteString(w, deep)
		case "/big":
			io.WriteString(w, `{"a":"`+strings.Repeat("x", 2<<20)+`"}`)
		}
	}))
	defer srv.Close()
	for _, c := range []struct {
		path, want string
		maxBody    int
	}{
		{"/endless", "larger than max_body (8388608 bytes)", 0},
		{"/deep", "nested more than 64 levels deep", 0},
		{"/big", "larger than max_body (1048576 bytes)", 1 << 20},
	} {
		t.Run(c.path, func(t *testing.T) {
			attrs := map[string]any{"endpoint": srv.URL, "path": c.path, "body": map[string]any{"a": "b"}}
			if c.maxBody > 0 {
				attrs["max_body"] = c.maxBody
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, _, err := apply(t, object("hostile"+strings.ReplaceAll(c.path, "/", "-"), attrs), true)
			d := time.Since(start)
			runtime.ReadMemStats(&after)
			if err == nil || adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v (%s), want a permanent one saying %q", err, adapters.ClassOf(err), c.want)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("allocated %d MiB to refuse it", alloc>>20)
			}
			if d > 20*time.Second {
				t.Errorf("took %s to refuse it", d)
			}
		})
	}
}
