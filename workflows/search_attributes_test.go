package workflows

import (
	"testing"

	intend "github.com/intendhq/intend"
)

// TestSearchAttributesInTemporalYAML: every search attribute the
// workflows set is registered, with its type, by temporal.yaml (the dev
// server's flags, the production server's namespace and
// server.EnsureSearchAttributes all read it): one missing there fails the
// workflow that sets it.
func TestSearchAttributesInTemporalYAML(t *testing.T) {
	t.Parallel()
	cfg, err := intend.TemporalDevConfig()
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]string{
		SearchAttrEnvironment:     "Keyword",
		SearchAttrVersion:         "Int",
		SearchAttrRunKind:         "Keyword",
		SearchAttrRunResult:       "Keyword",
		SearchAttrServiceEntity:   "Keyword",
		SearchAttrServiceInstance: "Keyword",
		SearchAttrInstanceState:   "Keyword",
	} {
		if got := cfg.SearchAttributes[name]; got != typ {
			t.Errorf("temporal.yaml: %s is %q, want %q", name, got, typ)
		}
	}
}
