package activities

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/internal/store"
)

// A preview of a model change over the fleet (docs/lsm.md, "Preview of a
// model change"): what a new model source would do to every live service
// instance's resources, computed as the instances' exports would compute
// them once the model reaches them (ExportInstance: the active set, the
// instance alone, with what its references name), compared with the sets
// in the released version, without changing anything: no model source,
// no instance, no version, no compiler cache.

// previewChunk is how many instances one compile of a preview evaluates:
// a compile loads the model once for all of them (P8: 1,000 instances
// compile in under 2 s), and chunks let the compile workers share them.
const previewChunk = 100

// previewParallel bounds the chunks compiled at once: CUE evaluation is
// CPU-bound, so more than the cores gains nothing (the Runner's workers
// bound it again, shared fairly with the other environments).
var previewParallel = max(1, runtime.GOMAXPROCS(0))

// fleetResult is one instance's outcome while a page is compiled: the
// preview's, and the resources its export would hold (compared with the
// base version once every chunk is done).
type fleetResult struct {
	lsm.FleetInstance
	proposed []intent.Resource
}

// modelError is a model that does not compile by itself (not one
// instance's problem): the preview has nothing to show.
type modelError struct{ Errors compiler.Errors }

func (e *modelError) Error() string { return "the model does not compile: " + e.Errors.Error() }

// PreviewModel previews the model source archive (a project as PUT .../model
// takes it; checked by the caller) over the environment's live instances
// after the cursor after, at most limit of them, evaluating them in
// chunks, previewParallel at a time. A model that fails by itself is a
// *lsm.ModelFailure.
func (l *LSM) PreviewModel(ctx context.Context, envID string, archive []byte, after string, limit int) (lsm.ModelPreview, error) {
	start := time.Now()
	sum := sha256.Sum256(archive)
	out := lsm.ModelPreview{Hash: hex.EncodeToString(sum[:])}
	entities, err := l.Store.ListEntities(ctx, envID)
	if err != nil {
		return out, err
	}
	lifecycles := map[string]lsm.Lifecycle{}
	for _, e := range entities {
		lifecycles[e.Name] = e.Lifecycle
	}
	specs, err := l.versionSpecs(ctx, envID, entities)
	if err != nil {
		return out, err
	}
	live, err := l.Store.LiveServiceInstances(ctx, envID)
	if err != nil {
		return out, err
	}
	live = slices.Clone(live)
	slices.SortFunc(live, func(a, b store.ServiceInstance) int {
		return cmp.Or(strings.Compare(a.Entity, b.Entity), strings.Compare(a.ID, b.ID))
	})
	var page []store.ServiceInstance
	for i, inst := range live {
		if after != "" && lsm.PreviewCursor(inst.Entity, inst.ID) <= after {
			continue
		}
		if len(page) == limit {
			out.Next = lsm.PreviewCursor(live[i-1].Entity, live[i-1].ID)
			break
		}
		st := lifecycles[inst.Entity].States[inst.State]
		if inst.Deleted || (!st.Export && !st.Purge) {
			out.Skipped++
			continue
		}
		page = append(page, inst)
	}
	if len(page) == 0 {
		return out, nil
	}

	env, err := l.Store.GetEnvironment(ctx, envID)
	if err != nil {
		return out, err
	}
	var bad compiler.Errors
	mt, release, err := l.models.acquire(ctx, l.TempDir, out.Hash, func(tree string) error {
		if err := project.Extract(archive, tree); err != nil {
			bad = compiler.Errors{{Message: "model archive: " + err.Error()}}
			return err
		}
		return nil
	})
	if bad != nil {
		return out, &lsm.ModelFailure{Message: bad.Error()}
	}
	if err != nil {
		return out, err
	}
	defer release()
	var facts map[string]map[string]json.RawMessage
	if mt.needsFacts() {
		if facts, err = envFacts(ctx, l.Store, envID); err != nil {
			return out, err
		}
	}

	results := make([]fleetResult, len(page))
	resolve := liveResolver(live, lifecycles)
	pc := previewCompile{l: l, env: env, tree: mt, hash: out.Hash, facts: facts, specs: specs, lifecycles: lifecycles, resolve: resolve}
	var wg sync.WaitGroup
	sem := make(chan struct{}, previewParallel)
	errs := make([]error, (len(page)+previewChunk-1)/previewChunk)
	for c := range errs {
		lo, hi := c*previewChunk, min(len(page), (c+1)*previewChunk)
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[c] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			errs[c] = pc.chunk(ctx, page[lo:hi], results[lo:hi])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		var me *modelError
		if errors.As(err, &me) {
			return out, &lsm.ModelFailure{Message: me.Errors.Error()}
		}
		return out, err
	}

	proposed := map[string][]intent.Resource{}
	for i := range results {
		if !results[i].Failed {
			proposed[instanceSet(page[i].Entity, page[i].ID)] = results[i].proposed
		}
	}
	base, cmps, err := l.Store.CompareSets(ctx, envID, proposed)
	if err != nil {
		return out, classify(err)
	}
	out.BaseVersion = base
	for i := range results {
		results[i].Instance = page[i]
		if !results[i].Failed {
			results[i].Comparison = cmps[instanceSet(page[i].Entity, page[i].ID)]
		}
	}
	out.Instances = make([]lsm.FleetInstance, len(results))
	for i := range results {
		out.Instances[i] = results[i].FleetInstance
	}
	l.log().Info("model previewed over the service instances", "environment", env.Name, "model", out.Hash,
		"instances", len(results), "chunks", len(errs), "took", time.Since(start).Round(time.Millisecond))
	return out, nil
}

