// Package compiler turns an intend project (a CUE module with intend.yaml)
// into a desired-state version: the export the server stores.
//
// A model has two sources of resources:
//
//   - resources: a struct (or list) of resources, nested as deep as the
//     model likes. A resource is any struct with an id field; the standard
//     library's types (intend.dev/std/fs, …) compute it.
//
//   - refinements: each a definition with a parameter (a high-level
//     entity's attributes) and an output (its resources), and its
//     instances:
//
//     refinements: site: {
//     using: #Site
//     instances: blog: {title: "Blog"}
//     }
//
//   - services: each a service entity (intend.dev/std/lsm's #Entity): a
//     refinement whose instances come from the service inventory
//     (Options.Instances), never from the model. Besides their
//     resources, a compile extracts every entity for the catalog
//     (Result.Services): its attributes, with modifiers (@lsm(r|rw|rw+))
//     and a JSON Schema made from their CUE constraints, and its
//     lifecycle, checked by internal/lsm.
//
// The module is evaluated once for its plain resources and the refinement
// definitions; then every instance is evaluated on its own
// (using & {parameter: instance}) and its output decoded to Go, so memory
// is that of one instance however many there are (brief §7). Go merges the
// outputs, refuses duplicate ids and requires that name nothing, and takes
// the ids of the resources a resource's requires refers to.
//
// A resource whose attributes use a fact not known yet (facts[id].name) is
// exported undefined; every other problem is an Error, and a compile that
// has any exports nothing.
package compiler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/token"
	"cuelang.org/go/mod/modfile"

	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/project"
)

// Options say what to compile.
type Options struct {
	// Dir is the project directory (with intend.yaml).
	Dir string
	// Facts are the facts known so far, by resource id and name, offered
	// to the model as facts[id][name] when it declares facts.
	Facts map[string]map[string]json.RawMessage
	// Instances adds refinement instances from outside the model: by
	// refinement or service entity, by instance name (a service
	// instance's id), the parameter as JSON. They are the only instances
	// of a service entity (the service inventory's).
	Instances map[string]map[string]json.RawMessage
	// InstanceVersions are the entity versions of service instances of
	// Instances, by entity and instance; an instance without one is of
	// its entity's latest version (versions.go).
	InstanceVersions map[string]map[string]int
	// Related is, by service entity and instance id, the value of the
	// field related of an instance whose attributes reference other
	// instances (@lsm(rw, ref=site)): a JSON object with, per reference
	// attribute, the referenced instance's active attributes (a list of
	// them for a list of references). See references.go.
	Related map[string]map[string]json.RawMessage
	// Cache, with SourceKey (what identifies the model: the model
	// source's hash), reuses the outputs of service instances whose
	// attributes, entity and facts did not change since an earlier
	// compile of the same model. Without a SourceKey nothing is cached.
	Cache     *Cache
	SourceKey string
	// Focus, when set, keeps only what concerns one service instance in
	// the Result: the resources of its set and its parameters. The compile
	// still evaluates and checks every instance (a duplicate resource id
	// across instances is still an error); a validation reads nothing
	// else, and with 10,000 live instances the others' 30,000 resources
	// would travel back from a compile's worker for nothing.
	Focus *Focus
}

// Focus names the service instance a focused compile is for.
type Focus struct {
	Entity   string `json:"entity"`
	Instance string `json:"instance"`
}

// resources keeps the resources of f's set, before they are sorted: a
// validation among 10,000 instances sorted 30,000 resources for nothing.
func (f *Focus) resources(rs []Resource) []Resource {
	set := f.Entity + "/" + f.Instance
	var kept []Resource
	for _, r := range rs {
		if r.ResourceSet == set {
			kept = append(kept, r)
		}
	}
	return kept
}

// parameters keeps f's instance's parameters.
func (f *Focus) parameters(ps map[string]map[string]json.RawMessage) map[string]map[string]json.RawMessage {
	if p, ok := ps[f.Entity][f.Instance]; ok {
		return map[string]map[string]json.RawMessage{f.Entity: {f.Instance: p}}
	}
	return nil
}

// Resource is one resource of a compiled version, in export form.
type Resource struct {
	ID            string                     `json:"id"`
	Attributes    map[string]json.RawMessage `json:"attributes"`
	Requires      []string                   `json:"requires"`
	Purged        bool                       `json:"purged,omitempty"`
	SendEvent     bool                       `json:"send_event,omitempty"`
	ReceiveEvents bool                       `json:"receive_events,omitempty"`
	ReportOnly    bool                       `json:"report_only,omitempty"`
	Undefined     bool                       `json:"undefined,omitempty"`
	ResourceSet   string                     `json:"resource_set,omitempty"`

	// Origin is where the model produced it: its CUE path, prefixed by the
	// refinement instance if it came from one.
	Origin string `json:"-"`
	pos    token.Pos
	// at is pos resolved, in place of pos in a cached copy.
	at *Position
}

