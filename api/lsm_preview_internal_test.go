package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
)

// TestPreviewPageIsBounded: a page of a preview whose instances' changes
// pass the byte bound ends after the instance that passes it, with next
// pointing after it and the counts of what it holds; one that fits keeps
// the previewer's next.
func TestPreviewPageIsBounded(t *testing.T) {
	t.Parallel()
	big := map[string]intent.Change{"content": {From: strings.Repeat("a", 600), To: "x"}}
	var p lsm.ModelPreview
	for _, id := range []string{"a", "b", "c"} {
		p.Instances = append(p.Instances, lsm.FleetInstance{Instance: lsm.Instance{Entity: "vm", ID: id, State: "up"},
			Comparison: lsm.SetComparison{Modified: []intent.ModifiedResource{{ID: "fs::File[h,path=/" + id + "]", Changes: big}}}})
	}
	p.Instances = append(p.Instances, lsm.FleetInstance{Instance: lsm.Instance{Entity: "vm", ID: "d"}, Failed: true,
		Errors: json.RawMessage(`[{"message":"no"}]`)})
	p.Next = "vm/d"

	cut := wireModelPreview(p, 1000)
	if len(cut.Instances) != 2 || cut.Next != "vm/b" || cut.Counts["changed"] != 2 || len(cut.Counts) != 1 {
		t.Errorf("page past 1000 bytes: %d instances, next %q, counts %v; want a and b, next vm/b", len(cut.Instances), cut.Next, cut.Counts)
	}
	whole := wireModelPreview(p, 1<<20)
	if len(whole.Instances) != 4 || whole.Next != "vm/d" || whole.Counts["changed"] != 3 || whole.Counts["failed"] != 1 {
		t.Errorf("page within bounds: %d instances, next %q, counts %v", len(whole.Instances), whole.Next, whole.Counts)
	}
	// One instance alone past the bound is still answered.
	one := wireModelPreview(lsm.ModelPreview{Instances: p.Instances[:1]}, 10)
	if len(one.Instances) != 1 || one.Next != "" {
		t.Errorf("one instance past the bound: %+v", one)
	}
}
