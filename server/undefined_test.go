package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
)

// maybeUndefined is a resource of an export that may be undefined.
type maybeUndefined struct {
	res
	Undefined bool `json:"undefined,omitempty"`
}

// fsAdapterCalls sums the calls the server's executor made to the fs::File
// adapter, every operation (validate, observe, create…) counted.
func fsAdapterCalls(t *testing.T, c *client.Client) float64 {
	t.Helper()
	resp, err := authGet(c, c.Base+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var n float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "intend_adapter_call_duration_seconds_count{") || !strings.Contains(line, `type="fs::File"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		n += v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUndefinedThroughTemporal: version 1 has a, undefined, b requiring a,
// and c on its own. The deploy deploys c, records a undefined and b
// skipped_for_undefined, and calls no adapter for either. Version 2
// defines a; its deploy deploys a and b (c is compliant already). A
// dry-run of version 1 reports a undefined and b skipped.
func TestUndefinedThroughTemporal(t *testing.T) {
	c, _ := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "undef", nil)
	dir := t.TempDir()
	pa, pb, pc := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	// a's content depends on a fact not reported yet: it has only its
	// id attribute.
	a := maybeUndefined{res: file(pa, "", ""), Undefined: true}
	b := maybeUndefined{res: file(pb, "b\n", "0644", a.ID)}
	cc := maybeUndefined{res: file(pc, "c\n", "0644")}

	run := deploy(t, c, env, undefinedBody(t, a, b, cc))
	if run.Status != "done" || run.Total != 3 || run.Deployed != 1 || run.Skipped != 2 || run.Failed != 0 {
		t.Errorf("run of version 1 = %+v; want done, 3 resources: 1 deployed, 2 skipped", run)
	}
	if got, _ := readFile(t, pc); got != "c\n" {
		t.Errorf("c = %q; want it deployed", got)
	}
	for _, p := range []string{pa, pb} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists (%v): an undefined resource or a dependent was deployed", p, err)
		}
	}
	callsV1 := fsAdapterCalls(t, c)
	if callsV1 == 0 {
		t.Fatal("no fs::File adapter call counted: c was deployed, so the metric is not read right")
	}
	for _, tt := range []struct {
		id, result, compliance string
		errorHas               string
	}{
		{a.ID, "undefined", "undefined", "values not known yet"},
		{b.ID, "skipped_for_undefined", "non_compliant", "requires " + a.ID + ", which is undefined"},
		{cc.ID, "deployed", "compliant", ""},
	} {
		st, acts := getResource(t, c, env, tt.id)
		if st.LastResult != tt.result || st.Compliance != tt.compliance {
			t.Errorf("%s: state %s/%s; want %s/%s", tt.id, st.LastResult, st.Compliance, tt.result, tt.compliance)
		}
		if len(acts) != 1 || acts[0].Result != tt.result || acts[0].WorkflowID != run.WorkflowID {
			t.Errorf("%s: actions %+v; want one %s action of run %s", tt.id, acts, tt.result, run.WorkflowID)
			continue
		}
		// Only an executor's records name it: a and b went to none.
		if ranByExecutor := acts[0].Executor != ""; ranByExecutor != (tt.result == "deployed") {
			t.Errorf("%s: action by executor %q; want an executor only for what was deployed", tt.id, acts[0].Executor)
		}
		if tt.errorHas != "" && (acts[0].Error == nil || !strings.Contains(*acts[0].Error, tt.errorHas)) {
			t.Errorf("%s: action error %v; want it to say %q", tt.id, acts[0].Error, tt.errorHas)
		}
	}

	// The fact arrived; a recompile defines a.
	a = maybeUndefined{res: file(pa, "a\n", "0644")}
	run = deploy(t, c, env, undefinedBody(t, a, b, cc))
	if run.Status != "done" || run.Total != 2 || run.Deployed != 2 || run.Skipped != 0 || run.Failed != 0 {
		t.Errorf("run of version 2 = %+v; want done, a and b deployed", run)
	}
	for p, want := range map[string]string{pa: "a\n", pb: "b\n", pc: "c\n"} {
		if got, _ := readFile(t, p); got != want {
			t.Errorf("%s = %q; want %q", p, got, want)
		}
	}
	for _, id := range []string{a.ID, b.ID, cc.ID} {
		if st, _ := getResource(t, c, env, id); st.LastResult != "deployed" || st.Compliance != "compliant" {
			t.Errorf("%s after version 2: %s/%s; want deployed/compliant", id, st.LastResult, st.Compliance)
		}
	}
	// Two more resources went through the adapter, as many calls each as
	// c did: nothing was called for a or b in version 1.
	if calls := fsAdapterCalls(t, c); calls != 3*callsV1 {
		t.Errorf("fs::File adapter calls: %v after version 1, %v after version 2; want 3× (c, then a and b, alike)",
			callsV1, calls)
	}

	// A dry-run of version 1 reports what a deploy of it would meet.
	var dry client.DeployRun
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/dryrun", map[string]any{"version": 1}, &dry); err != nil {
		t.Fatal(err)
	}
	out := waitDryrun(t, c, env, dry.Run)
	got := map[string]string{}
	for _, r := range out.Results {
		got[r.ResourceID] = r.Status
	}
	want := map[string]string{a.ID: "undefined", b.ID: "skipped", cc.ID: "unmodified"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dry-run of version 1 = %v; want %v", got, want)
	}
	if out.Skipped != 2 {
		t.Errorf("dry-run counts %+v; want 2 skipped", out.DeployRun)
	}
}

// undefinedBody is body for resources that may be undefined.
func undefinedBody(t *testing.T, rs ...maybeUndefined) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"resources": rs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
