package lsm

import (
	"encoding/json"

	"github.com/intendhq/intend/internal/intent"
)

// Previews change nothing: the dry-run of a write to one instance
// (InstancePreview) and the preview of a model change over the fleet
// (ModelPreview). The engine's own validation and rendering make them
// (activities.LSM), so a preview says what the write would do.

// InstancePreview is what the dry-run of an instance's attributes found:
// the validation of the proposed set, as the lifecycle's would run, and,
// when it passed, the resources the instance's export would hold.
type InstancePreview struct {
	// OK: the validation passed; Errors are the compile's errors (some
	// may be other instances', which do not fail it).
	OK     bool
	Errors json.RawMessage
	// ReadOnly are the r attributes the model computed (OK only).
	ReadOnly map[string]any
	// Resources are the instance's set as the export would make it
	// (OK only); RenderErrors, when the export would fail.
	Resources    []intent.Resource
	RenderErrors json.RawMessage
}

// ModelPreview is a page of the preview of a model change over the live
// instances.
type ModelPreview struct {
	// Hash is the previewed archive's SHA-256, hex.
	Hash string
	// BaseVersion is the version the sets were compared with.
	BaseVersion int64
	// Instances are the page's instances whose state exports resources,
	// by entity and id.
	Instances []FleetInstance
	// Skipped counts the page's live instances whose state exports
	// nothing.
	Skipped int
	// Next is the cursor after the page's last instance when more follow.
	Next string
}

// FleetInstance is one instance's outcome in a ModelPreview: Failed with
// the compile's Errors (the new model refuses its attributes, or its
// export would fail), else the comparison of its set.
type FleetInstance struct {
	Instance   Instance
	Failed     bool
	Errors     json.RawMessage
	Comparison SetComparison
}

// ModelFailure is a previewed model that fails by itself, whoever's
// attributes it is given: Message is its compile's errors.
type ModelFailure struct{ Message string }

func (e *ModelFailure) Error() string { return e.Message }

// SetComparison is what a resource set's proposed resources would change
// against the set in the base version: ids sorted, Modified with each
// changed attribute (as version diffs give them).
type SetComparison struct {
	Added     []string
	Removed   []string
	Modified  []intent.ModifiedResource
	Unchanged int
}

// Changed reports whether anything would change.
func (c SetComparison) Changed() bool {
	return len(c.Added)+len(c.Removed)+len(c.Modified) > 0
}

// PreviewCursor is the cursor of an instance in a ModelPreview's order
// (by entity, then id): a page goes on after it.
func PreviewCursor(entity, id string) string { return entity + "/" + id }
