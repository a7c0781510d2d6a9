package intent

// ModifiedResource is one resource whose intent differs between two
// versions.
type ModifiedResource struct {
	ID string `json:"id"`
	// Changes maps each attribute that differs to its values in From and To
	// (nil where the attribute is absent on that side), and, when they
	// differ, "requires" (sorted id lists), "resource_set" and the flags "purged",
	// "send_event", "receive_events", "report_only", "undefined" and
	// "unmanaged". An
	// attribute named like one of those keys is shadowed by it when both
	// differ.
	Changes map[string]Change `json:"changes"`
}

// Change is one value that differs between two versions.
type Change struct {
	From any `json:"from"`
	To   any `json:"to"`
}