// where is where the model produced r (nil: unknown).
func (c *compilation) where(r *Resource) *Position {
	if r.pos.IsValid() {
		p := c.errs.position(r.pos)
		return &p
	}
	return r.at
}

// Result is a successful compile.
type Result struct {
	Project project.Project
	// Resources are sorted by id.
	Resources []Resource
	// Instances is how many refinement instances were evaluated.
	Instances int
	// Undefined counts the resources exported undefined.
	Undefined int
	// Services are the model's service entities, sorted by name, each
	// at its latest version.
	Services []Service
	// PreviousServices are the older versions the model keeps of its
	// entities (an entity's previous), by name and version.
	PreviousServices []Service
	// Parameters are the evaluated parameters of the instances given in
	// Options.Instances that compiled, by refinement or entity and
	// instance: the attributes given, with what the model adds (defaults,
	// fields it computes, such as an entity's r attributes), as JSON.
	Parameters map[string]map[string]json.RawMessage
	// Took is how long the compile took, loading included.
	Took time.Duration
	// DeclaresFacts: the model declares `facts`, so Options.Facts can
	// change what it compiles to. A caller that compiles the same model
	// source again may leave the facts out when it does not.
	DeclaresFacts bool
}

// Service is a service entity of the model, as the catalog registers it.
type Service = lsm.Entity

// Export is the version document PUT .../versions takes.
func (r *Result) Export() []byte {
	rs := r.Resources
	if rs == nil {
		rs = []Resource{} // a model without resources exports an empty version
	}
	b, err := json.Marshal(struct {
		Resources []Resource `json:"resources"`
	}{rs})
	if err != nil {
		panic(err) // every part is already JSON
	}
	return b
}

// Compile loads and evaluates the project in opts.Dir. A failed compile
// returns Errors, every problem found at once.
func Compile(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	hint := 0
	if opts.Cache != nil {
		hint = int(opts.Cache.outputs.Load())
	}
	c, proj, v, err := loadModel(ctx, opts, hint)
	if err != nil || c == nil {
		return nil, err
	}
	if _, err := v.Fields(); err != nil {
		c.errs.addCUE("", err)
		return nil, c.errs.err()
	}
	declared := v.LookupPath(cue.MakePath(cue.Str("facts"))).Exists()
	if declared && len(opts.Facts) > 0 {
		facts, err := json.Marshal(opts.Facts)
		if err != nil {
			return nil, fmt.Errorf("facts: %w", err)
		}
		v = v.FillPath(cue.MakePath(cue.Str("facts")), c.cue.CompileBytes(facts))
	}
	if opts.Cache != nil && opts.SourceKey != "" {
		// A model that does not declare facts cannot read them: the
		// facts are then no part of the keys, so that the deploys of
		// other instances (which report facts) do not void the cache.
		if c.keys, err = newCacheKeyer(opts.SourceKey, declared, opts.Facts); err != nil {
			return nil, fmt.Errorf("facts: %w", err)
		}
	}
	// Conflicts anywhere in the model (with the facts), also outside the resources (the
	// walk below adds what is missing, not what is wrong).
	if err := v.Validate(); err != nil {
		c.errs.addCUE("", err)
	}
	if rs := v.LookupPath(cue.MakePath(cue.Str("resources"))); rs.Exists() {
		(&walker{c: c}).walk(rs, "resources")
	}
	refs := v.LookupPath(cue.MakePath(cue.Str("refinements")))
	if err := c.refinements(refs); err != nil {
		return nil, err
	}
	svcs := v.LookupPath(cue.MakePath(cue.Str("services")))
	if err := c.services(svcs, refs); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(mapKeys(opts.Instances)) {
		if !refs.LookupPath(cue.MakePath(cue.Str(name))).Exists() && !svcs.LookupPath(cue.MakePath(cue.Str(name))).Exists() {
			c.errs.addf("", "refinements."+name, token.NoPos, "instances were given for refinement %q, which the model does not define (nor a service of that name)", name)
		}
	}
	c.check()
	if err := c.errs.err(); err != nil {
		return nil, err
	}
	if opts.Cache != nil {
		opts.Cache.outputs.Store(int64(len(c.out)))
	}
	if opts.Focus != nil {
		c.out = opts.Focus.resources(c.out)
		c.params = opts.Focus.parameters(c.params)
	}
	slices.SortFunc(c.out, func(a, b Resource) int { return strings.Compare(a.ID, b.ID) })
	OrderRemovals(c.out)
	slices.SortFunc(c.svcs, func(a, b Service) int { return strings.Compare(a.Name, b.Name) })
	res := &Result{Project: proj, Resources: c.out, Instances: c.instances, Services: c.svcs, PreviousServices: c.prev, Parameters: c.params,
		Took: time.Since(start), DeclaresFacts: declared}
	for _, r := range c.out {
		if r.Undefined {
			res.Undefined++
		}
	}
	return res, nil
}

