// Package modeltest runs a model author's tests (`intend test`): CUE files
// named *_test.cue in the project directory (and in its entry package's,
// if that is another), each with a struct `tests` of named tests. A test
// gives the compile its inputs (refinement and service instances, the
// related instances of references, facts) and says what it must produce:
//
//	tests: "a new app gets its own directory": {
//		instances: app: wiki: {name: "wiki", port: 8082}
//		resources: "fs::File[localhost,path=/tmp/q/apps/wiki/config.json]": {
//			content:  =~"127.0.0.1:8082"
//			requires: ["fs::Directory[localhost,path=/tmp/q/apps/wiki]"]
//		}
//		absent: ["fs::File[localhost,path=/tmp/q/apps/wiki/secret]"]
//	}
//
// Each test compiles the model on its own with compiler.Compile, as
// `intend compile` does: no server is contacted, nothing is deployed.
// Expectations are CUE values unified with what the compile produced, so
// a concrete value must be equal and a constraint (=~"…", >1024, a
// disjunction) must be met; a struct expects only the fields it names.
// Every mismatch is a Failure at the file:line:column of the expectation
// that was not met.
//
// The model's *_test.cue files are no part of the model: the CUE loader
// leaves files with that suffix out of a package (as the cue command
// does), so `intend compile` and `cue vet` never see them. A test file is
// compiled on its own: it may import CUE's builtin packages
// ("encoding/json", "strings", …) but not the model's packages.
package modeltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/internal/textdiff"
)

// Suffix is what names a test file.
const Suffix = "_test.cue"

// Options say which tests to run.
type Options struct {
	// Dir is the project directory (with intend.yaml).
	Dir string
	// Run, when set, runs only the tests whose name it matches.
	Run *regexp.Regexp
	// Resources keeps, in each Result, the ids of the resources its
	// compile produced (intend test -v).
	Resources bool
}

// Report is what a run of the tests found.
type Report struct {
	// Files are the test files, relative to the project directory.
	Files   []string `json:"files"`
	Results []Result `json:"tests"`
	Passed  int      `json:"passed"`
	Failed  int      `json:"failed"`
	// Took is how long the whole run took.
	Took time.Duration `json:"-"`
}

// OK tells whether every test that ran passed.
func (r *Report) OK() bool { return r.Failed == 0 }

// Result is one test's outcome.
type Result struct {
	Name string `json:"name"`
	// At is where the test is defined: file:line:column.
	At       string        `json:"at"`
	Passed   bool          `json:"passed"`
	Took     time.Duration `json:"-"`
	Failures []Failure     `json:"failures,omitempty"`
	// Resources are the ids its compile produced (Options.Resources).
	Resources []string `json:"resources,omitempty"`
}

// Failure is one expectation not met.
type Failure struct {
	// At is the file:line:column of the expectation.
	At      string `json:"at"`
	Message string `json:"message"`
}

func (f Failure) String() string {
	if f.At == "" {
		return f.Message
	}
	return f.At + ": " + f.Message
}

// MarshalJSON adds the durations in milliseconds.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		plain
		Milliseconds float64 `json:"ms"`
	}{plain(r), float64(r.Took.Microseconds()) / 1000})
}

// Run finds the project's test files and runs their tests in file order,
// each file's in the order written. An error is a problem of the run
// itself (no project in Dir, a file that cannot be read); a test file
// that does not compile is a failed test named after the file.
func Run(ctx context.Context, opts Options) (*Report, error) {
	start := time.Now()
	root, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	proj, err := project.Load(root)
	if err != nil {
		return nil, err
	}
	files, err := testFiles(root, proj)
	if err != nil {
		return nil, err
	}
	rep := &Report{Files: files, Results: []Result{}}
	r := &runner{ctx: ctx, root: root, opts: opts, models: compiler.NewModels(1)}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := r.file(f, rep); err != nil {
			return nil, err
		}
	}
	for _, res := range rep.Results {
		if res.Passed {
			rep.Passed++
		} else {
			rep.Failed++
		}
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// testFiles lists the *_test.cue files of the project directory and of
// its entry package's directory, relative to root and sorted.
func testFiles(root string, proj project.Project) ([]string, error) {
	dirs := []string{"."}
	if e := filepath.Clean(filepath.FromSlash(proj.Entry)); proj.Entry != "" && e != "." {
		dirs = append(dirs, e)
	}
	var files []string
	for _, d := range dirs {
		entries, err := os.ReadDir(filepath.Join(root, d))
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), Suffix) {
				files = append(files, filepath.ToSlash(filepath.Join(d, e.Name())))
			}
		}
	}
	slices.Sort(files)
	return files, nil
}

