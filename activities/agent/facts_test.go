package agent

import (
	"testing"

	"github.com/intendhq/intend/adapters"
)

func TestFactsOfDropsValuesThatAreNotJSON(t *testing.T) {
	t.Parallel()
	hc := adapters.NewContext()
	if got := factsOf(hc); got != nil {
		t.Fatalf("no facts: got %v, want nil", got)
	}
	hc.SetFact("size", 6)
	hc.SetFact("bad", func() {})
	got := factsOf(hc)
	if len(got) != 1 || string(got["size"]) != "6" {
		t.Errorf("factsOf = %v, want only size=6", got)
	}
	if logs := hc.Logs(); len(logs) != 1 || logs[0].Level != "WARN" || logs[0].Attrs["fact"] != "bad" {
		t.Errorf("want one warning about fact bad, got %+v", logs)
	}
}