// loadModel loads the project at opts.Dir and builds its model: the
// compilation that goes on with it (its tables sized for hint
// resources), the project and the model's value. A model that does not
// load returns its errors; c is nil then.
func loadModel(ctx context.Context, opts Options, hint int) (c *compilation, proj project.Project, v cue.Value, err error) {
	root, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, proj, v, err
	}
	if proj, err = project.Load(root); err != nil {
		return nil, proj, v, err
	}
	c = &compilation{
		ctx:   ctx,
		opts:  opts,
		errs:  &errorList{root: root, stdAt: filepath.Join(root, "cue.mod", "pkg", filepath.FromSlash(StdModule))},
		files: map[string]*ast.File{},
		ids:   make(map[string]int, hint),
		out:   make([]Resource, 0, hint),
	}
	inst, err := c.load(root, proj)
	if err != nil {
		return nil, proj, v, err
	}
	if inst == nil {
		return nil, proj, v, c.errs.err()
	}
	c.cue = cuecontext.New()
	return c, proj, c.cue.BuildInstance(inst), nil
}

type compilation struct {
	ctx       context.Context
	keys      *cacheKeyer // nil: no cache
	cue       *cue.Context
	opts      Options
	errs      *errorList
	files     map[string]*ast.File       // by file name, for fact lookups
	std       map[string]*build.Instance // standard-library packages the model imports, by import path
	allowed   map[string]map[string]bool // attributes of standard types, by type
	out       []Resource
	ids       map[string]int // index in out
	instances int
	svcs      []Service
	prev      []Service // older versions of svcs (versions.go)
	params    map[string]map[string]json.RawMessage
	// entityNames and refs: the entities, and the reference attributes
	// whose entity must be one of them (references.go).
	entityNames []string
	refs        []pendingRef
}

// load finds the entry package with the standard library overlaid. A nil
// instance with a nil error means the errors are in c.errs.
func (c *compilation) load(root string, proj project.Project) (*build.Instance, error) {
	ov := map[string]load.Source{}
	if err := stdOverlay(root, ov); err != nil {
		return nil, err
	}
	modFile := filepath.Join(root, "cue.mod", "module.cue")
	if file, err := checkModule(root); err != nil {
		c.errs.add(&Error{Message: err.Error(), Positions: []Position{{File: file}}})
		return nil, nil
	}
	if _, err := os.Stat(modFile); os.IsNotExist(err) {
		// A project need not be a CUE module of its own making: give it
		// one, so that the standard library has a cue.mod to live in.
		ov[modFile] = load.FromString(fmt.Sprintf("module: %q\nlanguage: version: %q\n",
			"intend.local/"+proj.Name, "v0.12.0"))
	}
	entry := "./" + strings.TrimPrefix(proj.Entry, "./")
	insts := load.Instances([]string{entry}, &load.Config{Dir: root, Overlay: ov})
	if len(insts) != 1 {
		return nil, fmt.Errorf("entry %q: loads %d CUE packages, want one", proj.Entry, len(insts))
	}
	inst := insts[0]
	if inst.Err != nil {
		c.errs.addCUE("", inst.Err)
		return nil, nil
	}
	c.std = map[string]*build.Instance{}
	var index func(*build.Instance)
	index = func(i *build.Instance) {
		if strings.HasPrefix(i.ImportPath, StdModule+"/") {
			c.std[i.ImportPath] = i
		}
		for _, f := range i.Files {
			c.files[f.Filename] = f
		}
		for _, imp := range i.Imports {
			index(imp)
		}
	}
	index(inst)
	return inst, nil
}

// checkModule refuses a CUE module that would make the compiler read
// outside the project or fetch from a registry: dependencies in
// cue.mod/module.cue (a registry fetch, or replaceWith a directory of the
// host) and cue.mod/local-module.cue. An intend model is self-contained:
// intend's standard library is built in, and other CUE packages are
// vendored under cue.mod/pkg.
func checkModule(root string) (string, error) {
	if _, err := os.Lstat(filepath.Join(root, "cue.mod", "local-module.cue")); err == nil {
		return "cue.mod/local-module.cue", errors.New("cue.mod/local-module.cue: intend compiles a model from its own files only; " +
			"remove it and vendor the modules it names under cue.mod/pkg")
	}
	const mod = "cue.mod/module.cue"
	data, err := os.ReadFile(filepath.Join(root, "cue.mod", "module.cue"))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return mod, err
	}
	f, err := modfile.ParseNonStrict(data, mod)
	if err != nil {
		return mod, fmt.Errorf("cue.mod/module.cue: %w", err)
	}
	if len(f.Deps) > 0 {
		names := slices.Sorted(maps.Keys(f.Deps))
		return mod, fmt.Errorf("cue.mod/module.cue: deps %s: intend compiles a model offline from its own files only "+
			"(no registry, no replaceWith); vendor those modules under cue.mod/pkg", strings.Join(names, ", "))
	}
	return "", nil
}

