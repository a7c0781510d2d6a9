package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
)

// TestDryrunCreateAllocation: a create's dry-run shows the values the
// create would be given from its pools (in the candidate set, in the
// resources the model renders from it, and listed as provisional), and
// takes none of them: the pools hold what they held, and the create
// that follows gets the same values. With a pool exhausted the dry-run
// answers what the create answers: the 409 naming the pool.
func TestDryrunCreateAllocation(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmallocdry", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmAllocModel(root)); err != nil {
		t.Fatal(err)
	}
	const inventory = "/lsm/v1/service_inventory/vm"
	dryrun := func(name, wait string) (client.InstanceDryrunReport, lsmReply) {
		t.Helper()
		r := lsmDo(t, c, env, http.MethodPost, inventory+"/dryrun?wait="+wait, "", map[string]any{"attributes": map[string]any{"name": name}})
		var d client.InstanceDryrunReport
		if r.status == http.StatusOK {
			if err := json.Unmarshal(r.body, &d); err != nil {
				t.Fatal(err)
			}
		}
		return d, r
	}
	used := func() map[string]int64 {
		t.Helper()
		var pools client.List[client.Pool]
		if err := lsmGet(t, c, env, "/lsm/v1/pools", &pools); err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, p := range pools.Items {
			out[p.Name] = p.Used
		}
		return out
	}
	// check dry-runs a create of name, which would be given vlan and
	// subnet; onTargets: its file's dry-run on the target shows them too
	// (once the environment's agent is served: after a deploy).
	check := func(name string, vlan float64, subnet string, onTargets bool) {
		t.Helper()
		wait := "0s"
		if onTargets {
			wait = "60s"
		}
		d, r := dryrun(name, wait)
		if r.status != http.StatusOK {
			t.Fatalf("dry-run of %s: %d %s", name, r.status, r.body)
		}
		want := []client.DryrunAllocation{
			{Attribute: "subnet", Pool: "p2p", Value: subnet, Detail: "would be allocated from pool p2p; another create may take it first"},
			{Attribute: "vlan", Pool: "vlan", Value: vlan, Detail: "would be allocated from pool vlan; another create may take it first"},
		}
		if !reflect.DeepEqual(d.Allocated, want) {
			t.Errorf("dry-run of %s: allocated %+v, want %+v", name, d.Allocated, want)
		}
		if d.CandidateAttributes["vlan"] != vlan || d.CandidateAttributes["subnet"] != subnet || !d.Validation.OK {
			t.Errorf("dry-run of %s: candidate %v, validation %+v", name, d.CandidateAttributes, d.Validation)
		}
		content := fmt.Sprintf("vlan=%g subnet=%s", vlan, subnet)
		if onTargets && (len(d.Targets) != 1 || !strings.Contains(string(d.Targets[0].Changes), content)) {
			t.Errorf("dry-run of %s: targets %+v, want %s.conf made with %q; %s", name, d.Targets, name, content, r.body)
		}
		if _, err := os.Stat(filepath.Join(root, name+".conf")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s.conf exists after its dry-run: %v", name, err)
		}
	}
	create := func(name string) client.ServiceInstance {
		t.Helper()
		r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": name}})
		if r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
		return r.instance(t)
	}

	check("web", 100, "10.0.0.0/30", false)
	if u := used(); u["vlan"] != 0 || u["p2p"] != 0 {
		t.Errorf("the dry-run took values: %v", u)
	}
	if web := create("web"); web.Candidate["vlan"] != 100.0 || web.Candidate["subnet"] != "10.0.0.0/30" {
		t.Errorf("the create after the dry-run got %v, the dry-run showed vlan 100, subnet 10.0.0.0/30", web.Candidate)
	}
	waitState(t, c, env, "web", "up", "rejected", "failed")
	check("db", 101, "10.0.0.4/30", true)
	check("db", 101, "10.0.0.4/30", true) // twice: the first took nothing
	if u := used(); u["vlan"] != 1 || u["p2p"] != 1 {
		t.Errorf("the dry-runs took values: %v", u)
	}
	if db := create("db"); db.Candidate["vlan"] != 101.0 || db.Candidate["subnet"] != "10.0.0.4/30" {
		t.Errorf("the create after the dry-runs got %v, they showed vlan 101, subnet 10.0.0.4/30", db.Candidate)
	}

	// Both pools are exhausted: the dry-run is the create's 409.
	before := used()
	_, r := dryrun("ftp", "0s")
	if p := r.problem(t); r.status != http.StatusConflict || !strings.Contains(p.Detail, "pool p2p (cidr 10.0.0.0/29 by /30) is exhausted") {
		t.Errorf("dry-run on exhausted pools: %d %s", r.status, r.body)
	}
	if u := used(); !reflect.DeepEqual(u, before) {
		t.Errorf("pools after the refused dry-run: %v, before %v", u, before)
	}
	if r := lsmDo(t, c, env, http.MethodGet, inventory+"/ftp", "", nil); r.status != http.StatusNotFound {
		t.Errorf("GET ftp after its dry-run: %d %s", r.status, r.body)
	}
}

// TestDryrunCreateInitialState: a create's dry-run takes the create's
// initial_state: it shows the create's transfer to it, and refuses one
// the lifecycle does not allow with the create's 422.
func TestDryrunCreateInitialState(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsminitdry", nil)
	if err := uploadModel(t, c, env, lsmPutModel(t.TempDir())); err != nil { // simple, with initial_states: ["acknowledged"]
		t.Fatal(err)
	}
	const path = "/lsm/v1/service_inventory/vm/dryrun"
	r := lsmDo(t, c, env, http.MethodPost, path, "", map[string]any{"attributes": map[string]any{"name": "web"}, "initial_state": "acknowledged"})
	var d client.InstanceDryrunReport
	if r.status != http.StatusOK || json.Unmarshal(r.body, &d) != nil || d.Transfer == nil ||
		d.Transfer.Target != "acknowledged" || d.ResultingState != "acknowledged" {
		t.Errorf("dry-run of a create in acknowledged: %d %s", r.status, r.body)
	}
	r = lsmDo(t, c, env, http.MethodPost, path, "", map[string]any{"attributes": map[string]any{"name": "web"}, "initial_state": "up"})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/initial_state", `allowed: "acknowledged"`) {
		t.Errorf("dry-run of a create in up: %d %s", r.status, r.body)
	}
}
