package lsm

// Entity is a service entity as the model defines it: the catalog's
// entry, without the server's bookkeeping.
type Entity struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Identity names the attribute that is unique among the live
	// instances, if the entity has one.
	Identity string `json:"identity,omitempty"`
	// Attributes are the parameter's fields, in declaration order.
	Attributes []AttributeSpec `json:"attributes"`
	Lifecycle  Lifecycle       `json:"lifecycle"`
	// Version is the entity's version (1 when the model does not say):
	// a catalog keeps every version live instances use, and an instance
	// names its own (docs/lsm.md, "Entity versions").
	Version int `json:"version,omitempty"`
}

// EntityVersion is v, or 1 for 0 (a version written before entities had
// versions).
func EntityVersion(v int) int { return max(v, 1) }