// refinements evaluates every instance of every refinement on its own.
func (c *compilation) refinements(refs cue.Value) error {
	if !refs.Exists() {
		return nil
	}
	it, err := refs.Fields()
	if err != nil {
		c.errs.addCUE("", err)
		return nil
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		ref := it.Value()
		path := "refinements." + it.Selector().String()
		using := ref.LookupPath(cue.MakePath(cue.Str("using")))
		if !using.Exists() {
			c.errs.addf("", path, ref.Pos(), "a refinement needs using: the definition with a parameter and an output")
			continue
		}
		if !using.LookupPath(cue.MakePath(cue.Str("output"))).Exists() {
			c.errs.addf("", path+".using", using.Pos(), "the refinement's definition has no output")
			continue
		}
		each := func(inst string, param cue.Value) error {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			c.instance(name, path+".instances."+inst, inst, using, param)
			return nil
		}
		if insts := ref.LookupPath(cue.MakePath(cue.Str("instances"))); insts.Exists() {
			ii, err := insts.Fields()
			if err != nil {
				c.errs.addCUE("", err)
				continue
			}
			for ii.Next() {
				if err := each(ii.Selector().Unquoted(), ii.Value()); err != nil {
					return err
				}
			}
		}
		extra := c.opts.Instances[name]
		for _, inst := range slices.Sorted(mapKeys(extra)) {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			c.external(name, name, path+".instances."+inst, inst, using, extra[inst], nil)
		}
	}
	return nil
}

// external evaluates an instance given as JSON (Options.Instances),
// taking its resources from the cache when an earlier compile of the same
// model evaluated the same instance; check runs before an evaluation.
func (c *compilation) external(name, cacheName, label, id string, using cue.Value, raw json.RawMessage, check func()) {
	var key [32]byte
	rel := c.opts.Related[name][id]
	if c.keys != nil {
		key = c.keys.key(cacheName, id, keyed(raw, rel))
		if e, ok := c.opts.Cache.get(key); ok {
			c.instances++
			for _, r := range e.resources {
				c.add(r)
			}
			c.param(name, id, e.parameter)
			return
		}
	}
	errsBefore, outBefore := len(c.errs.list), len(c.out)
	if check != nil {
		check()
	}
	p := c.cue.CompileBytes(raw, cue.Filename(name+"/"+id+".json"))
	if err := p.Err(); err != nil {
		c.errs.addCUE(label, err)
		return
	}
	if using = c.withRelated(label, id, using, rel); !using.Exists() {
		return
	}
	param := c.instance(name, label, id, using, p)
	if len(c.errs.list) != errsBefore {
		return
	}
	c.param(name, id, param)
	if c.keys != nil {
		// The cached copies keep their positions resolved: a token.Pos
		// holds on to its file, and through it to the whole model this
		// compile parsed (120 KiB a compile, which took a compile
		// worker past its memory limit after some 10,000 compiles).
		rs := slices.Clone(c.out[outBefore:])
		for i := range rs {
			rs[i].at, rs[i].pos = c.where(&rs[i]), token.NoPos
		}
		c.opts.Cache.put(key, cacheEntry{resources: rs, parameter: param})
	}
}

// param records an external instance's evaluated parameter.
func (c *compilation) param(name, id string, param json.RawMessage) {
	if param == nil {
		return
	}
	if c.params == nil {
		c.params = map[string]map[string]json.RawMessage{}
	}
	if c.params[name] == nil {
		c.params[name] = map[string]json.RawMessage{}
	}
	c.params[name][id] = param
}

// instance evaluates one refinement instance: using & {parameter: param}.
// It returns the evaluated parameter as JSON (nil when it has errors).
func (c *compilation) instance(refinement, label, name string, using, param cue.Value) json.RawMessage {
	c.instances++
	v := using.FillPath(cue.MakePath(cue.Str("parameter")), param)
	pv := v.LookupPath(cue.MakePath(cue.Str("parameter")))
	if err := pv.Validate(cue.Concrete(true)); err != nil {
		c.errs.addCUE(label, err)
		return nil
	}
	w := &walker{c: c, instance: label, set: refinement + "/" + name}
	w.walk(v.LookupPath(cue.MakePath(cue.Str("output"))), "output")
	b, err := pv.MarshalJSON()
	if err != nil {
		return nil // concrete, so only an oddity of CUE's encoder: no parameters then
	}
	return b
}

