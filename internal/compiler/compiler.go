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
//   - pools: the pools the server allocates r attributes from
//     (@lsm(r, allocate=vlan)), each an intend.dev/std/lsm #Pool: checked,
//     and given with the entities for the catalog (Result.Pools; pools.go).
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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/token"
	"cuelang.org/go/mod/modfile"

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
	// Models, with SourceKey, keeps the model built (loaded, parsed,
	// evaluated) for the next compiles of the same source in the same
	// directory (models.go). Not for a directory whose files change
	// under the same SourceKey.
	Models *Models
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
	Unmanaged     bool                       `json:"unmanaged,omitempty"`
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
	// Pools are the model's allocation pools (top-level pools), sorted
	// by name: the catalog's, with the entities (pools.go).
	Pools []lsm.Pool
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
	// Plugins, when set, is the export's "plugins": the adapter plugins
	// of the project's modules (internal/ledger.Plugin, as JSON), which
	// the version requires. The compile does not set it; intend export
	// does, from the modules it resolved.
	Plugins json.RawMessage
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
		Resources []Resource      `json:"resources"`
		Plugins   json.RawMessage `json:"plugins,omitempty"`
	}{rs, r.Plugins})
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
	c, proj, v, release, err := loadModel(ctx, opts, hint)
	if err != nil || c == nil {
		return nil, err
	}
	defer release()
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
		c.model = nil // what it extracted of the model is not this value's
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
	c.pools(v.LookupPath(cue.MakePath(cue.Str("pools"))))
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
	res := &Result{Project: proj, Resources: c.out, Instances: c.instances, Services: c.svcs, PreviousServices: c.prev, Pools: c.poolList, Parameters: c.params,
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
// resources), the project and the model's value, taken from opts.Models
// when it holds the source's; release gives a model taken or built for
// opts.Models back once the compile is done with it. A model that does
// not load returns its errors; c is nil then.
func loadModel(ctx context.Context, opts Options, hint int) (c *compilation, proj project.Project, v cue.Value, release func(), err error) {
	release = func() {}
	root, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, proj, v, release, err
	}
	newCompilation := func() *compilation {
		return &compilation{
			ctx:   ctx,
			opts:  opts,
			errs:  &errorList{root: root, stdAt: filepath.Join(root, "cue.mod", "pkg", filepath.FromSlash(StdModule))},
			files: map[string]*ast.File{},
			ids:   make(map[string]int, hint),
			out:   make([]Resource, 0, hint),
		}
	}
	models := opts.Models
	if opts.SourceKey == "" {
		models = nil
	}
	if models != nil {
		if b := models.take(opts.SourceKey, root); b != nil {
			c = newCompilation()
			c.files, c.std, c.allowed, c.cue, c.model = b.files, b.std, b.allowed, b.cue, b
			return c, b.proj, b.value, b.mu.Unlock, nil
		}
	}
	if proj, err = project.Load(root); err != nil {
		return nil, proj, v, release, err
	}
	c = newCompilation()
	inst, err := c.load(root, proj)
	if err != nil {
		return nil, proj, v, release, err
	}
	if inst == nil {
		return nil, proj, v, release, c.errs.err()
	}
	c.cue = cuecontext.New()
	v = c.cue.BuildInstance(inst)
	if models != nil {
		c.allowed = map[string]map[string]bool{}
		b := &builtModel{proj: proj, root: root, cue: c.cue, value: v, files: c.files, std: c.std, allowed: c.allowed,
			entities: map[string]*extracted{}}
		c.model = b
		b.mu.Lock()
		models.put(opts.SourceKey, root, b)
		release = b.mu.Unlock
	}
	return c, proj, v, release, nil
}

type compilation struct {
	ctx  context.Context
	keys *cacheKeyer // nil: no cache
	// model is the built model the compile evaluates as built (nil: none,
	// or with facts filled in), which keeps what is pure per model.
	model     *builtModel
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
	// poolList and poolsByName are the model's allocation pools
	// (pools.go).
	poolList    []lsm.Pool
	poolsByName map[string]lsm.Pool
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
	var foreign []string // files of the project's copy of std that the binary's lacks
	var index func(*build.Instance)
	index = func(i *build.Instance) {
		if strings.HasPrefix(i.ImportPath, StdModule+"/") {
			c.std[i.ImportPath] = i
			for _, f := range i.Files {
				if _, ok := ov[f.Filename]; !ok && !slices.Contains(foreign, f.Filename) {
					foreign = append(foreign, f.Filename)
				}
			}
		}
		for _, f := range i.Files {
			c.files[f.Filename] = f
		}
		for _, imp := range i.Imports {
			index(imp)
		}
	}
	index(inst)
	if len(foreign) > 0 {
		// A copy from another intend (committed, then compiled by a
		// server of another version): the binary's library is what its
		// adapters implement.
		for _, f := range foreign {
			rel, err := filepath.Rel(root, f)
			if err != nil {
				rel = f
			}
			rel = filepath.ToSlash(rel)
			c.errs.add(&Error{Message: fmt.Sprintf("%s: not part of the standard library of this intend (%s is intend's own copy, "+
				"for the cue tools): intend compile rewrites it, or remove the file", rel, StdDir), Positions: []Position{{File: rel}}})
		}
		return nil, nil
	}
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