// previewCompile is what the chunks of one preview share.
type previewCompile struct {
	l          *LSM
	env        store.Environment
	tree       *modelTree
	hash       string
	facts      map[string]map[string]json.RawMessage
	specs      map[entityVersionKey][]lsm.AttributeSpec
	lifecycles map[string]lsm.Lifecycle
	resolve    resolver
}

// chunk evaluates insts with the new model, as their exports would, into
// out (the same length): each instance's resources, or its errors. An
// instance whose evaluation fails is taken out and the others compiled
// again (a compile that fails returns no resources), so each failing
// instance costs one more compile of the chunk at most.
func (p previewCompile) chunk(ctx context.Context, insts []store.ServiceInstance, out []fleetResult) error {
	instances := map[string]map[string]json.RawMessage{}
	versions := map[string]map[string]int{}
	rels := map[string]map[string]json.RawMessage{}
	pending := map[int]bool{}
	fail := func(i int, errs compiler.Errors) error {
		b, err := json.Marshal(errs)
		out[i] = fleetResult{FleetInstance: lsm.FleetInstance{Failed: true, Errors: b}}
		delete(pending, i)
		delete(instances[insts[i].Entity], insts[i].ID)
		return err
	}
	for i, inst := range insts {
		version := lsm.EntityVersion(inst.ActiveVersion)
		spec := p.specs[entityVersionKey{inst.Entity, version}]
		if inst.Active == nil {
			continue // an export of no attributes removes the set: nothing to evaluate
		}
		attrs := lsm.WithoutReadOnly(spec, inst.Active)
		rel, problems, err := related(ctx, p.resolve, spec, attrs)
		if err != nil {
			return err
		}
		if len(problems) > 0 {
			if err := fail(i, relatedErrors(inst.Entity, inst.ID, problems)); err != nil {
				return err
			}
			continue
		}
		addRelated(rels, inst.Entity, inst.ID, rel)
		b, err := json.Marshal(attrs)
		if err != nil {
			return fmt.Errorf("attributes of %s %s: %w", inst.Entity, inst.ID, err)
		}
		if instances[inst.Entity] == nil {
			instances[inst.Entity] = map[string]json.RawMessage{}
			versions[inst.Entity] = map[string]int{}
		}
		instances[inst.Entity][inst.ID] = b
		versions[inst.Entity][inst.ID] = version
		pending[i] = true
	}
	for len(pending) > 0 {
		opts := compiler.Options{Dir: p.tree.Tree(), Instances: instances, InstanceVersions: versions, Related: rels,
			Facts: p.facts, SourceKey: p.hash}
		res, err := p.l.compile(ctx, p.env, opts)
		if err == nil {
			p.tree.learned(res.DeclaresFacts)
			return p.collect(insts, out, pending, res)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var errs compiler.Errors
		if !errors.As(err, &errs) {
			errs = compiler.Errors{{Message: relative(err.Error(), p.tree.Tree())}}
		}
		owned := map[int]compiler.Errors{}
		var others compiler.Errors
		for _, e := range errs {
			found := false
			for i := range pending {
				if ownsAny(compiler.Errors{e}, insts[i].Entity, insts[i].ID) && (e.Instance != "" || e.Path != "" || len(e.Positions) > 0) {
					owned[i] = append(owned[i], e)
					found = true
				}
			}
			if !found {
				others = append(others, e)
			}
		}
		if len(owned) == 0 {
			// Nobody's in particular: the model itself (a limit too).
			return &modelError{Errors: others}
		}
		for i, errs := range owned {
			if err := fail(i, errs); err != nil {
				return err
			}
		}
	}
	return nil
}

// collect takes each pending instance's resources from a compile, as its
// export would hold them (purged in a state that purges).
func (p previewCompile) collect(insts []store.ServiceInstance, out []fleetResult, pending map[int]bool, res *compiler.Result) error {
	bySet := map[string][]compiler.Resource{}
	for _, r := range res.Resources {
		if r.ResourceSet != "" {
			bySet[r.ResourceSet] = append(bySet[r.ResourceSet], r)
		}
	}
	for i, inst := range insts {
		if out[i].Failed {
			continue
		}
		if !pending[i] {
			out[i].proposed = []intent.Resource{} // no attributes: the set goes
			continue
		}
		purge := p.lifecycles[inst.Entity].States[inst.State].Purge
		doc := struct {
			Resources []compiler.Resource `json:"resources"`
		}{Resources: []compiler.Resource{}}
		for _, r := range bySet[instanceSet(inst.Entity, inst.ID)] {
			r.Purged = r.Purged || purge
			doc.Resources = append(doc.Resources, r)
		}
		body, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		partial, _, err := intent.DecodePartial(body)
		if err != nil {
			b, merr := json.Marshal(compiler.Errors{{Instance: instanceLabel(inst.Entity, inst.ID),
				Message: "the instance's resources are invalid: " + err.Error()}})
			out[i] = fleetResult{FleetInstance: lsm.FleetInstance{Failed: true, Errors: b}}
			if merr != nil {
				return merr
			}
			continue
		}
		out[i].proposed = partial.Resources
	}
	return nil
}