// entityName is what a service entity may be called: its name is a
// segment of the inventory API's paths and of its workflows' ids, and the
// prefix of its instances' resource sets ("<entity>/<id>").
var entityName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// services extracts every service entity for the catalog and evaluates
// the instances Options.Instances gives for it, as refinement instances.
func (c *compilation) services(svcs, refs cue.Value) error {
	if !svcs.Exists() {
		return nil
	}
	it, err := svcs.Fields()
	if err != nil {
		c.errs.addCUE("", err)
		return nil
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		ent := it.Value()
		path := "services." + it.Selector().String()
		if !entityName.MatchString(name) {
			c.errs.addf("", path, c.modelPos(ent), "a service entity's name is a letter and then letters, digits, '_' or '-' (it is a segment of API paths and resource sets)")
			continue
		}
		if refs.LookupPath(cue.MakePath(cue.Str(name))).Exists() {
			c.errs.addf("", path, c.modelPos(ent), "refinements.%s has this name too: their instances and resource sets would mix", name)
			continue
		}
		svc, ok := c.service(name, path, ent)
		c.entityNames = append(c.entityNames, name)
		if svc.Attributes == nil {
			continue // no parameter or output to evaluate instances with
		}
		versions, good := c.versions(name, path, ent, &svc)
		if ok && good {
			c.svcs = append(c.svcs, svc)
		}
		extra := c.opts.Instances[name]
		for _, id := range slices.Sorted(mapKeys(extra)) {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			label := path + ".instances." + id
			v, ok := versions[svc.Version], true
			key := name
			if n := c.opts.InstanceVersions[name][id]; n > 0 && n != svc.Version {
				v, ok = versions[n]
				key = fmt.Sprintf("%s@%d", name, n) // another version's output: another cache entry
			}
			if !ok {
				c.errs.addf(label, "version", token.NoPos, "the model has no version %d of %s (its versions: %s)",
					c.opts.InstanceVersions[name][id], name, versionList(versions))
				continue
			}
			c.external(name, key, label, id, v.value, extra[id], func() { c.knownAttributes(label, v.svc.Attributes, extra[id]) })
		}
	}
	c.checkReferencedEntities()
	return nil
}

// knownAttributes refuses the attributes of an instance that its entity
// does not have: the parameter of #Entity is open, so CUE would take them.
func (c *compilation) knownAttributes(label string, specs []lsm.AttributeSpec, raw json.RawMessage) {
	var attrs map[string]json.RawMessage
	if json.Unmarshal(raw, &attrs) != nil {
		return // not an object: the evaluation says so
	}
	for _, name := range slices.Sorted(mapKeys(attrs)) {
		if !slices.ContainsFunc(specs, func(s lsm.AttributeSpec) bool { return s.Name == name }) {
			c.errs.addf(label, "parameter."+cue.MakePath(cue.Str(name)).String(), token.NoPos, "the entity has no attribute %q", name)
		}
	}
}

// service extracts one entity. ok is false when it has errors; the
// Service's Attributes are nil when it has no parameter or output to
// evaluate instances with, and non-nil otherwise.
func (c *compilation) service(name, path string, ent cue.Value) (svc Service, ok bool) {
	svc = Service{Name: name}
	param := ent.LookupPath(cue.MakePath(cue.Str("parameter")))
	if !param.Exists() || !ent.LookupPath(cue.MakePath(cue.Str("output"))).Exists() {
		c.errs.addf("", path, c.modelPos(ent), "a service entity needs a parameter and an output: declare it as lsm.#Entity & {...} (import \"%s/lsm\")", StdModule)
		return svc, false
	}
	ok = true
	if d := ent.LookupPath(cue.MakePath(cue.Str("description"))); d.Exists() {
		if s, err := d.String(); err != nil {
			c.errs.addf("", path+".description", c.modelPos(d), "must be a string: %v", err)
			ok = false
		} else {
			svc.Description = s
		}
	}
	svc.Attributes = []lsm.AttributeSpec{}
	it, err := param.Fields(cue.Optional(true))
	if err != nil {
		c.errs.addCUE("", err)
		return svc, false
	}
	for it.Next() {
		spec, good := c.attribute(path+".parameter", it.Selector(), it.Value())
		svc.Attributes = append(svc.Attributes, spec)
		ok = ok && good
	}
	if id := ent.LookupPath(cue.MakePath(cue.Str("identity"))); id.Exists() {
		s, err := id.String()
		switch {
		case err != nil:
			c.errs.addf("", path+".identity", c.modelPos(id), "must name a field of the parameter: %v", err)
			ok = false
		case !slices.ContainsFunc(svc.Attributes, func(a lsm.AttributeSpec) bool { return a.Name == s }):
			c.errs.addf("", path+".identity", c.modelPos(id), "names %q, which is not a field of the parameter", s)
			ok = false
		default:
			svc.Identity = s
		}
	}
	lc := ent.LookupPath(cue.MakePath(cue.Str("lifecycle")))
	if !lc.Exists() || !lc.LookupPath(cue.MakePath(cue.Str("name"))).IsConcrete() && !hasFields(lc.LookupPath(cue.MakePath(cue.Str("states")))) {
		// Only lsm.#Entity's declaration: say what is missing, not
		// that its name is incomplete.
		c.errs.addf("", path+".lifecycle", c.modelPos(ent), "a service entity needs a lifecycle: lsm.simple or one of your own")
		return svc, false
	}
	l, good := c.lifecycle(path+".lifecycle", lc)
	svc.Lifecycle = l
	return svc, ok && good
}