type runner struct {
	ctx    context.Context
	root   string
	opts   Options
	models *compiler.Models
}

// testFields are what a test may say.
var testFields = []string{"instances", "related", "facts", "resources", "absent", "count", "parameters", "error"}

// file runs the tests of one file.
func (r *runner) file(name string, rep *Report) error {
	data, err := os.ReadFile(filepath.Join(r.root, filepath.FromSlash(name)))
	if err != nil {
		return err
	}
	start := time.Now()
	cc := cuecontext.New()
	v := cc.CompileBytes(data, cue.Filename(name))
	if err == nil {
		err = v.Err()
	}
	if err == nil {
		err = v.Validate()
	}
	if err != nil {
		rep.Results = append(rep.Results, Result{Name: name, At: name, Took: time.Since(start), Failures: cueFailures(name, err)})
		return nil
	}
	tests := v.LookupPath(cue.MakePath(cue.Str("tests")))
	if !tests.Exists() {
		rep.Results = append(rep.Results, Result{Name: name, At: name, Took: time.Since(start),
			Failures: []Failure{{At: name, Message: `no tests: a test file has a struct "tests" of named tests`}}})
		return nil
	}
	it, err := tests.Fields()
	if err != nil {
		rep.Results = append(rep.Results, Result{Name: name, At: name, Took: time.Since(start), Failures: cueFailures(name, err)})
		return nil
	}
	for it.Next() {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		tname := it.Selector().Unquoted()
		if r.opts.Run != nil && !r.opts.Run.MatchString(tname) {
			continue
		}
		t := &test{runner: r, cc: cc, name: tname, v: it.Value()}
		rep.Results = append(rep.Results, t.run())
	}
	return nil
}

// test is one test being run.
type test struct {
	*runner
	cc       *cue.Context
	name     string
	v        cue.Value
	failures []Failure
}

func (t *test) failf(at cue.Value, format string, args ...any) {
	t.failures = append(t.failures, Failure{At: pos(at), Message: fmt.Sprintf(format, args...)})
}

func (t *test) field(name string) cue.Value {
	return t.v.LookupPath(cue.MakePath(cue.Str(name)))
}

func (t *test) run() Result {
	start := time.Now()
	res := Result{Name: t.name, At: pos(t.v)}
	opts, ok := t.inputs()
	var (
		out *compiler.Result
		err error
	)
	if ok {
		out, err = compiler.Compile(t.ctx, opts)
		t.check(out, err)
		if out != nil && t.opts.Resources {
			res.Resources = make([]string, len(out.Resources))
			for i, r := range out.Resources {
				res.Resources[i] = r.ID
			}
		}
	}
	res.Took, res.Failures, res.Passed = time.Since(start), t.failures, len(t.failures) == 0
	return res
}

// inputs reads the test's fields and makes the compile's options; false
// when they are wrong (each a failure).
func (t *test) inputs() (compiler.Options, bool) {
	opts := compiler.Options{Dir: t.root, Models: t.models, SourceKey: "intend test"}
	if k := t.v.IncompleteKind(); k != cue.StructKind {
		t.failf(t.v, "a test is a struct (with %s), not %s", strings.Join(testFields, ", "), k)
		return opts, false
	}
	it, err := t.v.Fields()
	if err != nil {
		t.failures = append(t.failures, cueFailures(pos(t.v), err)...)
		return opts, false
	}
	ok := true
	for it.Next() {
		if label := it.Selector().Unquoted(); !slices.Contains(testFields, label) {
			t.failf(it.Value(), "%s: not a field of a test (they are %s)", label, strings.Join(testFields, ", "))
			ok = false
		}
	}
	if e := t.field("error"); e.Exists() && (t.field("resources").Exists() || t.field("absent").Exists() ||
		t.field("count").Exists() || t.field("parameters").Exists()) {
		t.failf(e, "error: a test that expects the compile to fail expects no resources, absent, count or parameters")
		ok = false
	}
	var in struct {
		Instances map[string]map[string]json.RawMessage `json:"instances"`
		Related   map[string]map[string]json.RawMessage `json:"related"`
		Facts     map[string]map[string]json.RawMessage `json:"facts"`
	}
	for _, f := range []struct {
		name string
		to   *map[string]map[string]json.RawMessage
	}{{"instances", &in.Instances}, {"related", &in.Related}, {"facts", &in.Facts}} {
		v := t.field(f.name)
		if !v.Exists() {
			continue
		}
		if err := v.Validate(cue.Concrete(true)); err != nil {
			t.failures = append(t.failures, cueFailures(pos(v), err)...)
			ok = false
			continue
		}
		if err := v.Decode(f.to); err != nil {
			t.failf(v, "%s: want {<name>: {<name>: <value>}}: %v", f.name, err)
			ok = false
		}
	}
	opts.Instances, opts.Related, opts.Facts = in.Instances, in.Related, in.Facts
	return opts, ok
}

