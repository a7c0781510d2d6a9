// The agreement test of the standard library and the built-in adapters.
//
// It is an external test package because internal/executor, which lists
// the built-in adapters, itself depends on this package (through the
// store): package compiler cannot import it.

package compiler_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/intendhq/intend/adapters/builtin"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
	gossh "golang.org/x/crypto/ssh"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/compiler"
)

// modulePath is this module, to find an adapter's source from its Go
// package path.
const modulePath = "github.com/intendhq/intend"

// TestStdTypesAreBuiltins checks that the standard library defines every
// built-in resource type and nothing else: a type the compiler can produce
// has an adapter in every executor, and every adapter can be used from a
// model.
func TestStdTypesAreBuiltins(t *testing.T) {
	t.Parallel()
	std := loadStd(t)
	builtins := builtin.Adapters().Types()
	defined := slices.Sorted(maps.Keys(std.types))
	for _, typ := range builtins {
		if _, ok := std.types[typ]; !ok {
			ns, name, _ := strings.Cut(typ, "::")
			t.Errorf("built-in type %s has no definition #%s in %s/%s", typ, name, compiler.StdModule, ns)
		}
	}
	for _, typ := range defined {
		if !slices.Contains(builtins, typ) {
			t.Errorf("the standard library defines %s, which no built-in adapter manages", typ)
		}
	}
}

// TestStdAttributesAreTheAdapters checks that every attribute a schema
// declares is one its adapter documents, and the reverse. The schema's
// attributes are found by walking its definition (unified with each valid
// example, for the attributes that depend on others, such as the
// database of a postgres::Grant); the adapter's are the bullet list of
// its handler's doc comment ("  - path (string, required): …"), plus that
// of the package named by the type's namespace for attributes shared by
// every type there (the connection of ssh:: and postgres::). That the
// adapter accepts every one of them is checked by the valid examples of
// TestStdAgreesWithAdapters, which must use them all; that it accepts
// nothing else, by its unknown-attribute case.
func TestStdAttributesAreTheAdapters(t *testing.T) {
	t.Parallel()
	std := loadStd(t)
	reg := builtin.Adapters()
	for _, typ := range reg.Types() {
		def, ok := std.types[typ]
		if !ok {
			continue // TestStdTypesAreBuiltins says so
		}
		h, _ := reg.Lookup(typ)
		documented, err := documentedAttributes(typ, h)
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		declared := slices.Sorted(maps.Keys(std.attributes(t, def, stdCases()[typ].valid)))
		if !slices.Equal(declared, documented) {
			t.Errorf("%s: the schema declares %v, the adapter documents %v", typ, declared, documented)
		}
	}
}

// TestStdAgentIsAnIDsAgent checks that resource.#Resource allows exactly
// the agents a resource id can hold, for every character of the Basic
// Multilingual Plane and a few beyond it.
func TestStdAgentIsAnIDsAgent(t *testing.T) {
	t.Parallel()
	agent := loadStd(t).base.LookupPath(cue.MakePath(cue.Str("agent")))
	cc := cuecontext.New() // values of other contexts unify fine
	check := func(a string) {
		schemaErr := agent.Unify(cc.Encode(a)).Validate(cue.Concrete(true))
		idErr := resource.ID{Type: "fs::File", Agent: a, Attribute: "path", Value: "/a"}.Validate()
		if (schemaErr == nil) != (idErr == nil) {
			t.Errorf("agent %q: schema %v, id %v", a, verdict(schemaErr), verdict(idErr))
		}
	}
	check("")
	for r := rune(0); r < 0x10000; r++ {
		if r < 0xd800 || r > 0xdfff {
			check("web" + string(r))
		}
	}
	for _, r := range []rune{0x1f600, 0xe0001, 0x10ffff} {
		check(string(r))
	}
}

// TestStdMetaIsNotExported checks that the fields of resource.#Resource
// are what the compiler takes for the resource's own, never attributes
// an adapter would refuse.
func TestStdMetaIsNotExported(t *testing.T) {
	t.Parallel()
	meta := map[string]any{"agent": "web1", "requires": []any{}, "purged": false, "send_event": true,
		"receive_events": true, "report_only": true, "resource_set": "set", "unmanaged": true}
	want := slices.Sorted(maps.Keys(loadStd(t).meta))
	if got := slices.Sorted(maps.Keys(merge(meta, map[string]any{"id": nil}))); !slices.Equal(got, want) {
		t.Fatalf("resource.#Resource has %v; this test sets %v: add the new ones", want, got)
	}
	res, err := compileCase(t, "fs::Directory", stdCase{attrs: merge(meta, map[string]any{"path": "/srv"})})
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(res.Resources[0].Attributes)); !slices.Equal(got, []string{"path"}) {
		t.Errorf("attributes %v, want [path]: the compiler takes a field of resource.#Resource for an attribute", got)
	}
	if !res.Resources[0].Unmanaged {
		t.Error("unmanaged = false: the model's unmanaged: true is lost")
	}
}

// TestStdAgreesWithAdapters compiles attribute sets through the real
// compiler and hands the same sets to the adapters' validation, as the
// engine would, and requires both to accept or both to refuse. When the
// compile succeeds, the adapter gets what it exported (so a derived
// attribute such as a grant's key is the schema's); otherwise the set as
// written, as in a hand-written export.
//
// Besides the hand-written cases, every attribute the schema declares
// gets generated ones: left out, and given a value of each JSON kind the
// schema does not allow (and a list or object of the wrong content).
func TestStdAgreesWithAdapters(t *testing.T) {
	t.Parallel()
	std := loadStd(t)
	reg := builtin.Adapters()
	all := stdCases()
	for _, typ := range reg.Types() {
		def, ok := std.types[typ]
		if !ok {
			continue // TestStdTypesAreBuiltins says so
		}
		h, _ := reg.Lookup(typ)
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			tc, ok := all[typ]
			if !ok || len(tc.valid) == 0 {
				t.Fatalf("no cases for %s: add them to stdCases", typ)
			}
			a := &agreement{typ: typ, handler: h, def: def, meta: std.meta}
			a.identify(t, tc.valid[0])

			attrs := std.attributes(t, def, tc.valid)
			used := map[string]bool{}
			for _, c := range tc.valid {
				for k := range c.attrs {
					used[k] = true
				}
			}
			for _, name := range slices.Sorted(maps.Keys(attrs)) {
				if !used[name] {
					t.Errorf("the schema declares %q, which no valid example uses: the adapter may not know it", name)
				}
			}

			var cases []stdCase
			for _, c := range tc.valid {
				c.ok = true
				cases = append(cases, c)
			}
			cases = append(cases, tc.cases...)
			base := tc.valid[0]
			cases = append(cases, stdCase{why: "unknown attribute", purged: base.purged, attrs: with(base.attrs, "unknown_attribute", "x")})
			for _, name := range slices.Sorted(maps.Keys(attrs)) {
				cases = append(cases, generated(tc, name, attrs[name])...)
			}
			for _, c := range cases {
				t.Run(c.why, func(t *testing.T) {
					t.Parallel()
					a.check(t, c)
				})
			}
		})
	}
}

// stdCase is one attribute set and the verdict expected of both the
// schema and the adapter.
type stdCase struct {
	why    string
	purged bool
	attrs  map[string]any
	ok     bool
	// generated cases have no verdict of their own: schema and adapter
	// must only agree.
	generated bool
	// schemaStricter marks a case the schema refuses and the adapter
	// accepts, on purpose (see nullIsAbsent).
	schemaStricter bool
}

// typeCases are the cases of one type.
type typeCases struct {
	// valid are accepted by both. Together they use every attribute of
	// the schema, and the generated cases start from them.
	valid []stdCase
	// cases are written by hand: patterns, enums, ranges and the
	// conditions between attributes.
	cases []stdCase
	// nullIsAbsent are the attributes whose adapter reads null as
	// absent. The schema refuses null there: a model has no reason to
	// write it, and a compile error is the safer side to disagree on.
	nullIsAbsent []string
}