// hasFields reports whether v is a struct with at least one regular
// field.
func hasFields(v cue.Value) bool {
	it, err := v.Fields()
	return err == nil && it.Next()
}

// attribute extracts one field of an entity's parameter.
func (c *compilation) attribute(path string, sel cue.Selector, f cue.Value) (lsm.AttributeSpec, bool) {
	name := sel.Unquoted()
	fpath := path + "." + cue.MakePath(cue.Str(name)).String()
	spec := lsm.AttributeSpec{Name: name, Modifier: lsm.ReadWrite, Description: docText(f)}
	ok := true
	var mods []string
	for _, a := range f.Attributes(cue.FieldAttr) {
		if a.Name() == "lsm" {
			mods = append(mods, strings.TrimSpace(a.Contents()))
		}
	}
	for _, m := range mods[min(1, len(mods)):] {
		if m != mods[0] {
			c.errs.addf("", fpath, attributePos(f), "two modifiers, @lsm(%s) and @lsm(%s): give one", mods[0], m)
			ok = false
		}
	}
	if len(mods) > 0 {
		mod, ref, refOK := c.reference(fpath, f, mods[0])
		m, err := lsm.ParseModifier(mod)
		if err != nil {
			c.errs.addf("", fpath, attributePos(f), "@lsm(%s): a modifier is r (read-only, set by the server), rw (set at creation) or rw+ (updatable)", mods[0])
			ok = false
		}
		spec.Modifier, spec.References = m, ref
		ok = ok && refOK
	}
	def, hasDefault := fieldDefault(f)
	spec.Default = def
	spec.Required = isRequired(sel, hasDefault)
	schema := jsonSchema(f)
	if spec.Description != "" {
		schema["description"] = spec.Description
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic(err) // maps, strings, numbers and raw JSON from CUE
	}
	spec.Schema = b
	if spec.References != "" && !c.checkReference(fpath, f, spec, schema) {
		ok = false
	}
	return spec, ok
}

// attributePos is where a field's @lsm attribute is written, or the
// field's position when CUE does not tell.
func attributePos(f cue.Value) token.Pos {
	if fd, ok := f.Source().(*ast.Field); ok {
		for _, a := range fd.Attrs {
			if strings.HasPrefix(a.Text, "@lsm(") {
				return a.Pos()
			}
		}
	}
	return f.Pos()
}

// lifecycle decodes an entity's lifecycle and checks it, each problem an
// error at the transfer or state at fault.
func (c *compilation) lifecycle(path string, lc cue.Value) (lsm.Lifecycle, bool) {
	var l lsm.Lifecycle
	if err := lc.Validate(cue.Concrete(true)); err != nil {
		c.errs.addCUE("", err)
		return l, false
	}
	b, err := lc.MarshalJSON()
	if err != nil {
		c.errs.addCUE("", err)
		return l, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		c.errs.addf("", path, c.modelPos(lc), "is not an lsm.#Lifecycle: %v", err)
		return l, false
	}
	err = l.Check()
	var ce *lsm.CheckError
	if !errors.As(err, &ce) {
		return l, err == nil
	}
	for _, p := range ce.Problems {
		at, where := path, lc
		switch {
		case p.Transfer >= 0:
			at = fmt.Sprintf("%s.transfers[%d]", path, p.Transfer)
			where = lc.LookupPath(cue.MakePath(cue.Str("transfers"), cue.Index(p.Transfer)))
		case p.Rule == lsm.RuleStart:
			at = path + ".start"
			where = lc.LookupPath(cue.MakePath(cue.Str("start")))
		case p.State != "":
			sel := cue.Str(p.State)
			at = path + ".states." + cue.MakePath(sel).String()
			where = lc.LookupPath(cue.MakePath(cue.Str("states"), sel))
		}
		c.errs.addf("", at, c.modelPos(where), "%s", p.Message)
	}
	return l, false
}

// modelPos is where the model itself writes v: a value unified with a
// definition of the standard library (a transfer with lsm.#Transfer) has
// the definition's position first, which tells the model's author
// nothing.
func (c *compilation) modelPos(v cue.Value) token.Pos {
	pos := v.Pos()
	if op, args := v.Expr(); op == cue.AndOp {
		for _, a := range args {
			if p := a.Pos(); p.IsValid() && !strings.HasPrefix(p.Filename(), c.errs.stdAt+string(filepath.Separator)) {
				return p
			}
		}
	}
	return pos
}

// check refuses requires that name no resource of the version.
func (c *compilation) check() {
	for _, r := range c.out {
		for _, req := range r.Requires {
			if _, ok := c.ids[req]; !ok {
				c.errs.addfAt("", r.Origin, c.where(&r), "requires %s, which the model does not produce", req)
			}
		}
	}
}