// check compares what the compile gave with the test's expectations.
func (t *test) check(out *compiler.Result, err error) {
	if want := t.field("error"); want.Exists() {
		t.checkError(want, out, err)
		return
	}
	if err != nil {
		var errs compiler.Errors
		if errors.As(err, &errs) {
			t.failf(t.v, "the model does not compile:%s", indent(errs.Error()))
		} else {
			t.failf(t.v, "the model does not compile: %v", err)
		}
		return
	}
	byID := make(map[string]*compiler.Resource, len(out.Resources))
	for i := range out.Resources {
		byID[out.Resources[i].ID] = &out.Resources[i]
	}
	if want := t.field("resources"); want.Exists() {
		it, err := want.Fields()
		if err != nil {
			t.failures = append(t.failures, cueFailures(pos(want), err)...)
		}
		for err == nil && it.Next() {
			id := it.Selector().Unquoted()
			path := fmt.Sprintf("resources[%q]", id)
			r := byID[id]
			if r == nil {
				t.failf(it.Value(), "%s: not produced (the model produces %d resources; intend test -v lists them)", path, len(out.Resources))
				continue
			}
			got := t.cc.CompileBytes(view(r))
			t.match(path, it.Value(), got, r)
		}
	}
	if absent := t.field("absent"); absent.Exists() {
		it, err := absent.List()
		if err != nil {
			t.failf(absent, "absent: a list of resource ids, not %s", absent.IncompleteKind())
		}
		for i := 0; err == nil && it.Next(); i++ {
			id, serr := it.Value().String()
			if serr != nil {
				t.failf(it.Value(), "absent[%d]: a resource id (a string), not %v", i, it.Value())
				continue
			}
			if r := byID[id]; r != nil {
				t.failf(it.Value(), "absent[%d]: %s is produced (by %s)", i, id, r.Origin)
			}
		}
	}
	if want := t.field("count"); want.Exists() {
		got := t.cc.Encode(len(out.Resources))
		if err := want.Unify(got).Validate(cue.Concrete(true)); err != nil {
			t.failf(want, "count: want %s resources, got %d", show(want), len(out.Resources))
		}
	}
	if want := t.field("parameters"); want.Exists() {
		t.checkParameters(want, out)
	}
}

// checkParameters compares the evaluated parameters of the instances the
// test gave (defaults and computed fields included) with want.
func (t *test) checkParameters(want cue.Value, out *compiler.Result) {
	ents, err := want.Fields()
	if err != nil {
		t.failures = append(t.failures, cueFailures(pos(want), err)...)
		return
	}
	for ents.Next() {
		ent := ents.Selector().Unquoted()
		insts, err := ents.Value().Fields()
		if err != nil {
			t.failures = append(t.failures, cueFailures(pos(ents.Value()), err)...)
			continue
		}
		for insts.Next() {
			id := insts.Selector().Unquoted()
			path := fmt.Sprintf("parameters.%s[%q]", ents.Selector(), id)
			p, ok := out.Parameters[ent][id]
			if !ok {
				t.failf(insts.Value(), "%s: no such instance was given (instances.%s[%q])", path, ents.Selector(), id)
				continue
			}
			t.match(path, insts.Value(), t.cc.CompileBytes(p), nil)
		}
	}
}

