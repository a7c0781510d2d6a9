package lsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The rules of an order (docs/api.md, "Orders"): CheckOrder checks every
// item of POST /lsm/v1/orders as the single-instance routes check their
// requests, against a snapshot of the catalog and the inventory the
// caller reads first (OrderReads says what to read). It is pure: no I/O,
// no clock, no randomness (the ids of new instances come from newID).

// MaxOrderItems bounds the items of one order.
const MaxOrderItems = 10000

// OrderItemID is what an item's id may be: it names the item in paths,
// messages and the per-item Idempotency-Key of its instance request.
var OrderItemID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$`)

// OrderRequest is the body of POST /lsm/v1/orders.
type OrderRequest struct {
	Policy string             `json:"policy"`
	Items  []OrderItemRequest `json:"items"`
}

// OrderItemRequest is one item of an order, as the client sends it.
type OrderItemRequest struct {
	ID            string         `json:"id"`
	Operation     string         `json:"operation"`
	ServiceEntity string         `json:"service_entity"`
	Instance      string         `json:"instance,omitempty"`
	Attributes    map[string]any `json:"attributes,omitempty"`
	Edit          []Edit         `json:"edit,omitempty"`
	// InitialState is the state a create's instance begins in: one of
	// its lifecycle's initial states (default: its start state), as
	// POST /lsm/v1/service_inventory/{entity} takes it.
	InitialState string   `json:"initial_state,omitempty"`
	DependsOn    []string `json:"depends_on,omitempty"`
}

// NewOrderItem is one checked item of an order, ready to write
// (store.NewOrderItem).
type NewOrderItem struct {
	ItemID     string
	Operation  string
	Entity     string
	InstanceID string
	// Deps are the positions of the items it depends on (each once, in
	// the order depends_on names them).
	Deps []int
	// Spec is the item as the client sent it (OrderItemRequest as JSON).
	Spec json.RawMessage
}

// FieldProblem is one fault of a request: Field is a JSON pointer into
// it (RFC 6901), Detail says what is wrong (the REST layer's field
// error).
type FieldProblem struct {
	Field  string
	Detail string
}

// InstanceKey names an instance of an entity by Ref, its id or its
// identity.
type InstanceKey struct {
	Entity string
	Ref    string
}

// VersionKey names a version of an entity.
type VersionKey struct {
	Name    string
	Version int
}

// OrderInventory is what CheckOrder reads of the environment: a snapshot
// the caller takes before it calls (OrderReads lists the keys). A key
// the snapshot lacks is a thing the environment does not have.
type OrderInventory struct {
	// Entities are the catalog's entities, by name, at their current
	// version.
	Entities map[string]Entity
	// EntityVersions are the versions of entities that live instances
	// are of, by name and version.
	EntityVersions map[VersionKey]Entity
	// Instances are the instances by entity and the id or identity a
	// request names, as the store's GetInstance finds them: by an id
	// (a UUID) an instance deleted or not, by an identity a live one.
	Instances map[InstanceKey]Instance
	// Live holds the references (entity, id or identity) that name a
	// live instance: not deleted, in a state that does not purge (as
	// the store's ResolveReferences finds them).
	Live map[InstanceKey]bool
}

// OrderReads are the keys of an OrderInventory that CheckOrder looks
// up, each once, in the order it first looks them up.
type OrderReads struct {
	Entities       []string
	EntityVersions []VersionKey
	Instances      []InstanceKey
	References     []InstanceKey
}

// Empty reports whether r reads nothing.
func (r OrderReads) Empty() bool {
	return len(r.Entities) == 0 && len(r.EntityVersions) == 0 && len(r.Instances) == 0 && len(r.References) == 0
}

// OrderLookups returns the keys CheckOrder(req, inv, ...) looks up.
// What it looks up depends on what it found (an update's entity version
// is known once its instance is), so a caller reads the keys, adds
// what it read to inv and asks again, until every key it is given has
// been read (at most four rounds: entities; instances and identities;
// versions and references; references of updates of older versions).
func OrderLookups(req OrderRequest, inv OrderInventory) OrderReads {
	c := orderCheck{inv: inv, reads: &orderReads{seen: map[any]bool{}}}
	c.run(req, func() string { return "" })
	return c.reads.OrderReads
}

// CheckOrder checks an order against inv and returns its items ready to
// write (newID gives each create its instance's id, in item order), or
// every problem found and no items. The problems come in three groups,
// each in item order: the items' own problems, their references that
// name no live instance, then their dependencies.
func CheckOrder(req OrderRequest, inv OrderInventory, newID func() string) ([]NewOrderItem, []FieldProblem) {
	c := orderCheck{inv: inv}
	items := c.run(req, newID)
	if len(c.problems) > 0 {
		return nil, c.problems
	}
	return items, nil
}

// orderReads records the lookups of a check (OrderLookups).
type orderReads struct {
	OrderReads
	seen map[any]bool
}

type orderCheck struct {
	inv OrderInventory
	// reads, when set, records the lookups (and items are not encoded).
	reads    *orderReads
	problems []FieldProblem
}

func (c *orderCheck) bad(field, format string, args ...any) {
	c.problems = append(c.problems, FieldProblem{Field: field, Detail: fmt.Sprintf(format, args...)})
}

func (c *orderCheck) attributeProblems(prefix string, problems []AttributeProblem) {
	for _, pr := range problems {
		c.problems = append(c.problems, FieldProblem{Field: pr.FieldUnder(prefix), Detail: pr.String()})
	}
}

func (c *orderCheck) read(key any) bool {
	if c.reads == nil || c.reads.seen[key] {
		return false
	}
	c.reads.seen[key] = true
	return true
}

func (c *orderCheck) entity(name string) (Entity, bool) {
	if c.read(name) {
		c.reads.Entities = append(c.reads.Entities, name)
	}
	e, ok := c.inv.Entities[name]
	return e, ok
}

func (c *orderCheck) entityAt(name string, version int) (Entity, bool) {
	k := VersionKey{name, version}
	if c.read(k) {
		c.reads.EntityVersions = append(c.reads.EntityVersions, k)
	}
	e, ok := c.inv.EntityVersions[k]
	return e, ok
}

func (c *orderCheck) instance(entity, ref string) (Instance, bool) {
	k := InstanceKey{entity, ref}
	if c.read(k) {
		c.reads.Instances = append(c.reads.Instances, k)
	}
	inst, ok := c.inv.Instances[k]
	return inst, ok
}

// referenceKey is a reference's key in the seen set (distinct from an
// instance's).
type referenceKey InstanceKey

func (c *orderCheck) live(entity, value string) bool {
	k := InstanceKey{entity, value}
	if c.read(referenceKey(k)) {
		c.reads.References = append(c.reads.References, k)
	}
	return c.inv.Live[k]
}

// orderRefCheck is an item's attributes whose references to check, once
// every create of the order is known.
type orderRefCheck struct {
	at    string
	specs []AttributeSpec
	attrs map[string]any
}

func (c *orderCheck) run(req OrderRequest, newID func() string) []NewOrderItem {
	switch req.Policy {
	case OrderAllOrNothing, OrderBestEffort:
	case "":
		c.bad("/policy", `required: "all_or_nothing" or "best_effort"`)
	default:
		c.bad("/policy", `must be "all_or_nothing" or "best_effort"`)
	}
	switch n := len(req.Items); {
	case n == 0:
		c.bad("/items", "required: at least one item")
	case n > MaxOrderItems:
		c.bad("/items", "an order holds at most %d items, not %d", MaxOrderItems, n)
	}
	if len(c.problems) > 0 {
		return nil
	}
	ids := make(map[string]int, len(req.Items))
	identities := map[string]int{} // entity NUL identity → item creating it
	instances := map[string]int{}  // instance id → item on it
	var refChecks []orderRefCheck  // after the loop: references may name the order's creates
	out := make([]NewOrderItem, len(req.Items))
	for i, it := range req.Items {
		at := "/items/" + strconv.Itoa(i)
		switch j, dup := ids[it.ID]; {
		case it.ID == "":
			c.bad(at+"/id", "required: the item's id, unique in the order")
		case !OrderItemID.MatchString(it.ID):
			c.bad(at+"/id", "must be 1 to 100 letters, digits and . _ : / -, starting with a letter or digit")
		case dup:
			c.bad(at+"/id", "duplicate: item %d has the id %q", j, it.ID)
		default:
			ids[it.ID] = i
		}
		out[i] = NewOrderItem{ItemID: it.ID, Operation: it.Operation, Entity: it.ServiceEntity}
		if c.reads == nil {
			spec, err := json.Marshal(it)
			if err != nil {
				// Not from a decoded body: its values are JSON.
				c.bad(at, "cannot be encoded as JSON: %v", err)
			}
			out[i].Spec = spec
		}
		switch it.Operation {
		case OpCreate, OpUpdate, OpDelete:
		case "":
			c.bad(at+"/operation", `required: "create", "update" or "delete"`)
			continue
		default:
			c.bad(at+"/operation", `must be "create", "update" or "delete"`)
			continue
		}
		if it.ServiceEntity == "" {
			c.bad(at+"/service_entity", "required: the service entity")
			continue
		}
		ent, ok := c.entity(it.ServiceEntity)
		if !ok {
			c.bad(at+"/service_entity", "the catalog has no service entity %q", it.ServiceEntity)
			continue
		}
		if it.Operation == OpCreate {
			if it.Instance != "" {
				c.bad(at+"/instance", "a create names no instance: the order gives the new one its id")
			}
			if it.Edit != nil {
				c.bad(at+"/edit", "a create takes attributes, not edits")
			}
			if it.InitialState != "" {
				if initial := ent.Lifecycle.Initial(); !slices.Contains(initial, it.InitialState) {
					for _, d := range InitialStateDetails(it.InitialState, initial) {
						c.bad(at+"/initial_state", "%s", d)
					}
				}
			}
			var ae *AttributeError
			if err := CheckCreate(ent.Attributes, it.Attributes); errors.As(err, &ae) {
				c.attributeProblems(at+"/attributes/", ae.Problems)
			}
			refChecks = append(refChecks, orderRefCheck{at: at, specs: ent.Attributes, attrs: it.Attributes})
			out[i].InstanceID = newID()
			if ident := Identity(ent.Identity, WithDefaults(ent.Attributes, it.Attributes)); ident != "" {
				field := at + "/attributes/" + EscapePointer(ent.Identity)
				k := ent.Name + "\x00" + ident
				if j, ok := identities[k]; ok {
					c.bad(field, "item %d creates the %s with identity %q too", j, ent.Name, ident)
				} else if _, ok := c.instance(ent.Name, ident); ok {
					c.bad(field, "a live %s has the identity %q", ent.Name, ident)
				}
				identities[k] = i
			}
			continue
		}
		if it.InitialState != "" {
			c.bad(at+"/initial_state", "only a create begins in an initial state: an update or a delete takes none")
		}
		// An update or a delete names a live instance, by id or identity.
		if it.Instance == "" {
			c.bad(at+"/instance", "required: the instance's id or identity")
			continue
		}
		inst, ok := c.instance(ent.Name, it.Instance)
		switch {
		case !ok:
			c.bad(at+"/instance", "the inventory has no %s %q", ent.Name, it.Instance)
			continue
		case inst.Deleted:
			c.bad(at+"/instance", "%s %s is %s: it takes no more requests", ent.Name, inst.ID, inst.State)
			continue
		}
		if j, ok := instances[inst.ID]; ok {
			c.bad(at+"/instance", "item %d is on the same instance: an order has one item per instance", j)
			continue
		}
		instances[inst.ID] = i
		out[i].InstanceID = inst.ID
		if it.Operation == OpDelete {
			if it.Attributes != nil || it.Edit != nil {
				c.bad(at, "a delete takes no attributes or edits")
			}
			continue
		}
		current := inst.Current()
		var next map[string]any
		switch {
		case len(it.Attributes) > 0 && len(it.Edit) > 0:
			c.bad(at, "an update takes attributes (as PATCH /lsm/v1) or edit (as PATCH /lsm/v2), not both")
			continue
		case len(it.Attributes) > 0:
			next = MergeAttributes(current, it.Attributes)
		case len(it.Edit) > 0:
			var err error
			if next, err = ApplyEdits(current, it.Edit); err != nil {
				c.editProblem(at+"/edit", err)
				continue
			}
		default:
			c.bad(at+"/attributes", "required: the attributes to change, by name (or edit, a list of dict-path edits)")
			continue
		}
		specs := ent.Attributes
		if v := inst.CurrentVersion(); v != EntityVersion(ent.Version) {
			// An instance of an older version: its version's attributes.
			old, ok := c.entityAt(ent.Name, v)
			if !ok {
				// Not from the store: it keeps every version an instance is of.
				c.bad(at+"/instance", "%s %s is of version %d of its entity, which the catalog does not have", ent.Name, inst.ID, v)
				continue
			}
			specs = old.Attributes
		}
		var ae *AttributeError
		if err := CheckUpdate(specs, current, next); errors.As(err, &ae) {
			c.attributeProblems(at+"/attributes/", ae.Problems)
		}
		refChecks = append(refChecks, orderRefCheck{at: at, specs: ent.Attributes, attrs: ChangedAttributes(current, next)})
	}
	// References name a live instance, or one a create of the order
	// makes (by its identity: such an item should depend on that
	// create, or the store refuses it if it runs first).
	for _, rc := range refChecks {
		var problems []AttributeProblem
		for _, r := range References(rc.specs, rc.attrs) {
			if _, created := identities[r.Entity+"\x00"+r.Value]; !created && !c.live(r.Entity, r.Value) {
				problems = append(problems, NoSuchInstance(r))
			}
		}
		c.attributeProblems(rc.at+"/attributes/", problems)
	}
	// Dependencies, once every id is known.
	deps := make([][]int, len(req.Items))
	depsOK := true
	for i, it := range req.Items {
		for k, d := range it.DependsOn {
			field := fmt.Sprintf("/items/%d/depends_on/%d", i, k)
			j, ok := ids[d]
			switch {
			case !ok:
				c.bad(field, "the order has no item %q", d)
				depsOK = false
			case j == i:
				c.bad(field, "an item cannot depend on itself")
				depsOK = false
			case !slices.Contains(deps[i], j):
				deps[i] = append(deps[i], j)
			}
		}
		out[i].Deps = deps[i]
	}
	if depsOK {
		if cycle := FindCycle(deps); cycle != nil {
			names := make([]string, len(cycle))
			for k, p := range cycle {
				names[k] = req.Items[p].ID
			}
			first, next := cycle[0], req.Items[cycle[1]].ID
			k := 0
			for n, d := range req.Items[first].DependsOn {
				if d == next {
					k = n
					break
				}
			}
			c.bad(fmt.Sprintf("/items/%d/depends_on/%d", first, k), "a dependency cycle: %s", strings.Join(names, " → "))
		}
	}
	return out
}

// editProblem adds the problem of ApplyEdits' error, at the edit list's
// pointer at.
func (c *orderCheck) editProblem(at string, err error) {
	var ee *EditError
	if !errors.As(err, &ee) {
		// ApplyEdits fails with an *EditError only.
		c.bad(at, "%v", err)
		return
	}
	field := at
	if ee.Index >= 0 {
		field = at + "/" + strconv.Itoa(ee.Index) + ee.Field
	}
	c.bad(field, "%s", ee.Detail)
}

// InitialStateDetails are the details of the problem of a create that
// names target, which is not one of initial (the lifecycle's initial
// states, Lifecycle.Initial): that it is not, then each state allowed.
// A single create's 422 and an order's item say the same.
func InitialStateDetails(target string, initial []string) []string {
	out := []string{fmt.Sprintf("%q is not an initial state of the lifecycle", target)}
	for _, st := range initial {
		out = append(out, fmt.Sprintf("allowed: %q", st))
	}
	return out
}

// NoSuchInstance is the attribute problem of a reference that names no
// live instance.
func NoSuchInstance(r Reference) AttributeProblem {
	return AttributeProblem{Attribute: r.Attribute, Reason: ReasonNoSuchInstance,
		Detail: fmt.Sprintf("names no live %s instance (%q): a reference names one by id or identity", r.Entity, r.Value)}
}

// ChangedAttributes is what next sets differently from current: the
// attributes an edit touched (only those need their references
// checked; the others were checked when they were set).
func ChangedAttributes(current, next map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range next {
		if old, ok := current[k]; !ok || fmt.Sprint(old) != fmt.Sprint(v) {
			out[k] = v
		}
	}
	return out
}

// FieldUnder is the JSON pointer of the problem's attribute under prefix,
// the pointer of the attributes (ending in "/"): a problem inside an
// embedded entity has its own Pointer below the attributes.
func (p AttributeProblem) FieldUnder(prefix string) string {
	if p.Pointer != "" {
		return strings.TrimSuffix(prefix, "/") + p.Pointer
	}
	return prefix + EscapePointer(p.Attribute)
}

// EscapePointer escapes a JSON pointer token (RFC 6901).
func EscapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