// add records one resource, refusing a second one with the same id.
func (c *compilation) add(r Resource) {
	if i, ok := c.ids[r.ID]; ok {
		first := c.out[i]
		at := ""
		if p := c.where(&first); p != nil {
			at = " (" + p.String() + ")"
		}
		c.errs.addfAt("", r.Origin, c.where(&r), "duplicate id %s: %s%s produces it too", r.ID, first.Origin, at)
		return
	}
	c.ids[r.ID] = len(c.out)
	c.out = append(c.out, r)
}

// walker finds the resources in a value.
type walker struct {
	c        *compilation
	instance string // the refinement instance, or ""
	set      string // the default resource set
}

func (w *walker) origin(path string) string {
	if w.instance == "" {
		return path
	}
	return w.instance + ": " + path
}

func (w *walker) walk(v cue.Value, path string) {
	// A struct or list with an error inside is bottom, but still has its
	// fields or elements: walk them, to report every error, not the first.
	kind := v.IncompleteKind()
	if kind == cue.BottomKind {
		if _, err := v.Fields(); err == nil {
			kind = cue.StructKind
		} else if _, err := v.List(); err == nil {
			kind = cue.ListKind
		} else {
			w.c.errs.addCUE(w.instance, v.Err())
			return
		}
	}
	switch kind {
	case cue.StructKind:
		if v.LookupPath(cue.MakePath(cue.Str("id"))).Exists() {
			w.resource(v, path)
			return
		}
		it, err := v.Fields()
		if err != nil {
			w.c.errs.addCUE(w.instance, err)
			return
		}
		for it.Next() {
			w.walk(it.Value(), path+"."+it.Selector().String())
		}
	case cue.ListKind:
		it, err := v.List()
		if err != nil {
			w.c.errs.addCUE(w.instance, err)
			return
		}
		for i := 0; it.Next(); i++ {
			w.walk(it.Value(), fmt.Sprintf("%s[%d]", path, i))
		}
	default:
		w.c.errs.addf(w.instance, path, v.Pos(), "is %s, not a resource (a struct with an id) nor a struct or list of them", kind)
	}
}

// meta are the fields of resource.#Resource: everything else is an
// attribute.
var meta = map[string]bool{
	"id": true, "agent": true, "requires": true, "purged": true, "send_event": true,
	"receive_events": true, "report_only": true, "resource_set": true,
}

// resource decodes one resource.
func (w *walker) resource(v cue.Value, path string) {
	errs := w.c.errs
	r := Resource{Origin: w.origin(path), pos: v.Pos(), ResourceSet: w.set, Attributes: map[string]json.RawMessage{}, Requires: []string{}}
	idv := v.LookupPath(cue.MakePath(cue.Str("id")))
	id, err := idv.String()
	if err != nil {
		if w.c.unknownFact(err) {
			errs.addf(w.instance, path+".id", idv.Pos(), "the id depends on a fact that is not known yet; an id must be known when the model is compiled")
			return
		}
		// Report the causes (a missing or wrong identifying attribute),
		// not only the id that could not be built from them.
		if verr := v.Validate(cue.Concrete(true)); verr != nil {
			errs.addCUE(w.instance, verr)
		} else {
			errs.addCUE(w.instance, err)
		}
		return
	}
	rid, err := resource.Parse(id)
	if err != nil {
		errs.addf(w.instance, path+".id", idv.Pos(), "%v", err)
		return
	}
	if rid.Version != 0 {
		errs.addf(w.instance, path+".id", idv.Pos(), "id %s names a version; a model's ids never do", id)
		return
	}
	r.ID = id
	ok := true
	// Conflicts and fields the type does not allow, all of them (the
	// loop below finds what is missing).
	if err := v.Validate(); err != nil {
		errs.addCUE(w.instance, err)
		ok = false
	}
	it, err := v.Fields()
	if err != nil {
		errs.addCUE(w.instance, err)
		return
	}
	allowed := w.c.attributes(rid.Type)
	for it.Next() {
		label := it.Selector().Unquoted()
		fv := it.Value()
		fpath := path + "." + it.Selector().String()
		if allowed != nil && !allowed[label] && !meta[label] {
			// CUE reports one error per struct: a field the type does
			// not allow goes unreported beside a conflict. Say it too.
			errs.addf(w.instance, fpath, fv.Pos(), "field not allowed")
			ok = false
			continue
		}
		if label == "requires" {
			// Only the ids of what it refers to matter, and they may
			// still be undefined themselves.
			ok = w.requires(&r, fv, fpath) && ok
			continue
		}
		if err := fv.Validate(cue.Concrete(true)); err != nil {
			if !meta[label] && w.c.unknownFact(err) {
				r.Undefined = true
				continue
			}
			errs.addCUE(w.instance, err)
			ok = false
			continue
		}
		switch label {
		case "id", "agent":
		case "purged":
			r.Purged, _ = fv.Bool()
		case "send_event":
			r.SendEvent, _ = fv.Bool()
		case "receive_events":
			r.ReceiveEvents, _ = fv.Bool()
		case "report_only":
			r.ReportOnly, _ = fv.Bool()
		case "resource_set":
			r.ResourceSet, _ = fv.String()
		default:
			b, err := fv.MarshalJSON()
			if err != nil {
				errs.addCUE(w.instance, err)
				ok = false
				continue
			}
			r.Attributes[label] = b
		}
	}
	if !ok {
		return
	}
	if r.Undefined {
		if _, known := r.Attributes[rid.Attribute]; !known {
			errs.addf(w.instance, path+"."+rid.Attribute, v.Pos(), "the identifying attribute depends on a fact that is not known yet")
			return
		}
		if r.Purged {
			errs.addf(w.instance, path, v.Pos(), "a purged resource cannot depend on a fact that is not known yet")
			return
		}
	}
	w.c.add(r)
}

