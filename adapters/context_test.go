package adapters_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/intendhq/intend/adapters"
)

func TestContextFacts(t *testing.T) {
	t.Parallel()
	hc := adapters.NewContext()
	if got := hc.Facts(); len(got) != 0 {
		t.Fatalf("new context has facts %v", got)
	}
	hc.SetFact("size", 1)
	hc.SetFact("size", 6) // the last value wins
	hc.SetFact("mtime", "2026-01-02T03:04:05Z")
	hc.SetFact("", "ignored")

	got := hc.Facts()
	if len(got) != 2 || got["size"] != 6 || got["mtime"] != "2026-01-02T03:04:05Z" {
		t.Fatalf("Facts() = %v, want size=6 and mtime", got)
	}
	if logs := hc.Logs(); len(logs) != 1 || logs[0].Level != "WARN" {
		t.Errorf("an unnamed fact should log one warning, got %v", logs)
	}

	got["size"] = 99 // a copy: the context keeps its own
	if v := hc.Facts()["size"]; v != 6 {
		t.Errorf("Facts() is not a copy: size became %v", v)
	}
}

func TestContextFactsConcurrent(t *testing.T) {
	t.Parallel()
	hc := adapters.NewContext()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc.SetFact(fmt.Sprintf("f%d", i), i)
			_ = hc.Facts()
		}()
	}
	wg.Wait()
	if n := len(hc.Facts()); n != 20 {
		t.Errorf("got %d facts, want 20", n)
	}
}