// generated returns the cases derived from the schema's declaration of
// one attribute: left out, and of the wrong JSON kind or content.
func generated(tc typeCases, name string, field cue.Value) []stdCase {
	var base stdCase
	for _, c := range tc.valid {
		if _, ok := c.attrs[name]; ok {
			base = c
			break
		}
	}
	if base.attrs == nil {
		return nil // reported: no valid example uses it
	}
	out := []stdCase{{why: name + " absent", purged: base.purged, attrs: without(base.attrs, name), generated: true}}
	kind := field.IncompleteKind()
	for _, s := range []struct {
		kind  cue.Kind
		value any
	}{
		{cue.NullKind, nil},
		{cue.BoolKind, true},
		{cue.IntKind, 7},
		{cue.FloatKind, 1.5},
		{cue.StringKind, "wrong"},
		{cue.ListKind, []any{true}},              // no list attribute holds booleans
		{cue.StructKind, map[string]any{"x": 1}}, // nor is a secret reference
	} {
		if kind&s.kind != 0 && s.kind != cue.ListKind && s.kind != cue.StructKind {
			continue
		}
		c := stdCase{why: fmt.Sprintf("%s is %s %v", name, s.kind, s.value), purged: base.purged, attrs: with(base.attrs, name, s.value), generated: true}
		if s.kind == cue.NullKind && slices.Contains(tc.nullIsAbsent, name) {
			c.generated, c.schemaStricter = false, true
		}
		out = append(out, c)
	}
	return out
}

func with(attrs map[string]any, name string, value any) map[string]any {
	out := maps.Clone(attrs)
	out[name] = value
	return out
}

func without(attrs map[string]any, name string) map[string]any {
	out := maps.Clone(attrs)
	delete(out, name)
	return out
}

// merge returns the union of attribute sets, later ones winning.
func merge(sets ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, s := range sets {
		maps.Copy(out, s)
	}
	return out
}

// agreement checks the cases of one type.
type agreement struct {
	typ     string
	handler adapters.Handler
	def     cue.Value
	meta    map[string]bool
	// idAttr is the identifying attribute, and idValue the value of the
	// first valid example, which stands in when a case's is not a string.
	idAttr, idValue string
}

// identify learns the identifying attribute from the id the schema makes
// for a valid example. That the adapter accepts the id is what checks
// that the two agree on it.
func (a *agreement) identify(t *testing.T, valid stdCase) {
	t.Helper()
	res, err := compileCase(t, a.typ, valid)
	if err != nil {
		t.Fatalf("the first valid example does not compile: %v", err)
	}
	id, err := resource.Parse(res.Resources[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	a.idAttr, a.idValue = id.Attribute, id.Value
}

// check runs one case through the compiler and the adapter.
func (a *agreement) check(t *testing.T, c stdCase) {
	res, cueErr := compileCase(t, a.typ, c)
	var desired adapters.Resource
	var err error
	if cueErr == nil {
		desired, err = a.exported(res)
	} else {
		desired, err = a.written(c)
	}
	if err != nil {
		t.Fatal(err)
	}
	adapterErr := desired.ID.Validate() // the engine could not even name it
	if adapterErr == nil {
		adapterErr = validate(t.Context(), a.handler, desired)
	}
	cueOK, adapterOK := cueErr == nil, adapterErr == nil
	switch {
	case c.schemaStricter:
		if cueOK || !adapterOK {
			t.Errorf("the schema should refuse (%v) what the adapter accepts (%v): %s", verdict(cueErr), verdict(adapterErr), show(c))
		}
	case cueOK != adapterOK:
		t.Errorf("the schema and the adapter disagree on %s:\n  schema: %v\n  adapter: %v", show(c), verdict(cueErr), verdict(adapterErr))
	case !c.generated && cueOK != c.ok:
		t.Errorf("both say %v, want ok=%v: %s", verdict(cueErr), c.ok, show(c))
	}
}

func verdict(err error) string {
	if err == nil {
		return "accepted"
	}
	return "refused: " + err.Error()
}

func show(c stdCase) string {
	b, _ := json.Marshal(c.attrs)
	if c.purged {
		return string(b) + " (purged)"
	}
	return string(b)
}

// exported is the desired state the engine builds from the compiled
// resource: attributes decoded from their JSON with numbers as
// json.Number.
func (a *agreement) exported(res *compiler.Result) (adapters.Resource, error) {
	if len(res.Resources) != 1 {
		return adapters.Resource{}, fmt.Errorf("compiled %d resources, want 1", len(res.Resources))
	}
	r := res.Resources[0]
	id, err := resource.Parse(r.ID)
	if err != nil {
		return adapters.Resource{}, err
	}
	if id.Type != a.typ || id.Agent != "localhost" || id.Attribute != a.idAttr {
		return adapters.Resource{}, fmt.Errorf("the schema made id %s, want type %s, agent localhost and attribute %s", r.ID, a.typ, a.idAttr)
	}
	raw, err := json.Marshal(r.Attributes)
	if err != nil {
		return adapters.Resource{}, err
	}
	attrs, err := engineDecode(raw)
	return adapters.Resource{ID: id, Attributes: attrs, Purged: r.Purged}, err
}

// written is the desired state of a hand-written export of the case,
// with the id named by its identifying attribute. An attribute the schema
// derives from the others (a grant's key) and the case leaves out is
// added as the schema derives it, when it can: otherwise the adapter
// would refuse every such case for the missing attribute alone.
func (a *agreement) written(c stdCase) (adapters.Resource, error) {
	attrs := maps.Clone(c.attrs)
	if it, err := instance(a.def, c).Fields(); err == nil {
		for it.Next() {
			name := it.Selector().Unquoted()
			if _, given := attrs[name]; given || a.meta[name] {
				continue
			}
			var v any
			if b, err := it.Value().MarshalJSON(); err == nil && json.Unmarshal(b, &v) == nil {
				attrs[name] = v
			}
		}
	}
	c.attrs = attrs
	raw, err := json.Marshal(c.attrs)
	if err != nil {
		return adapters.Resource{}, err
	}
	decoded, err := engineDecode(raw)
	value, ok := c.attrs[a.idAttr].(string)
	if !ok {
		value = a.idValue
	}
	id := resource.ID{Type: a.typ, Agent: "localhost", Attribute: a.idAttr, Value: value}
	return adapters.Resource{ID: id, Attributes: decoded, Purged: c.purged}, err
}

// engineDecode decodes attributes as the executor does.
func engineDecode(raw []byte) (map[string]any, error) {
	attrs := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return attrs, dec.Decode(&attrs)
}

// validate is what the engine does before it observes: resolve the secret
// references, then ask the adapter's Validator. The fs and ssh handlers
// have none: they validate at the start of every call, before they open
// the target's file system, which a cancelled context stops. So their
// Observe is called on a cancelled context: it reads nothing, dials no
// host, and reports context.Canceled exactly when the attributes are
// valid.
func validate(ctx context.Context, h adapters.Handler, desired adapters.Resource) error {
	hc := adapters.NewContext(adapters.WithSecrets(&adapters.Secrets{LookupEnv: testSecret}))
	defer hc.Close()
	plain, err := hc.ResolveSecrets(desired)
	if err != nil {
		return err
	}
	if v, ok := h.(adapters.Validator); ok {
		return v.Validate(ctx, hc, plain)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = h.Observe(cancelled, hc, plain)
	switch {
	case errors.Is(err, context.Canceled):
		return nil
	case err == nil:
		return errors.New("Observe succeeded on a cancelled context, so whether it validated is unknown")
	}
	return err
}

// compileCase compiles a model holding the case as its one resource.
func compileCase(t *testing.T, typ string, c stdCase) (*compiler.Result, error) {
	t.Helper()
	ns, name, _ := strings.Cut(typ, "::")
	fields := maps.Clone(c.attrs)
	if c.purged {
		fields["purged"] = true
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		t.Fatal(err)
	}
	model := fmt.Sprintf("package main\n\nimport %q\n\nresources: r: %s.#%s & %s", compiler.StdModule+"/"+ns, ns, name, b.String())
	dir := t.TempDir()
	for file, text := range map[string]string{"intend.yaml": "name: std\n", "main.cue": model} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := compiler.Compile(t.Context(), compiler.Options{Dir: dir})
	var errs compiler.Errors
	if err != nil && !errors.As(err, &errs) {
		t.Fatalf("compile failed without compile errors: %v", err)
	}
	return res, err
}

// stdLib is the standard library, evaluated.
type stdLib struct {
	// types are the definitions of resource types (those with an id),
	// by type name ("fs::File").
	types map[string]cue.Value
	// base is resource.#Resource, and meta its fields: not attributes.
	base cue.Value
	meta map[string]bool
}

// loadStd evaluates every package of the standard library, as the
// compiler overlays it on a project.
func loadStd(t *testing.T) *stdLib {
	t.Helper()
	files, err := compiler.StdFiles()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	ov := map[string]load.Source{
		// The language version the compiler gives a project without a
		// cue.mod of its own.
		filepath.Join(root, "cue.mod", "module.cue"): load.FromString("module: \"intend.local/std\"\nlanguage: version: \"v0.12.0\"\n"),
	}
	pkgs := map[string]bool{}
	for p, b := range files {
		ov[filepath.Join(root, "cue.mod", "pkg", filepath.FromSlash(compiler.StdModule), filepath.FromSlash(p))] = load.FromBytes(b)
		pkgs[compiler.StdModule+"/"+path.Dir(p)] = true
	}
	lib := &stdLib{types: map[string]cue.Value{}, meta: map[string]bool{}}
	ctx := cuecontext.New()
	for _, inst := range load.Instances(slices.Sorted(maps.Keys(pkgs)), &load.Config{Dir: root, Overlay: ov}) {
		if inst.Err != nil {
			t.Fatal(inst.Err)
		}
		v := ctx.BuildInstance(inst)
		if err := v.Err(); err != nil {
			t.Fatal(err)
		}
		ns := path.Base(inst.ImportPath)
		if ns == "resource" {
			// The base of the types, not one.
			lib.base = v.LookupPath(cue.MakePath(cue.Def("#Resource")))
			it, err := lib.base.Fields(cue.Optional(true))
			if err != nil {
				t.Fatal(err)
			}
			for it.Next() {
				lib.meta[it.Selector().Unquoted()] = true
			}
			continue
		}
		it, err := v.Fields(cue.Definitions(true))
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			if it.Value().LookupPath(cue.MakePath(cue.Str("id"))).Exists() {
				lib.types[ns+"::"+strings.TrimPrefix(it.Selector().String(), "#")] = it.Value()
			}
		}
	}
	if len(lib.meta) == 0 {
		t.Fatal("no resource.#Resource")
	}
	return lib
}

// attributes walks the definition of a type, unified with each valid
// example, and returns its attributes: every field but those of
// resource.#Resource. Each is returned as the schema declares it in the
// first example that gives it, that example's value left out, so that
// what it depends on (the "on" of a grant) is known and its own value
// does not narrow it.
func (l *stdLib) attributes(t *testing.T, def cue.Value, valid []stdCase) map[string]cue.Value {
	t.Helper()
	out := map[string]cue.Value{}
	fields := func(c stdCase, each func(name string, v cue.Value)) {
		it, err := instance(def, c).Fields(cue.Optional(true))
		if err != nil {
			t.Fatalf("%s: %v", show(c), err)
		}
		for it.Next() {
			if name := it.Selector().Unquoted(); !l.meta[name] {
				each(name, it.Value())
			}
		}
	}
	for _, c := range valid {
		fields(c, func(name string, _ cue.Value) {
			if _, given := c.attrs[name]; !given || out[name].Exists() {
				return
			}
			fields(stdCase{attrs: without(c.attrs, name), purged: c.purged}, func(n string, v cue.Value) {
				if n == name {
					out[name] = v
				}
			})
		})
	}
	for _, c := range valid {
		fields(c, func(name string, v cue.Value) {
			if !out[name].Exists() {
				out[name] = v // no example gives it: the caller says so
			}
		})
	}
	return out
}

// instance is the definition of a type unified with the case.
func instance(def cue.Value, c stdCase) cue.Value {
	b, err := json.Marshal(merge(c.attrs, map[string]any{"purged": c.purged}))
	if err != nil {
		panic(err) // the cases are JSON
	}
	return def.Unify(cuecontext.New().CompileBytes(b))
}

// bullet is an attribute in an adapter's doc comment:
// "  - owner, group (string, optional): …".
var bullet = regexp.MustCompile(`(?m)^\s*- ([a-z_]+(?:, [a-z_]+)*) \(`)

// documentedAttributes returns the attributes the doc comment of the
// handler of typ lists, with those the package of its namespace lists
// for every type there, sorted.
func documentedAttributes(typ string, h adapters.Handler) ([]string, error) {
	ht := reflect.TypeOf(h)
	rel, ok := strings.CutPrefix(ht.PkgPath(), modulePath+"/")
	if !ok {
		return nil, fmt.Errorf("handler %v is not in %s", ht, modulePath)
	}
	ns, _, _ := strings.Cut(typ, "::")
	handlerDoc, _, err := docs(filepath.Join("..", "..", filepath.FromSlash(rel)), ht.Name())
	if err != nil {
		return nil, err
	}
	if handlerDoc == "" {
		return nil, fmt.Errorf("handler %v has no doc comment", ht)
	}
	_, pkgDoc, err := docs(filepath.Join("..", "..", "adapters", ns), "")
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, m := range bullet.FindAllStringSubmatch(handlerDoc+"\n"+pkgDoc, -1) {
		for _, name := range strings.Split(m[1], ", ") {
			set[name] = true
		}
	}
	return slices.Sorted(maps.Keys(set)), nil
}

// docs returns the doc comment of the named type in the Go package in
// dir, and the package's doc comment.
func docs(dir, typeName string) (typeDoc, pkgDoc string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", "", err
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return "", "", err
		}
		if f.Doc != nil {
			pkgDoc += f.Doc.Text()
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				if ts := s.(*ast.TypeSpec); ts.Name.Name == typeName {
					doc := ts.Doc
					if doc == nil {
						doc = gd.Doc
					}
					typeDoc = doc.Text()
				}
			}
		}
	}
	return typeDoc, pkgDoc, nil
}

