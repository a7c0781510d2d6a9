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
}