// checkError expects the compile to fail with an error that want (a
// string, or a constraint such as =~"regexp") matches: an error's text is
// its instance, path and message ("resources.motd.mode: invalid value
// …"), without its positions.
func (t *test) checkError(want cue.Value, out *compiler.Result, err error) {
	if err == nil {
		t.failf(want, "error: want the compile to fail with an error matching %s; it compiled (%d resources)", show(want), len(out.Resources))
		return
	}
	var errs compiler.Errors
	if !errors.As(err, &errs) {
		errs = compiler.Errors{{Message: err.Error()}}
	}
	var texts []string
	for _, e := range errs {
		text := e.Message
		if e.Path != "" {
			text = e.Path + ": " + text
		}
		if e.Instance != "" {
			text = e.Instance + ": " + text
		}
		if want.Unify(t.cc.Encode(text)).Validate(cue.Concrete(true)) == nil {
			return
		}
		texts = append(texts, text)
	}
	t.failf(want, "error: want an error matching %s, got:\n    %s", show(want), strings.Join(texts, "\n    "))
}

// match checks got against want at path: a struct field by field (the
// fields want names; got may have more), anything else by unification.
// r, when set, is the resource got shows (to explain a missing attribute).
func (t *test) match(path string, want, got cue.Value, r *compiler.Resource) {
	if want.IncompleteKind() == cue.StructKind && got.Kind() == cue.StructKind {
		it, err := want.Fields()
		if err != nil {
			t.failures = append(t.failures, cueFailures(pos(want), err)...)
			return
		}
		for it.Next() {
			sel := it.Selector()
			fpath := path + "." + sel.String()
			g := got.LookupPath(cue.MakePath(sel))
			if !g.Exists() {
				why := ""
				if r != nil && r.Undefined {
					why = " (the resource is undefined: an attribute that uses a fact not given is left out)"
				}
				t.failf(it.Value(), "%s: want %s, got nothing%s", fpath, show(it.Value()), why)
				continue
			}
			t.match(fpath, it.Value(), g, nil)
		}
		return
	}
	if err := want.Unify(got).Validate(cue.Concrete(true)); err != nil {
		if diff := textDiff(want, got); diff != "" {
			t.failf(want, "%s: differs (- want, + got):\n%s", path, strings.TrimSuffix(diff, "\n"))
			return
		}
		t.failf(want, "%s: want %s, got %s", path, show(want), show(got))
	}
}

// textDiff is the unified diff from want to got when both are text of
// several lines (a file's content), else "".
func textDiff(want, got cue.Value) string {
	w, werr := want.String()
	g, gerr := got.String()
	if werr != nil || gerr != nil || !want.IsConcrete() || !strings.Contains(strings.TrimSuffix(w, "\n"), "\n") {
		return ""
	}
	diff, _ := textdiff.Unified(w, g, 2, 40, 4096)
	return diff
}

// view is a resource as a test sees it: its attributes, with id,
// requires, resource_set and the flags beside them.
func view(r *compiler.Resource) []byte {
	m := make(map[string]any, len(r.Attributes)+8)
	for k, v := range r.Attributes {
		m[k] = v
	}
	m["id"] = r.ID
	m["requires"] = r.Requires
	m["resource_set"] = r.ResourceSet
	m["purged"] = r.Purged
	m["send_event"] = r.SendEvent
	m["receive_events"] = r.ReceiveEvents
	m["report_only"] = r.ReportOnly
	m["undefined"] = r.Undefined
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // every part is JSON already
	}
	return b
}

// show prints a value as CUE, on one line.
func show(v cue.Value) string {
	if v.IsConcrete() && v.Kind() != cue.StructKind && v.Kind() != cue.ListKind {
		if b, err := v.MarshalJSON(); err == nil {
			return string(b)
		}
	}
	if v.IsConcrete() {
		if err := v.Validate(cue.Concrete(true)); err == nil {
			if b, err := v.MarshalJSON(); err == nil {
				return string(b)
			}
		}
	}
	return strings.Join(strings.Fields(fmt.Sprint(v)), " ")
}

// pos is where v is written: file:line:column.
func pos(v cue.Value) string {
	return position(v.Pos())
}

func position(p token.Pos) string {
	if !p.IsValid() {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d", p.Filename(), p.Line(), p.Column())
}

// cueFailures turns CUE's errors into failures at their positions
// (at when they have none).
func cueFailures(at string, err error) []Failure {
	var fs []Failure
	for _, e := range cueerrors.Errors(err) {
		where := at
		if ps := cueerrors.Positions(e); len(ps) > 0 {
			where = position(ps[0])
		}
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		if p := e.Path(); len(p) > 0 {
			msg = strings.Join(p, ".") + ": " + msg
		}
		fs = append(fs, Failure{At: where, Message: msg})
	}
	return fs
}

func indent(s string) string {
	return strings.ReplaceAll("\n"+s, "\n", "\n    ")
}