// attributes returns the attributes a standard-library type allows (nil
// for a type of the model's own), from its definition: "ns::Name" is
// #Name of intend.dev/std/ns.
func (c *compilation) attributes(typ string) map[string]bool {
	if a, ok := c.allowed[typ]; ok {
		return a
	}
	if c.allowed == nil {
		c.allowed = map[string]map[string]bool{}
	}
	var allowed map[string]bool
	defer func() { c.allowed[typ] = allowed }()
	ns, name, ok := strings.Cut(typ, "::")
	inst := c.std[StdModule+"/"+ns]
	if !ok || inst == nil || strings.Contains(name, "::") {
		return nil
	}
	def := c.cue.BuildInstance(inst).LookupPath(cue.MakePath(cue.Def("#" + name)))
	it, err := def.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	allowed = map[string]bool{}
	for it.Next() {
		allowed[it.Selector().Unquoted()] = true
	}
	return allowed
}

// requires takes the ids of the resources (or the id strings) listed.
func (w *walker) requires(r *Resource, v cue.Value, path string) bool {
	it, err := v.List()
	if err != nil {
		w.c.errs.addCUE(w.instance, err)
		return false
	}
	for i := 0; it.Next(); i++ {
		e := it.Value()
		if e.Kind() == cue.StructKind {
			e = e.LookupPath(cue.MakePath(cue.Str("id")))
		}
		s, err := e.String()
		if err != nil {
			w.c.errs.addf(w.instance, fmt.Sprintf("%s[%d]", path, i), e.Pos(), "must be a resource or a resource id: %v", err)
			return false
		}
		if _, err := resource.Parse(s); err != nil {
			w.c.errs.addf(w.instance, fmt.Sprintf("%s[%d]", path, i), e.Pos(), "%v", err)
			return false
		}
		if s == r.ID {
			w.c.errs.addf(w.instance, fmt.Sprintf("%s[%d]", path, i), e.Pos(), "a resource cannot require itself")
			return false
		}
		r.Requires = append(r.Requires, s)
	}
	slices.Sort(r.Requires)
	r.Requires = slices.Compact(r.Requires)
	return true
}

// unknownFact reports whether every error in err involves a lookup into
// facts: a fact not known yet. Any other problem, a missing attribute for
// one, is an error of the model.
func (c *compilation) unknownFact(err error) bool {
	errs := cueerrors.Errors(err)
	if len(errs) == 0 {
		return false
	}
	for _, e := range errs {
		if !slices.ContainsFunc(cueerrors.Positions(e), c.factLookupAt) {
			return false
		}
	}
	return true
}

// factLookupAt reports whether the source at pos is a selection or index
// whose innermost operand is the identifier facts.
func (c *compilation) factLookupAt(pos token.Pos) bool {
	f := c.files[pos.Filename()]
	if f == nil {
		return false
	}
	found := false
	ast.Walk(f, func(n ast.Node) bool {
		if found {
			return false
		}
		var x ast.Expr
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if !samePos(n.Sel.Pos(), pos) && !samePos(n.Pos(), pos) {
				return true
			}
			x = n.X
		case *ast.IndexExpr:
			if !samePos(n.Index.Pos(), pos) && !samePos(n.Pos(), pos) && !samePos(n.Lbrack, pos) {
				return true
			}
			x = n.X
		default:
			return true
		}
		found = rootedInFacts(x)
		return !found
	}, nil)
	return found
}

func samePos(a, b token.Pos) bool {
	return a.IsValid() && b.IsValid() && a.Filename() == b.Filename() && a.Offset() == b.Offset()
}

func rootedInFacts(x ast.Expr) bool {
	for {
		switch n := x.(type) {
		case *ast.SelectorExpr:
			x = n.X
		case *ast.IndexExpr:
			x = n.X
		case *ast.Ident:
			return n.Name == "facts"
		default:
			return false
		}
	}
}

func mapKeys[M ~map[string]V, V any](m M) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
