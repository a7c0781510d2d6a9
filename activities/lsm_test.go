package activities

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/telemetry"
	"github.com/intendhq/intend/workflows"
)

// lsmModel is a model whose service entity vm refines into a directory and
// a file under root.
func lsmModel(root string) string {
	return `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#VM: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name:   =~"^[a-z][a-z0-9-]*$" @lsm(rw)
		memory: *2 | int & >=1 & <=64 @lsm(rw+)
		fqdn:   "\(name).vms.test" @lsm(r)
	}
	output: {
		dir: fs.#Directory & {path: "` + root + `/\(parameter.name)"}
		conf: fs.#File & {
			path:     "\(dir.path)/vm.conf"
			content:  "memory=\(parameter.memory)\n"
			requires: [dir]
		}
	}
}

services: vm: #VM
`
}

type lsmSetup struct {
	st   *store.Store
	env  store.Environment
	l    *LSM
	acts *testsuite.TestActivityEnvironment
	root string
	woke int
}

// newLSMSetup makes an environment whose model source is lsmModel, its
// entities registered as an upload does.
func newLSMSetup(t *testing.T) *lsmSetup {
	t.Helper()
	ctx := context.Background()
	st, e := newTestEnv(t, nil)
	s := &lsmSetup{st: st, env: e, root: t.TempDir()}
	dir := t.TempDir()
	for name, content := range map[string]string{"intend.yaml": "name: site\n", "main.cue": lsmModel(s.root)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := compiler.Compile(ctx, compiler.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	packed, err := project.Archive(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterEntities(ctx, e.ID, packed.Hash, res.Services); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutModelSource(ctx, e.ID, packed.Hash, packed.Archive, packed.Files, "cli"); err != nil {
		t.Fatal(err)
	}
	s.l = &LSM{Store: st, TempDir: t.TempDir(), Wake: func(context.Context, store.Environment, string) error {
		s.woke++
		return nil
	}}
	var suite testsuite.WorkflowTestSuite
	s.acts = suite.NewTestActivityEnvironment()
	s.l.Register(s.acts)
	return s
}

// instance writes an instance in state with the given sets, at version 1.
func (s *lsmSetup) instance(t *testing.T, id, state string, sets lsm.Sets) {
	t.Helper()
	name, _ := sets.Active["name"].(string)
	if name == "" {
		name, _ = sets.Candidate["name"].(string)
	}
	if _, err := s.st.ApplyInstanceChange(context.Background(), s.env.ID, store.InstanceChange{
		Entity: "vm", ID: id, Version: 1, Identity: name, State: state, Sets: sets, Event: json.RawMessage(`{}`),
	}); err != nil {
		t.Fatal(err)
	}
}

func run[In, Out any](t *testing.T, s *lsmSetup, a workflows.Activity[In, Out], in In) (Out, error) {
	t.Helper()
	var out Out
	v, err := s.acts.ExecuteActivity(a.Name(), in)
	if err != nil {
		return out, err
	}
	return out, v.Get(&out)
}

const (
	idWeb    = "00000000-0000-4000-8000-000000000001"
	idOther  = "00000000-0000-4000-8000-000000000002"
	idThird  = "00000000-0000-4000-8000-000000000003"
	idFourth = "00000000-0000-4000-8000-000000000004"
)

// TestApplyTransfer: a transfer writes the instance, its log row and the
// first response to its request; a retry of the same version writes
// nothing and returns the instance; another transfer at a written version
// is a non-retryable stale rejection; a version that is not next is a
// non-retryable conflict. Each version written is counted once, the retry
// and the conflict not at all.
func TestApplyTransfer(t *testing.T) {
	t.Parallel()
	s := newLSMSetup(t)
	ctx := context.Background()
	tel, err := telemetry.New()
	if err != nil {
		t.Fatal(err)
	}
	s.l.Metrics = tel
	in := workflows.ApplyTransferInput{EnvironmentID: s.env.ID, Entity: "vm", InstanceID: idWeb, Version: 1,
		Identity: "web", State: "start", Sets: lsm.Sets{Candidate: map[string]any{"name": "web"}},
		Event:   workflows.TransferEvent{Trigger: "create", Target: "start", Operations: []lsm.Operation{}, Request: "k1"},
		Errors:  json.RawMessage("null"),
		Request: &lsm.IdempotentRequest{Key: "k1", Hash: []byte{7}, Status: 201}}
	first, err := run(t, s, workflows.ApplyTransferActivity, in)
	if err != nil || first.Version != 1 || first.State != "start" || first.Identity != "web" || first.CreatedAt.IsZero() {
		t.Fatalf("apply = %+v %v", first, err)
	}
	// The retry (a lost answer) writes nothing and returns the instance.
	again, err := run(t, s, workflows.ApplyTransferActivity, in)
	if err != nil || again.State != "start" || again.Version != 1 || !again.UpdatedAt.Equal(first.UpdatedAt) {
		t.Fatalf("retry = %+v %v, want the instance as first written", again, err)
	}
	// Another transfer at the same version (a workflow behind PostgreSQL)
	// is refused as stale, naming the instance's version, and not written.
	other := in
	other.State = "rejected"
	other.Request = &lsm.IdempotentRequest{Key: "k2", Hash: []byte{8}, Status: 201}
	_, err = run(t, s, workflows.ApplyTransferActivity, other)
	var ae *temporal.ApplicationError
	var at int64
	if !errors.As(err, &ae) || ae.Type() != lsm.RejectStale || !ae.NonRetryable() || ae.Details(&at) != nil || at != 1 {
		t.Fatalf("another transfer at version 1: %v, want a non-retryable stale rejection naming version 1", err)
	}
	log, err := s.st.InstanceLog(ctx, s.env.ID, idWeb)
	if err != nil || len(log) != 1 || log[0].Errors != nil {
		t.Fatalf("log = %+v %v, want one row without errors", log, err)
	}
	var ev workflows.TransferEvent
	if err := json.Unmarshal(log[0].Event, &ev); err != nil || ev.Trigger != "create" || ev.Request != "k1" {
		t.Errorf("logged event = %s %v", log[0].Event, err)
	}
	resp, ok, err := s.st.LookupRequest(ctx, s.env.ID, "", "k1")
	if err != nil || !ok || resp.Status != 201 || !strings.Contains(string(resp.Response), `"state": "start"`) && !strings.Contains(string(resp.Response), `"state":"start"`) {
		t.Errorf("stored response = %+v %v %v", resp, ok, err)
	}
	if _, ok, _ := s.st.LookupRequest(ctx, s.env.ID, "", "k2"); ok {
		t.Error("the refused transfer stored a response for its key")
	}

	next := in
	next.Version, next.State, next.Request = 2, "rejected", nil
	next.Event = workflows.TransferEvent{Trigger: "auto", Source: "start", Target: "rejected", Error: true, Operations: []lsm.Operation{}}
	next.Errors = json.RawMessage(`[{"message":"no"}]`)
	if rec, err := run(t, s, workflows.ApplyTransferActivity, next); err != nil || rec.Version != 2 {
		t.Fatalf("version 2 = %+v %v", rec, err)
	}
	skip := next
	skip.Version = 4
	_, err = run(t, s, workflows.ApplyTransferActivity, skip)
	if !errors.As(err, &ae) || ae.Type() != lsm.RejectConflict || !ae.NonRetryable() {
		t.Fatalf("version 4 after 2: %v, want a non-retryable conflict", err)
	}

	env := "environment=" + s.env.Name
	want := map[string]float64{
		// the create, once: its retry found it written
		"intend_lsm_transfers_total{entity=vm," + env + ",error=false,source=,target=start,trigger=create}": 1,
		// the failed validation
		"intend_lsm_transfers_total{entity=vm," + env + ",error=true,source=start,target=rejected,trigger=auto}": 1,
		"intend_lsm_state_duration_seconds{entity=vm," + env + ",state=start}":                                   1,
	}
	if got := lsmSamples(t, tel); !reflect.DeepEqual(got, want) {
		t.Errorf("transfer metrics %v, want %v", got, want)
	}
}

// lsmSamples returns the LSM transfer metrics of tel as
// "name{label=value,...}" (labels by name) mapped to the counter's value
// or the histogram's sample count (whose sum must be positive).
func lsmSamples(t *testing.T, tel *telemetry.Telemetry) map[string]float64 {
	t.Helper()
	families, err := tel.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "intend_lsm_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() { // Gather sorts them by name
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
				if m.GetHistogram().GetSampleSum() <= 0 {
					t.Errorf("%s: the time sums to %v, want more than 0", key, m.GetHistogram().GetSampleSum())
				}
			}
		}
	}
	return out
}