// The values the test's secret references resolve to.
const secretContent = "text from a secret\n"

var sshKey = sync.OnceValues(func() (privatePEM, authorizedKey string) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		panic(err)
	}
	sshPub, err := gossh.NewPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(block)), strings.TrimSpace(string(gossh.MarshalAuthorizedKey(sshPub)))
})

// testSecret resolves the test's env: secret references (named with the
// prefix an executor requires).
func testSecret(name string) (string, bool) {
	switch strings.TrimPrefix(name, adapters.DefaultSecretEnvPrefix) {
	case "CONTENT":
		return secretContent, true
	case "SSH_KEY":
		key, _ := sshKey()
		return key, true
	}
	return "s3cret", true
}

func secret(name string) map[string]any {
	return map[string]any{"secret": "env:" + adapters.DefaultSecretEnvPrefix + name}
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// stdCases are the cases of every built-in type.
//
// Left out, because only the adapter can check them (each such check
// needs more than the value: the host, a parser CUE does not have, or a
// secret's value):
//   - fs and ssh owner and group names that do not exist on the host;
//   - a content_hash that does not match a content given as a secret;
//   - an ssh private_key that looks like PEM but is not a usable key (or
//     is encrypted), a host_key that is not one authorized_keys line of a
//     plain key;
//   - a postgres server URL that starts right but that PostgreSQL's URL
//     parser refuses (a bad port or sslmode).
func stdCases() map[string]typeCases {
	privateKey, hostKey := sshKey()
	ok := func(why string, attrs map[string]any) stdCase { return stdCase{why: why, attrs: attrs, ok: true} }
	bad := func(why string, attrs map[string]any) stdCase { return stdCase{why: why, attrs: attrs} }
	purged := func(c stdCase) stdCase { c.purged = true; return c }
	long := func(s string, n int) string { return strings.Repeat(s, n) }

	// fs::File, fs::Directory and fs::Symlink; ssh:: adds conn to each.
	file := func(conn map[string]any) typeCases {
		f := func(attrs map[string]any) map[string]any { return merge(conn, attrs) }
		return typeCases{
			valid: []stdCase{
				{why: "every attribute", attrs: f(map[string]any{"path": "/srv/app/motd", "content": "hello\n", "content_hash": hashOf("hello\n"), "mode": "0640", "owner": "0", "group": "0"})},
				{why: "content from a secret", attrs: f(map[string]any{"path": "/srv/app/key", "content": secret("CONTENT"), "mode": "0600"})},
				{why: "content_hash alone", attrs: f(map[string]any{"path": "/srv/app/blob", "content_hash": hashOf("x")})},
				purged(stdCase{why: "purged without content", attrs: f(map[string]any{"path": "/srv/app/old"})}),
			},
			cases: []stdCase{
				bad("neither content nor content_hash", f(map[string]any{"path": "/a"})),
				bad("content_hash not that of content", f(map[string]any{"path": "/a", "content": "x", "content_hash": hashOf("y")})),
				ok("content_hash of content given as a secret", f(map[string]any{"path": "/a", "content": secret("CONTENT"), "content_hash": hashOf(secretContent)})),
				bad("content_hash in upper case", f(map[string]any{"path": "/a", "content_hash": strings.ToUpper(hashOf("x"))})),
				bad("content_hash without prefix", f(map[string]any{"path": "/a", "content_hash": strings.TrimPrefix(hashOf("x"), "sha256:")})),
				bad("content a list", f(map[string]any{"path": "/a", "content": []any{"x"}})),
				ok("path the root", f(map[string]any{"path": "/", "content": ""})),
				bad("path relative", f(map[string]any{"path": "srv/a", "content": ""})),
				bad("path with ..", f(map[string]any{"path": "/srv/../a", "content": ""})),
				bad("path with .", f(map[string]any{"path": "/srv/./a", "content": ""})),
				bad("path with //", f(map[string]any{"path": "/srv//a", "content": ""})),
				bad("path with a trailing /", f(map[string]any{"path": "/srv/a/", "content": ""})),
				ok("path with dots in names", f(map[string]any{"path": "/srv/.a/..b/...", "content": ""})),
				bad("path with NUL", f(map[string]any{"path": "/a\x00b", "content": ""})),
				bad("path with a newline, no id", f(map[string]any{"path": "/a\nb", "content": ""})),
				bad("mode of three digits", f(map[string]any{"path": "/a", "content": "", "mode": "644"})),
				bad("mode with the sticky bit", f(map[string]any{"path": "/a", "content": "", "mode": "1644"})),
				bad("mode not octal", f(map[string]any{"path": "/a", "content": "", "mode": "0648"})),
				bad("mode a number", f(map[string]any{"path": "/a", "content": "", "mode": 420})),
				ok("owner a name", f(map[string]any{"path": "/a", "content": "", "owner": "www-data", "group": "adm"})),
				ok("owner a machine account", f(map[string]any{"path": "/a", "content": "", "owner": "host1$"})),
				ok("owner a name starting with a digit", f(map[string]any{"path": "/a", "content": "", "owner": "1st.user"})),
				ok("owner of 256 characters", f(map[string]any{"path": "/a", "content": "", "owner": long("u", 256)})),
				bad("owner of 257 characters", f(map[string]any{"path": "/a", "content": "", "owner": long("u", 257)})),
				ok("owner the largest id", f(map[string]any{"path": "/a", "content": "", "owner": "4294967294", "group": "0004294967294"})),
				bad("owner the reserved id", f(map[string]any{"path": "/a", "content": "", "owner": "4294967295"})),
				bad("group an id out of range", f(map[string]any{"path": "/a", "content": "", "group": "99999999999"})),
				bad("owner with a space", f(map[string]any{"path": "/a", "content": "", "owner": "a b"})),
				bad("owner starting with -", f(map[string]any{"path": "/a", "content": "", "owner": "-x"})),
				bad("owner empty", f(map[string]any{"path": "/a", "content": "", "owner": ""})),
				bad("owner a number", f(map[string]any{"path": "/a", "content": "", "owner": 0})),
			},
		}
	}
	directory := func(conn map[string]any) typeCases {
		f := func(attrs map[string]any) map[string]any { return merge(conn, attrs) }
		return typeCases{
			valid: []stdCase{
				{why: "every attribute", attrs: f(map[string]any{"path": "/srv/app", "mode": "0750", "owner": "root", "group": "0"})},
				purged(stdCase{why: "purged", attrs: f(map[string]any{"path": "/srv/old"})}),
			},
			cases: []stdCase{
				ok("path alone", f(map[string]any{"path": "/srv"})),
				bad("path relative", f(map[string]any{"path": "srv"})),
				bad("mode of five digits", f(map[string]any{"path": "/a", "mode": "00755"})),
				bad("mode with the set-group-id bit", f(map[string]any{"path": "/a", "mode": "2755"})),
				bad("owner the reserved id", f(map[string]any{"path": "/a", "owner": "4294967295"})),
				bad("content is not a directory's", f(map[string]any{"path": "/a", "content": "x"})),
			},
		}
	}
	symlink := func(conn map[string]any) typeCases {
		f := func(attrs map[string]any) map[string]any { return merge(conn, attrs) }
		return typeCases{
			valid: []stdCase{
				{why: "every attribute", attrs: f(map[string]any{"path": "/srv/app/current", "target": "releases/7"})},
				purged(stdCase{why: "purged without target", attrs: f(map[string]any{"path": "/srv/app/previous"})}),
			},
			cases: []stdCase{
				bad("no target", f(map[string]any{"path": "/a"})),
				ok("target absolute", f(map[string]any{"path": "/a", "target": "/b"})),
				ok("target with ..", f(map[string]any{"path": "/a", "target": "../b/./c/"})),
				bad("target empty", f(map[string]any{"path": "/a", "target": ""})),
				bad("target with NUL", f(map[string]any{"path": "/a", "target": "b\x00"})),
				bad("mode is not a link's", f(map[string]any{"path": "/a", "target": "b", "mode": "0777"})),
				bad("owner is not a link's", f(map[string]any{"path": "/a", "target": "b", "owner": "root"})),
			},
		}
	}

	// The connection of the ssh:: types, and the cases about it.
	conn := map[string]any{"host": "web1.example.com", "port": 2222, "user": "deploy", "private_key": secret("SSH_KEY"), "known_hosts": "~/.ssh/known_hosts"}
	conn2 := map[string]any{"host": "2001:db8::1", "private_key": privateKey, "host_key": hostKey}
	sshCases := func(tc typeCases, target map[string]any) typeCases {
		tc.valid = append(tc.valid, stdCase{why: "host_key and a key in the text", attrs: merge(conn2, target)})
		c := func(attrs map[string]any) map[string]any { return merge(target, attrs) }
		tc.cases = append(tc.cases,
			ok("host alone", c(map[string]any{"host": "h"})),
			ok("host with a port-like colon", c(map[string]any{"host": "h:22"})),
			ok("host an IPv4 address", c(map[string]any{"host": "192.0.2.7"})),
			bad("no host", c(map[string]any{"port": 22})),
			bad("host empty", c(map[string]any{"host": ""})),
			bad("host starting with -", c(map[string]any{"host": "-oProxyCommand=x"})),
			bad("host in brackets", c(map[string]any{"host": "[::1]"})),
			bad("host with a user", c(map[string]any{"host": "root@h"})),
			bad("host with a slash", c(map[string]any{"host": "h/x"})),
			bad("host with a space", c(map[string]any{"host": "h x"})),
			bad("host with a no-break space", c(map[string]any{"host": "h\u00a0x"})),
			bad("host with a control character", c(map[string]any{"host": "h\u0085"})),
			ok("port 1", c(map[string]any{"host": "h", "port": 1})),
			ok("port 65535", c(map[string]any{"host": "h", "port": 65535})),
			bad("port 0", c(map[string]any{"host": "h", "port": 0})),
			bad("port 65536", c(map[string]any{"host": "h", "port": 65536})),
			bad("port a string", c(map[string]any{"host": "h", "port": "22"})),
			ok("user with unusual characters", c(map[string]any{"host": "h", "user": "a@b\u200b"})),
			bad("user empty", c(map[string]any{"host": "h", "user": ""})),
			bad("user with a tab", c(map[string]any{"host": "h", "user": "a\tb"})),
			bad("private_key not PEM", c(map[string]any{"host": "h", "private_key": "ssh-ed25519 AAAA"})),
			bad("private_key a public key's PEM", c(map[string]any{"host": "h", "private_key": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"})),
			ok("known_hosts absolute", c(map[string]any{"host": "h", "known_hosts": "/etc/ssh/ssh_known_hosts"})),
			bad("known_hosts relative", c(map[string]any{"host": "h", "known_hosts": "known_hosts"})),
			bad("known_hosts ~ alone", c(map[string]any{"host": "h", "known_hosts": "~"})),
			bad("known_hosts of another user", c(map[string]any{"host": "h", "known_hosts": "~deploy/.ssh/known_hosts"})),
			bad("known_hosts and host_key", c(map[string]any{"host": "h", "known_hosts": "/k", "host_key": hostKey})),
			bad("host_key empty", c(map[string]any{"host": "h", "host_key": ""})),
		)
		return tc
	}

	cmd := func(attrs map[string]any) map[string]any {
		return merge(map[string]any{"name": "migrate", "command": []any{"/usr/local/bin/app", "migrate"}, "creates": "/var/lib/app/migrated"}, attrs)
	}
	pg := func(attrs map[string]any) map[string]any {
		return merge(map[string]any{"server": "postgres://postgres@db1.internal:5432/postgres?sslmode=require"}, attrs)
	}
	grant := func(attrs map[string]any) map[string]any {
		return pg(merge(map[string]any{"role": "app", "on": "table", "database": "appdb", "object": "orders", "privileges": []any{"SELECT"}}, attrs))
	}
	é32 := long("é", 32) // 32 characters, 64 bytes

	return map[string]typeCases{
		"fs::File":       file(nil),
		"fs::Directory":  directory(nil),
		"fs::Symlink":    symlink(nil),
		"ssh::File":      sshCases(file(conn), map[string]any{"path": "/a", "content": ""}),
		"ssh::Directory": sshCases(directory(conn), map[string]any{"path": "/a"}),
		"ssh::Symlink":   sshCases(symlink(conn), map[string]any{"path": "/a", "target": "b"}),

		"exec::Command": {
			valid: []stdCase{
				{why: "every attribute", attrs: map[string]any{
					"name": "migrate", "command": []any{"/usr/local/bin/app", "migrate"}, "cwd": "/var/lib/app",
					"env":     map[string]any{"LANG": "C", "DB_PASSWORD": secret("DB_PASSWORD")},
					"creates": "/var/lib/app/migrated", "unless": "test -e /var/lib/app/skip", "onlyif": []any{"true"},
					"timeout": 600, "returns": []any{0, 2}, "undo": "rm -f /var/lib/app/migrated", "refresh_only": false,
				}},
				{why: "refresh_only without a guard", attrs: map[string]any{"name": "reload", "command": "systemctl reload app", "refresh_only": true}},
				purged(stdCase{why: "purged without command", attrs: map[string]any{"name": "old"}}),
			},
			cases: []stdCase{
				bad("no guard", without(cmd(nil), "creates")),
				bad("no guard and refresh_only false", merge(without(cmd(nil), "creates"), map[string]any{"refresh_only": false})),
				ok("unless alone", merge(without(cmd(nil), "creates"), map[string]any{"unless": []any{"test", "-e", "/x"}})),
				ok("onlyif alone", merge(without(cmd(nil), "creates"), map[string]any{"onlyif": "true"})),
				purged(ok("purged with command, no guard, no undo", without(cmd(nil), "creates"))),
				purged(bad("purged with undo, no guard", without(cmd(map[string]any{"undo": "rm -rf /x"}), "creates"))),
				purged(ok("purged with undo and a guard", cmd(map[string]any{"undo": "rm -rf /x"}))),
				bad("refresh_only without command", map[string]any{"name": "x", "refresh_only": true}),
				bad("name empty", cmd(map[string]any{"name": ""})),
				bad("name with a newline, no id", cmd(map[string]any{"name": "a\nb"})),
				ok("name with brackets", cmd(map[string]any{"name": "a[1],v=2"})),
				ok("command a zero-width space", cmd(map[string]any{"command": "\u200b"})),
				bad("command empty", cmd(map[string]any{"command": ""})),
				bad("command white space", cmd(map[string]any{"command": " \t\n"})),
				bad("command a no-break space", cmd(map[string]any{"command": "\u00a0"})),
				bad("command with NUL", cmd(map[string]any{"command": "true\x00"})),
				bad("command an empty list", cmd(map[string]any{"command": []any{}})),
				bad("command without a program", cmd(map[string]any{"command": []any{"", "x"}})),
				ok("command with an empty argument", cmd(map[string]any{"command": []any{"echo", ""}})),
				bad("command with a number", cmd(map[string]any{"command": []any{"sleep", 1}})),
				bad("command argument with NUL", cmd(map[string]any{"command": []any{"echo", "a\x00"}})),
				bad("unless empty", cmd(map[string]any{"unless": ""})),
				bad("undo an empty list", cmd(map[string]any{"undo": []any{}})),
				bad("cwd relative", cmd(map[string]any{"cwd": "var/lib"})),
				ok("cwd not clean", cmd(map[string]any{"cwd": "/var//lib/../lib/"})),
				bad("creates relative", cmd(map[string]any{"creates": "x"})),
				bad("creates with NUL", cmd(map[string]any{"creates": "/x\x00"})),
				bad("env name with =", cmd(map[string]any{"env": map[string]any{"A=B": "x"}})),
				bad("env name empty", cmd(map[string]any{"env": map[string]any{"": "x"}})),
				bad("env value with NUL", cmd(map[string]any{"env": map[string]any{"A": "x\x00"}})),
				ok("env empty", cmd(map[string]any{"env": map[string]any{}})),
				ok("timeout a fraction", cmd(map[string]any{"timeout": 0.5})),
				ok("timeout a day", cmd(map[string]any{"timeout": 86400})),
				bad("timeout longer than a day", cmd(map[string]any{"timeout": 86400.5})),
				bad("timeout 0", cmd(map[string]any{"timeout": 0})),
				bad("timeout negative", cmd(map[string]any{"timeout": -1})),
				ok("returns 255", cmd(map[string]any{"returns": []any{255}})),
				bad("returns empty", cmd(map[string]any{"returns": []any{}})),
				bad("returns 256", cmd(map[string]any{"returns": []any{256}})),
				bad("returns negative", cmd(map[string]any{"returns": []any{-1}})),
				bad("returns a fraction", cmd(map[string]any{"returns": []any{1.5}})),
				bad("refresh_only a string", cmd(map[string]any{"refresh_only": "yes"})),
			},
		},

		"postgres::Database": {
			valid: []stdCase{
				{why: "every attribute", attrs: pg(map[string]any{
					"server_password": secret("PG_ADMIN_PASSWORD"), "name": "appdb", "owner": "app",
					"encoding": "utf8", "template": "template0", "connection_limit": -1,
				})},
				{why: "postgresql:// and a plain password", attrs: map[string]any{"server": "postgresql://127.0.0.1/postgres", "server_password": "pw", "name": "x"}},
				purged(stdCase{why: "purged", attrs: pg(map[string]any{"name": "old"})}),
			},
			cases: []stdCase{
				bad("no server", map[string]any{"name": "x"}),
				bad("server not postgres", pg(map[string]any{"server": "mysql://root@h/db", "name": "x"})),
				bad("server not a URL", pg(map[string]any{"server": "host=h user=postgres", "name": "x"})),
				bad("server with a password", pg(map[string]any{"server": "postgres://postgres:pw@h/postgres", "name": "x"})),
				bad("server with an empty password", pg(map[string]any{"server": "postgres://postgres:@h/postgres", "name": "x"})),
				ok("server with a colon after the host", pg(map[string]any{"server": "postgres://postgres@h:5432/db?options=a:b@c", "name": "x"})),
				bad("name empty", pg(map[string]any{"name": ""})),
				ok("name of 63 bytes", pg(map[string]any{"name": long("d", 63)})),
				bad("name of 64 bytes", pg(map[string]any{"name": long("d", 64)})),
				bad("name of 32 characters and 64 bytes", pg(map[string]any{"name": é32})),
				ok("name of 31 characters and 62 bytes", pg(map[string]any{"name": long("é", 31)})),
				bad("name with NUL", pg(map[string]any{"name": "a\x00"})),
				bad("owner of 64 bytes", pg(map[string]any{"name": "x", "owner": é32})),
				bad("template empty", pg(map[string]any{"name": "x", "template": ""})),
				ok("encoding in any case", pg(map[string]any{"name": "x", "encoding": "Latin1"})),
				ok("encoding with a dotless i", pg(map[string]any{"name": "x", "encoding": "latın1"})),
				ok("encoding with a long s", pg(map[string]any{"name": "x", "encoding": "ſql_aſcii"})),
				bad("encoding with a Kelvin sign", pg(map[string]any{"name": "x", "encoding": "\u212aOI8R"})),
				bad("encoding as IANA spells it", pg(map[string]any{"name": "x", "encoding": "UTF-8"})),
				bad("encoding with spaces", pg(map[string]any{"name": "x", "encoding": " UTF8"})),
				ok("connection_limit 0", pg(map[string]any{"name": "x", "connection_limit": 0})),
				ok("connection_limit the largest", pg(map[string]any{"name": "x", "connection_limit": 2147483647})),
				bad("connection_limit too large", pg(map[string]any{"name": "x", "connection_limit": 2147483648})),
				bad("connection_limit -2", pg(map[string]any{"name": "x", "connection_limit": -2})),
				bad("server_password a number", pg(map[string]any{"name": "x", "server_password": 7})),
			},
			nullIsAbsent: []string{"owner", "encoding", "template", "server_password"},
		},

		"postgres::Role": {
			valid: []stdCase{
				{why: "every attribute", attrs: pg(map[string]any{
					"server_password": secret("PG_ADMIN_PASSWORD"), "name": "app",
					"login": true, "superuser": false, "createdb": false, "createrole": false,
					"password": secret("APP_PASSWORD"), "member_of": []any{"readers", "writers"},
				})},
				{why: "no password", attrs: pg(map[string]any{"name": "nobody", "password": nil, "member_of": []any{}})},
				purged(stdCase{why: "purged", attrs: pg(map[string]any{"name": "old"})}),
			},
			cases: []stdCase{
				ok("password in clear", pg(map[string]any{"name": "app", "password": "pw"})),
				bad("password empty", pg(map[string]any{"name": "app", "password": ""})),
				bad("password with NUL", pg(map[string]any{"name": "app", "password": "a\x00"})),
				bad("name public", pg(map[string]any{"name": "public"})),
				ok("name PUBLIC, another role", pg(map[string]any{"name": "PUBLIC"})),
				bad("name none", pg(map[string]any{"name": "none"})),
				bad("name pg_ reserved", pg(map[string]any{"name": "pg_app"})),
				ok("name with pg_ inside", pg(map[string]any{"name": "app_pg_x"})),
				bad("name of 64 bytes", pg(map[string]any{"name": é32})),
				bad("member_of twice the same", pg(map[string]any{"name": "app", "member_of": []any{"a", "a"}})),
				bad("member_of the role itself", pg(map[string]any{"name": "app", "member_of": []any{"b", "app"}})),
				bad("member_of an empty name", pg(map[string]any{"name": "app", "member_of": []any{""}})),
				bad("member_of a name of 64 bytes", pg(map[string]any{"name": "app", "member_of": []any{"b", é32}})),
				bad("login a string", pg(map[string]any{"name": "app", "login": "yes"})),
			},
			nullIsAbsent: []string{"server_password"},
		},

		"postgres::Grant": {
			valid: []stdCase{
				{why: "on a table", attrs: grant(map[string]any{
					"server_password": secret("PG_ADMIN_PASSWORD"), "schema": "sales",
					"privileges": []any{"select", " INSERT "},
				})},
				{why: "on a database", attrs: pg(map[string]any{"role": "app", "on": "database", "object": "appdb", "privileges": []any{"CONNECT", "temp"}})},
				{why: "on a schema, with its key", attrs: pg(map[string]any{"role": "app", "on": "schema", "database": "appdb", "object": "sales",
					"privileges": []any{"USAGE", "CREATE"}, "grant": "app@schema:appdb.sales"})},
				purged(stdCase{why: "purged", attrs: grant(nil)}),
			},
			cases: []stdCase{
				ok("on a table in public", grant(map[string]any{"grant": "app@table:appdb.public.orders"})),
				ok("names that need quotes", grant(map[string]any{"role": "the app", "schema": `a"b`, "object": "o.1",
					"grant": `"the app"@table:appdb."a""b"."o.1"`})),
				ok("names that need no quotes", grant(map[string]any{"role": "$a-b_9", "grant": "$a-b_9@table:appdb.public.orders"})),
				bad("grant not the derived one", grant(map[string]any{"grant": "app@table:appdb.orders"})),
				bad("grant of another role", grant(map[string]any{"grant": "web@table:appdb.public.orders"})),
				bad("on a view", grant(map[string]any{"on": "view"})),
				bad("on in upper case", grant(map[string]any{"on": "TABLE"})),
				bad("database for on=database", pg(map[string]any{"role": "app", "on": "database", "object": "appdb", "database": "appdb", "privileges": []any{"CONNECT"}})),
				bad("schema for on=schema", pg(map[string]any{"role": "app", "on": "schema", "database": "appdb", "object": "s", "schema": "s", "privileges": []any{"USAGE"}})),
				bad("no database for on=table", without(grant(nil), "database")),
				bad("no database for on=schema", pg(map[string]any{"role": "app", "on": "schema", "object": "s", "privileges": []any{"USAGE"}})),
				bad("role PUBLIC", grant(map[string]any{"role": "Public"})),
				ok("role like PUBLIC with a dotless i", grant(map[string]any{"role": "publıc"})),
				bad("role of 64 bytes", grant(map[string]any{"role": é32})),
				bad("object empty", grant(map[string]any{"object": ""})),
				bad("schema of 64 bytes", grant(map[string]any{"schema": é32})),
				bad("privileges empty", grant(map[string]any{"privileges": []any{}})),
				bad("privileges ALL", grant(map[string]any{"privileges": []any{"ALL"}})),
				bad("privileges ALL PRIVILEGES", grant(map[string]any{"privileges": []any{"all privileges"}})),
				bad("privilege of a schema on a table", grant(map[string]any{"privileges": []any{"SELECT", "USAGE"}})),
				bad("privilege of a table on a database", pg(map[string]any{"role": "app", "on": "database", "object": "d", "privileges": []any{"SELECT"}})),
				ok("privilege MAINTAIN", grant(map[string]any{"privileges": []any{"maintain"}})),
				ok("privilege with a long s", grant(map[string]any{"privileges": []any{"ſelect"}})),
				ok("privilege padded with Unicode spaces", grant(map[string]any{"privileges": []any{"\u3000select\u0085"}})),
				bad("privilege with a space inside", grant(map[string]any{"privileges": []any{"SEL ECT"}})),
				ok("privilege repeated", grant(map[string]any{"privileges": []any{"SELECT", "select"}})),
			},
			nullIsAbsent: []string{"schema", "server_password"},
		},

		"netconf::Config": {
			valid: []stdCase{
				{why: "every attribute", attrs: nc(map[string]any{"private_key": secret("SSH_KEY"), "operation": "replace",
					"keys": map[string]any{"acme/route": []any{"prefix"}}, "namespaces": map[string]any{"acme-router": "urn:acme:router"},
					"confirm_timeout": 30})},
				{why: "a leaf of ietf-system, a plain password", attrs: ncSystem(map[string]any{"password": "pw", "address": "[2001:db8::1]:830"})},
				purged(stdCase{why: "purged without config", attrs: without(nc(nil), "config")}),
			},
			cases: []stdCase{
				ok("a key alone", without(nc(map[string]any{"private_key": secret("SSH_KEY")}), "password")),
				ok("an IPv4 address", nc(map[string]any{"address": "192.0.2.1"})),
				ok("confirm_timeout 0", nc(map[string]any{"confirm_timeout": 0})),
				bad("neither password nor private_key", without(nc(nil), "password")),
				bad("private_key not PEM", nc(map[string]any{"private_key": "ssh-ed25519 AAAA"})),
				bad("address with a space", nc(map[string]any{"address": "r1 lab"})),
				bad("address with a user", nc(map[string]any{"address": "admin@r1.lab"})),
				bad("port 0", nc(map[string]any{"address": "r1.lab:0"})),
				bad("port 65536", nc(map[string]any{"address": "r1.lab:65536"})),
				bad("port with a leading zero", nc(map[string]any{"address": "r1.lab:0830"})),
				bad("user with a control character", nc(map[string]any{"user": "ad\tmin"})),
				bad("path without its module", nc(map[string]any{"path": "interfaces/interface[name=eth1]"})),
				bad("path with a trailing /", ncSystem(map[string]any{"path": "ietf-system:system/"})),
				bad("path with an empty key", nc(map[string]any{"path": "ietf-interfaces:interfaces/interface[name=]"})),
				bad("config empty", nc(map[string]any{"config": map[string]any{}})),
				bad("config with an unqualified top-level node", nc(map[string]any{"config": map[string]any{"interfaces": map[string]any{}}})),
				bad("operation upsert", nc(map[string]any{"operation": "upsert"})),
				bad("confirm_timeout negative", nc(map[string]any{"confirm_timeout": -1})),
				bad("confirm_timeout over a day", nc(map[string]any{"confirm_timeout": 86401})),
				bad("keys with a module", nc(map[string]any{"keys": map[string]any{"acme:route": []any{"prefix"}}})),
				bad("keys empty", nc(map[string]any{"keys": map[string]any{"route": []any{}}})),
				bad("namespace with a space", nc(map[string]any{"namespaces": map[string]any{"acme": "urn:acme router"}})),
				// The device checks these; the schema refuses them at compile time.
				{why: "an interface type that is no identity", attrs: ncIface(map[string]any{"type": "iana-if-type:nope"}), schemaStricter: true},
				{why: "a description that is a number", attrs: ncIface(map[string]any{"description": 5}), schemaStricter: true},
				{why: "enabled as a string", attrs: ncIface(map[string]any{"enabled": "yes"}), schemaStricter: true},
				{why: "an unknown leaf of an interface", attrs: ncIface(map[string]any{"colour": "red"}), schemaStricter: true},
				ok("an interface's IPv4 and IPv6 addresses (ietf-ip)", ncIface(map[string]any{
					"ietf-ip:ipv4": map[string]any{"enabled": true, "address": []any{map[string]any{"ip": "192.0.2.1", "prefix-length": 24}, map[string]any{"ip": "198.51.100.1", "netmask": "255.255.255.0"}}},
					"ietf-ip:ipv6": map[string]any{"address": []any{map[string]any{"ip": "2001:db8::1", "prefix-length": 64}}}})),
				{why: "an IPv4 prefix-length of 33", attrs: ncIface(map[string]any{"ietf-ip:ipv4": map[string]any{"address": []any{map[string]any{"ip": "192.0.2.1", "prefix-length": 33}}}}), schemaStricter: true},
				{why: "an IPv4 address with an octet over 255", attrs: ncIface(map[string]any{"ietf-ip:ipv4": map[string]any{"address": []any{map[string]any{"ip": "192.0.2.256", "prefix-length": 24}}}}), schemaStricter: true},
				{why: "an IPv4 address without its subnet", attrs: ncIface(map[string]any{"ietf-ip:ipv4": map[string]any{"address": []any{map[string]any{"ip": "192.0.2.1"}}}}), schemaStricter: true},
				{why: "an IPv6 address as an IPv4 one", attrs: ncIface(map[string]any{"ietf-ip:ipv4": map[string]any{"address": []any{map[string]any{"ip": "2001:db8::1", "prefix-length": 24}}}}), schemaStricter: true},
				{why: "a hostname with a space", attrs: ncSystem(map[string]any{"path": "ietf-system:system", "config": map[string]any{"ietf-system:system": map[string]any{"contact": "noc", "hostname": "r 1"}}}), schemaStricter: true},
			},
		},
		"rest::Object": restCases(),
	}
}

// restCases are the cases of rest::Object.
func restCases() typeCases {
	ok := func(why string, attrs map[string]any) stdCase { return stdCase{why: why, attrs: attrs, ok: true} }
	bad := func(why string, attrs map[string]any) stdCase { return stdCase{why: why, attrs: attrs} }
	purged := func(c stdCase) stdCase { c.purged = true; return c }
	obj := func(attrs map[string]any) map[string]any {
		return merge(map[string]any{"name": "app", "endpoint": "http://127.0.0.1:15672/api", "path": "/users/app", "body": map[string]any{"tags": []any{"x"}}}, attrs)
	}
	// found is an object found by a search, as an Alertmanager silence.
	found := func(attrs map[string]any) map[string]any {
		return merge(map[string]any{"name": "s", "endpoint": "https://am.example/api/v2", "collection": "/silences",
			"search": map[string]any{"path": "/silences", "match": map[string]any{"/comment": "intend:s"}, "id": "/id", "item": "/silence/{id}"},
			"body":   map[string]any{"comment": "intend:s"}}, attrs)
	}
	// etcd is a key of etcd's JSON gateway: found by a POST, no URL of its own.
	etcd := func(attrs map[string]any) map[string]any {
		return merge(map[string]any{"name": "k", "endpoint": "http://127.0.0.1:2379/v3", "collection": "/kv/put",
			"search": map[string]any{"path": "/kv/range", "method": "POST", "body": map[string]any{"key": "aw=="}, "items": "/kvs", "match": map[string]any{"/key": "aw=="}},
			"body":   map[string]any{"key": "aw==", "value": "dg=="},
			"update": map[string]any{"method": "POST", "path": "/kv/put"},
			"delete": map[string]any{"method": "POST", "path": "/kv/deleterange", "body": map[string]any{"key": "aw=="}}}, attrs)
	}
	cert, key := "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n", secret("TLS_KEY")
	return typeCases{
		valid: []stdCase{
			{why: "a user by its path", attrs: obj(nil)},
			{why: "every attribute", attrs: obj(map[string]any{
				"endpoint": "https://rabbit.example:15671/api", "collection": "/users",
				"managed": []any{"/tags"}, "write_only": map[string]any{"/password": secret("APP_PASSWORD")},
				"create":  map[string]any{"method": "PUT", "path": "/users/app"},
				"update":  map[string]any{"format": "merge-patch", "method": "PATCH", "path": "/users/app"},
				"delete":  map[string]any{"method": "DELETE", "path": "/users/app"},
				"success": []any{200, 201, 204}, "facts": map[string]any{"hash": "/password_hash", "all": ""},
				"auth":    map[string]any{"basic": map[string]any{"user": "admin", "password": secret("ADMIN")}},
				"tls":     map[string]any{"ca": cert, "cert": cert, "key": key, "server_name": "rabbit"},
				"headers": map[string]any{"X-Trace": "intend"}, "timeout": 2.5,
				"limits": map[string]any{"in_flight": 4, "rate": 10.5}, "max_body": 1 << 20,
			})},
			{why: "a silence found by a search", attrs: found(map[string]any{
				"search": map[string]any{"path": "/silences?filter=x", "method": "GET", "items": "", "match": map[string]any{"/comment": "intend:s"},
					"exclude": map[string]any{"/status/state": []any{"expired"}}, "id": "/id", "item": "/silence/{id}", "id_from": "/silenceID"},
				"update": map[string]any{"method": "POST", "path": "/silences", "id_field": "/id"},
				"auth":   map[string]any{"bearer": secret("TOKEN")},
			})},
			{why: "an etcd key", attrs: etcd(map[string]any{"auth": map[string]any{"header": map[string]any{"name": "X-Api-Key", "value": "k"}}})},
			purged(stdCase{why: "purged without body", attrs: without(obj(nil), "body")}),
		},
		cases: []stdCase{
			bad("neither path nor search", without(obj(nil), "path")),
			bad("path and search", merge(found(nil), map[string]any{"path": "/silence/1"})),
			bad("search without collection", without(found(nil), "collection")),
			purged(ok("search without collection, purged", without(found(nil), "collection"))),
			bad("path relative", obj(map[string]any{"path": "users/app"})),
			bad("path with a fragment", obj(map[string]any{"path": "/users/app#x"})),
			ok("path with a query", obj(map[string]any{"path": "/users/app?x=1"})),
			bad("endpoint ftp", obj(map[string]any{"endpoint": "ftp://h/api"})),
			bad("endpoint with a user", obj(map[string]any{"endpoint": "http://u:p@h/api"})),
			bad("endpoint with a query", obj(map[string]any{"endpoint": "http://h/api?x=1"})),
			ok("endpoint with a trailing /", obj(map[string]any{"endpoint": "http://h/api/"})),
			bad("name empty", obj(map[string]any{"name": ""})),
			bad("body a list", obj(map[string]any{"body": []any{1}})),
			ok("body with a secret", obj(map[string]any{"body": map[string]any{"password": secret("P")}})),
			bad("managed empty", obj(map[string]any{"managed": []any{}})),
			bad("managed not a pointer", obj(map[string]any{"managed": []any{"tags"}})),
			bad("managed with a bad escape", obj(map[string]any{"managed": []any{"/a~2"}})),
			bad("managed twice the same", obj(map[string]any{"managed": []any{"/tags", "/tags"}})),
			ok("managed escaped", obj(map[string]any{"managed": []any{"/a~1b/~0c"}})),
			bad("write_only not a pointer", obj(map[string]any{"write_only": map[string]any{"password": "x"}})),
			bad("create method DELETE", obj(map[string]any{"create": map[string]any{"method": "DELETE"}})),
			ok("create method POST", obj(map[string]any{"create": map[string]any{"method": "POST"}})),
			bad("update json-patch with PUT", obj(map[string]any{"update": map[string]any{"format": "json-patch", "method": "PUT"}})),
			bad("update merge-patch with POST", obj(map[string]any{"update": map[string]any{"format": "merge-patch", "method": "POST"}})),
			ok("update json-patch", obj(map[string]any{"update": map[string]any{"format": "json-patch"}})),
			ok("update full with PATCH", obj(map[string]any{"update": map[string]any{"format": "full", "method": "PATCH"}})),
			bad("update format yaml", obj(map[string]any{"update": map[string]any{"format": "yaml"}})),
			bad("update id_field without search", obj(map[string]any{"update": map[string]any{"id_field": "/id"}})),
			bad("update id_field without search.id", etcd(map[string]any{"update": map[string]any{"method": "POST", "path": "/kv/put", "id_field": "/id"}})),
			bad("delete method GET", obj(map[string]any{"delete": map[string]any{"method": "GET"}})),
			bad("delete body a string", obj(map[string]any{"delete": map[string]any{"body": "x"}})),
			bad("no URL of its own, no update.path", etcd(map[string]any{"update": map[string]any{"method": "POST"}})),
			bad("no URL of its own, no delete", without(etcd(nil), "delete")),
			bad("search without match", found(map[string]any{"search": map[string]any{"path": "/silences", "id": "/id", "item": "/silence/{id}"}})),
			bad("search match empty", found(map[string]any{"search": map[string]any{"path": "/silences", "match": map[string]any{}, "id": "/id", "item": "/silence/{id}"}})),
			bad("search match not a pointer", found(map[string]any{"search": map[string]any{"path": "/silences", "match": map[string]any{"comment": "x"}, "id": "/id", "item": "/silence/{id}"}})),
			bad("search item without {id}", found(map[string]any{"search": map[string]any{"path": "/silences", "match": map[string]any{"/c": "x"}, "id": "/id", "item": "/silence/x"}})),
			bad("search item without id", found(map[string]any{"search": map[string]any{"path": "/silences", "match": map[string]any{"/c": "x"}, "item": "/silence/{id}"}})),
			bad("search id_from without id", etcd(map[string]any{"search": map[string]any{"path": "/kv/range", "method": "POST", "match": map[string]any{"/key": "aw=="}, "id_from": "/id"}})),
			bad("search body with GET", etcd(map[string]any{"search": map[string]any{"path": "/kv/range", "method": "GET", "body": map[string]any{}, "match": map[string]any{"/key": "aw=="}}})),
			bad("search method PUT", etcd(map[string]any{"search": map[string]any{"path": "/kv/range", "method": "PUT", "match": map[string]any{"/key": "aw=="}}})),
			bad("search exclude not a list", found(map[string]any{"search": map[string]any{"path": "/s", "match": map[string]any{"/c": "x"}, "exclude": map[string]any{"/s": "expired"}, "id": "/id", "item": "/s/{id}"}})),
			bad("search exclude an empty list", found(map[string]any{"search": map[string]any{"path": "/s", "match": map[string]any{"/c": "x"}, "exclude": map[string]any{"/s": []any{}}, "id": "/id", "item": "/s/{id}"}})),
			bad("success empty", obj(map[string]any{"success": []any{}})),
			bad("success 404", obj(map[string]any{"success": []any{404}})),
			bad("facts not a pointer", obj(map[string]any{"facts": map[string]any{"id": "id"}})),
			bad("facts without a name", obj(map[string]any{"facts": map[string]any{"": "/id"}})),
			bad("auth two kinds", obj(map[string]any{"auth": map[string]any{"bearer": "t", "header": map[string]any{"name": "X", "value": "v"}}})),
			bad("auth none", obj(map[string]any{"auth": map[string]any{}})),
			bad("auth bearer empty", obj(map[string]any{"auth": map[string]any{"bearer": ""}})),
			bad("auth bearer with a line break", obj(map[string]any{"auth": map[string]any{"bearer": "a\r\nX-Evil: 1"}})),
			bad("auth basic user with a colon", obj(map[string]any{"auth": map[string]any{"basic": map[string]any{"user": "a:b", "password": "p"}}})),
			bad("auth basic without password", obj(map[string]any{"auth": map[string]any{"basic": map[string]any{"user": "a"}}})),
			bad("auth header name with a space", obj(map[string]any{"auth": map[string]any{"header": map[string]any{"name": "X Key", "value": "v"}}})),
			bad("tls cert without key", obj(map[string]any{"endpoint": "https://h/api", "tls": map[string]any{"cert": cert}})),
			bad("tls key without cert", obj(map[string]any{"endpoint": "https://h/api", "tls": map[string]any{"key": key}})),
			bad("tls with http", obj(map[string]any{"tls": map[string]any{"ca": cert}})),
			bad("tls ca empty", obj(map[string]any{"endpoint": "https://h/api", "tls": map[string]any{"ca": ""}})),
			bad("headers name with a colon", obj(map[string]any{"headers": map[string]any{"X:Y": "v"}})),
			bad("headers value with a line break", obj(map[string]any{"headers": map[string]any{"X": "a\nb"}})),
			bad("timeout zero", obj(map[string]any{"timeout": 0})),
			bad("timeout over an hour", obj(map[string]any{"timeout": 3601})),
			bad("limits in_flight zero", obj(map[string]any{"limits": map[string]any{"in_flight": 0}})),
			bad("limits in_flight 1.5", obj(map[string]any{"limits": map[string]any{"in_flight": 1.5}})),
			bad("limits rate negative", obj(map[string]any{"limits": map[string]any{"rate": -1}})),
			bad("limits unknown", obj(map[string]any{"limits": map[string]any{"burst": 1}})),
			bad("max_body 1000", obj(map[string]any{"max_body": 1000})),
			bad("max_body over 256 MiB", obj(map[string]any{"max_body": 256<<20 + 1})),
		},
	}
}

// The netconf::Config cases: an interface of ietf-interfaces, or the
// contact of ietf-system, with attrs over them.
func nc(attrs map[string]any) map[string]any { return ncIface(nil, attrs) }

func ncDevice() map[string]any {
	return map[string]any{"address": "r1.lab:2830", "user": "admin", "password": secret("R1_PASSWORD"), "host_key": "SHA256:2DO5vlXh3Aw3dc6GwKRUcNb0RszAXj8mN1ZhkI5B6Y0"}
}

func ncIface(leaves map[string]any, attrs ...map[string]any) map[string]any {
	entry := merge(map[string]any{"name": "eth1", "description": "uplink", "type": "iana-if-type:ethernetCsmacd", "enabled": true}, leaves)
	base := merge(ncDevice(), map[string]any{
		"path":   "ietf-interfaces:interfaces/interface[name=eth1]",
		"config": map[string]any{"ietf-interfaces:interfaces": map[string]any{"interface": []any{entry}}},
	})
	return merge(append([]map[string]any{base}, attrs...)...)
}

func ncSystem(attrs map[string]any) map[string]any {
	return merge(ncDevice(), map[string]any{
		"path":   "ietf-system:system/contact",
		"config": map[string]any{"ietf-system:system": map[string]any{"contact": "noc@example.net"}},
	}, attrs)
}