// TestValidateInstance: the model compiles with the candidate among the
// live instances; the instance's own errors, and a duplicate id it shares
// with another instance, fail it; another instance's errors do not.
func TestValidateInstance(t *testing.T) {
	t.Parallel()
	s := newLSMSetup(t)
	// A stored r value the model would compute differently is left out.
	s.instance(t, idOther, "up", lsm.Sets{Active: map[string]any{"name": "db", "fqdn": "stale.example"}})
	validate := func(id string, attrs map[string]any) workflows.ValidateInstanceResult {
		t.Helper()
		res, err := run(t, s, workflows.ValidateInstanceActivity,
			workflows.ValidateInstanceInput{EnvironmentID: s.env.ID, Entity: "vm", InstanceID: id, Attributes: attrs})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := validate(idWeb, map[string]any{"name": "web", "memory": 4}); !res.OK || nullJSON(res.Errors) != nil ||
		!reflect.DeepEqual(res.ReadOnly, map[string]any{"fqdn": "web.vms.test"}) {
		t.Errorf("valid attributes: %+v, want success with the computed fqdn", res)
	}
	res := validate(idWeb, map[string]any{"name": "web", "memory": 100})
	if res.OK || !strings.Contains(string(res.Errors), instanceLabel("vm", idWeb)) {
		t.Errorf("memory 100: %+v, want a failure naming the instance", res)
	}
	// The same name as the live db instance: the same resource ids.
	res = validate(idWeb, map[string]any{"name": "db"})
	if res.OK || !strings.Contains(string(res.Errors), "duplicate id") {
		t.Errorf("duplicate name: %+v, want a failure for the duplicate ids", res)
	}
	// Another instance in a candidate state is not validated yet: its
	// candidate set is no part of web's validation (seed 003: only the
	// candidate being validated, and the designed and active instances).
	s.instance(t, idThird, "start", lsm.Sets{Candidate: map[string]any{"name": "bad", "memory": 0}})
	res = validate(idWeb, map[string]any{"name": "web"})
	if !res.OK || nullJSON(res.Errors) != nil {
		t.Errorf("another instance's unvalidated candidate: %+v, want success with no error of it", res)
	}
	// An update waiting for validation contributes the active set it was
	// validated with, not its candidate.
	s.instance(t, idFourth, "update_start", lsm.Sets{Active: map[string]any{"name": "old"},
		Candidate: map[string]any{"name": "new"}})
	if res := validate(idWeb, map[string]any{"name": "old"}); res.OK || !strings.Contains(string(res.Errors), "duplicate id") {
		t.Errorf("the name of another's active set: %+v, want a failure for the duplicate ids", res)
	}
	if res := validate(idWeb, map[string]any{"name": "new"}); !res.OK || nullJSON(res.Errors) != nil {
		t.Errorf("the name of another's unvalidated candidate: %+v, want success", res)
	}
}

// versionHashes reads the set's resources of a version: id → (hash, purged).
func (s *lsmSetup) setResources(t *testing.T, version int64, set string) map[string]store.VersionResource {
	t.Helper()
	rs, err := s.st.VersionResources(context.Background(), s.env.ID, version, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.VersionResource{}
	for _, r := range rs {
		if r.ResourceSet == set {
			out[r.ID] = r
		}
	}
	return out
}

// TestExportInstance: an export makes a partial export of the instance's
// set and releases it (queuing a deploy); the same export again exports
// nothing; purge exports the resources purged; remove drops the set.
// CheckInstanceDeploy follows the set's deploy state.
func TestExportInstance(t *testing.T) {
	t.Parallel()
	s := newLSMSetup(t)
	ctx := context.Background()
	set := "vm/" + idWeb
	active := map[string]any{"name": "web", "memory": 3}
	s.instance(t, idWeb, "creating", lsm.Sets{Active: active})
	export := func(mode string, version int64) workflows.ExportInstanceResult {
		t.Helper()
		res, err := run(t, s, workflows.ExportInstanceActivity, workflows.ExportInstanceInput{
			EnvironmentID: s.env.ID, Entity: "vm", InstanceID: idWeb, InstanceVersion: version, Mode: mode, Attributes: active})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	check := func(since time.Time) workflows.CheckInstanceDeployResult {
		t.Helper()
		res, err := run(t, s, workflows.CheckInstanceDeployActivity,
			workflows.CheckInstanceDeployInput{EnvironmentID: s.env.ID, Entity: "vm", InstanceID: idWeb, Since: since})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	res := export(workflows.ExportResources, 3)
	if res.Failed || !res.Changed || res.Version != 1 || res.Resources != 2 || res.Since.IsZero() {
		t.Fatalf("export = %+v, want version 1 with 2 resources", res)
	}
	rs := s.setResources(t, 1, set)
	conf := "fs::File[localhost,path=" + s.root + "/web/vm.conf]"
	if len(rs) != 2 || !strings.Contains(string(rs[conf].Attributes), "memory=3") || rs[conf].Purged {
		t.Fatalf("set %s in version 1 = %+v", set, rs)
	}
	env, err := s.st.GetEnvironment(ctx, s.env.ID)
	if err != nil || env.ReleasedVersion == nil || *env.ReleasedVersion != 1 || s.woke != 1 {
		t.Fatalf("environment = %+v %v (woke %d), want version 1 released and the scheduler woken", env, err, s.woke)
	}
	if c := check(res.Since); c.Status != workflows.DeployPending || c.Total != 2 {
		t.Errorf("before any deploy: %+v, want pending", c)
	}

	// The same export again (a retried activity): nothing new, but the
	// resources are not deployed, so a deploy of them is queued.
	again := export(workflows.ExportResources, 3)
	if again.Changed || again.Version != 1 || again.Failed || s.woke != 2 {
		t.Fatalf("export again = %+v (woke %d), want version 1 unchanged and a deploy queued", again, s.woke)
	}
	if vs, err := s.st.ListVersions(ctx, s.env.ID, 10); err != nil || len(vs) != 1 {
		t.Errorf("versions = %+v %v, want only 1", vs, err)
	}

	// One resource deployed, one failed: failed, but not for a check
	// that started after the failure.
	record := func(id, result string) {
		t.Helper()
		h, err := hex.DecodeString(rs[id].Hash)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if err := s.st.RecordActions(ctx, s.env.ID, []store.ActionRecord{{ResourceID: id, Hash: h, Version: 1,
			Action: "deploy", Reason: "test", StartedAt: now, FinishedAt: now, Result: ledger.Result(result), WorkflowID: "w", RunID: "r", Attempt: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	dir := "fs::Directory[localhost,path=" + s.root + "/web]"
	record(dir, "deployed")
	if c := check(res.Since); c.Status != workflows.DeployPending || c.Deployed != 1 {
		t.Errorf("one deployed: %+v, want pending", c)
	}
	record(conf, "failed")
	if c := check(res.Since); c.Status != workflows.DeployFailed || c.Failed != 1 {
		t.Errorf("one failed: %+v, want failed", c)
	}
	if c := check(time.Now().Add(time.Minute)); c.Status != workflows.DeployPending {
		t.Errorf("a failure before the export: %+v, want pending", c)
	}
	record(conf, "deployed")
	if c := check(res.Since); c.Status != workflows.DeployDone || c.Deployed != 2 {
		t.Errorf("all deployed: %+v, want done", c)
	}
	// Deployed as intended: the same export again queues nothing.
	if again := export(workflows.ExportResources, 4); again.Changed || s.woke != 2 {
		t.Errorf("export of a deployed set = %+v (woke %d), want nothing exported or queued", again, s.woke)
	}

	purge := export(workflows.ExportPurged, 5)
	if !purge.Changed || purge.Version != 2 {
		t.Fatalf("purge = %+v, want version 2", purge)
	}
	for id, r := range s.setResources(t, 2, set) {
		if !r.Purged {
			t.Errorf("%s is not purged in version 2", id)
		}
	}
	if c := check(purge.Since); c.Status != workflows.DeployPending {
		t.Errorf("after the purge export: %+v, want pending (the purge is not deployed)", c)
	}

	removed := export(workflows.ExportRemove, 6)
	if !removed.Changed || removed.Version != 3 || len(s.setResources(t, 3, set)) != 0 {
		t.Fatalf("remove = %+v, want version 3 without the set", removed)
	}
	if c := check(removed.Since); c.Status != workflows.DeployDone || c.Total != 0 {
		t.Errorf("a removed set: %+v, want done", c)
	}
	if again := export(workflows.ExportRemove, 6); again.Changed || again.Version != 3 {
		t.Errorf("remove again = %+v, want nothing exported", again)
	}
}

// TestExportInstanceFails: an instance whose resources do not compile is
// an outcome (Failed, with the errors), not an activity error.
func TestExportInstanceFails(t *testing.T) {
	t.Parallel()
	s := newLSMSetup(t)
	res, err := run(t, s, workflows.ExportInstanceActivity, workflows.ExportInstanceInput{
		EnvironmentID: s.env.ID, Entity: "vm", InstanceID: idWeb, InstanceVersion: 3, Mode: workflows.ExportResources,
		Attributes: map[string]any{"name": "Not A Name"}})
	if err != nil || !res.Failed || !strings.Contains(string(res.Errors), instanceLabel("vm", idWeb)) {
		t.Fatalf("export = %+v %v, want failed with the instance's errors", res, err)
	}
	if vs, err := s.st.ListVersions(context.Background(), s.env.ID, 10); err != nil || len(vs) != 0 {
		t.Errorf("versions = %+v %v, want none", vs, err)
	}
}
