package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// filler sets every exported field of a value to a distinct non-zero
// value: every pointer allocated, every slice and map with one element,
// every string and number different from the others, so that a field the
// conversion drops, swaps or renames changes the JSON. A pointer to a
// struct being filled already (a recursive type: an attribute's embedded
// entity holds attributes) stays nil, so that filling ends.
type filler struct {
	n       int
	filling map[reflect.Type]bool
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

func (f *filler) fill(v reflect.Value) {
	f.n++
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 11, 25, 1, 2, 3, f.n, time.UTC)))
		return
	case v.Type() == rawType:
		v.SetBytes(fmt.Appendf(nil, `{"k":%d}`, f.n))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("v%d", f.n))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.n) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Interface:
		v.Set(reflect.ValueOf(fmt.Sprintf("any%d", f.n)))
	case reflect.Pointer:
		if f.filling[v.Type().Elem()] {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		f.fill(v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		f.fill(k)
		f.fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if f.filling == nil {
			f.filling = map[reflect.Type]bool{}
		}
		outer := f.filling[v.Type()]
		f.filling[v.Type()] = true
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
		f.filling[v.Type()] = outer
	default:
		panic("filler: no value for " + v.Type().String())
	}
}

// sameJSON checks that what the handlers write now (got, a wire type) is
// what they wrote before (want, the store's row or the view around it).
func sameJSON(t *testing.T, name string, want, got any) {
	t.Helper()
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !bytes.Equal(w, g) {
		t.Errorf("%s: the wire type's JSON is not the row's\nrow:  %s\nwire: %s", name, w, g)
	}
}

// checkWire compares a row and its conversion twice: with every field set
// (nothing dropped, renamed or swapped), and as the zero value (nil stays
// null, omitempty stays omitted).
func checkWire[R, W any](t *testing.T, conv func(R) W) {
	t.Helper()
	checkView(t, func(r R) R { return r }, conv)
}

// checkView is checkWire for a view that a handler built around rows: old
// is what the handler did to a view before writing it (nonNil on its
// lists).
func checkView[R, W any](t *testing.T, old func(R) R, conv func(R) W) {
	t.Helper()
	name := reflect.TypeFor[R]().String()
	var zero R
	sameJSON(t, name+" (zero)", old(zero), conv(zero))
	var full R
	(&filler{}).fill(reflect.ValueOf(&full).Elem())
	sameJSON(t, name+" (every field set)", old(full), conv(full))
}

// TestWireMatchesRows: every wire type's JSON is the JSON of the store row
// it is converted from, so the API's bodies stayed what they were when
// handlers wrote the rows, and a row and its wire type cannot drift apart
// unnoticed.
func TestWireMatchesRows(t *testing.T) {
	t.Parallel()
	checkWire(t, wireProject)
	checkWire(t, wireEnvironment)
	checkWire(t, wireVersionInfo)
	checkWire(t, wireVersionResource)
	checkWire(t, wireRequest)
	checkWire(t, wireRelease)
	checkWire(t, wireRollback)
	checkWire(t, wireDeployRun)
	checkWire(t, wireResourceState)
	checkWire(t, wireAction)
	checkWire(t, wireFact)
	checkWire(t, wireAgentExecutor)
	checkWire(t, wireExecutor)
	checkWire(t, wireToken)
	checkWire(t, wireAuditEntry)
	checkWire(t, wireCompile)
	checkWire(t, wireDryrunResult)
	checkWire(t, wireInstanceDryrun)
	checkWire(t, wireVersionDiff)
	checkWire(t, wireModelSource)
	checkWire(t, wireSets)
	checkWire(t, wireInstance)
	checkWire(t, wireInstanceLogEntry)
	checkWire(t, wireOrder)
	checkWire(t, wireOrderItem)
	checkWire(t, wireEntityDefinition)
	checkWire(t, wireServiceEntity)
	checkWire(t, wireEntityVersionInfo)
	checkWire(t, wireCallback)
	checkWire(t, wireCallbackEvent)
	checkWire(t, wireArtifact)
}

// TestWireMatchesViews: the responses that wrap rows (an agent with its
// executors, a version with its resources, ...) are what the views that
// embedded the rows wrote; each old view is spelt out here as it was.
func TestWireMatchesViews(t *testing.T) {
	t.Parallel()
	type agentView struct {
		store.Agent
		Executors []store.AgentExecutor `json:"executors"`
	}
	checkView(t, func(v agentView) agentView { v.Executors = nonNil(v.Executors); return v },
		func(v agentView) client.Agent { return wireAgent(v.Agent, v.Executors) })

	type versionResponse struct {
		store.VersionInfo
		Plugins   []ledger.Plugin         `json:"plugins"`
		Resources []store.VersionResource `json:"resources"`
		Next      string                  `json:"next,omitempty"`
	}
	checkView(t, func(v versionResponse) versionResponse {
		v.Plugins, v.Resources = nonNil(v.Plugins), nonNil(v.Resources)
		return v
	},
		func(v versionResponse) client.Version {
			return client.Version{VersionInfo: wireVersionInfo(v.VersionInfo), Plugins: wirePlugins(v.Plugins),
				Resources: wireAll(v.Resources, wireVersionResource), Next: v.Next}
		})

	type resourceResponse struct {
		store.ResourceState
		Actions []store.Action `json:"actions"`
	}
	checkView(t, func(v resourceResponse) resourceResponse { v.Actions = nonNil(v.Actions); return v },
		func(v resourceResponse) client.Resource {
			return client.Resource{ResourceState: wireResourceState(v.ResourceState), Actions: wireAll(v.Actions, wireAction)}
		})

	type dryrunResponse struct {
		store.DeployRun
		Results []store.DryrunResult `json:"results"`
		Next    string               `json:"next,omitempty"`
	}
	checkView(t, func(v dryrunResponse) dryrunResponse { v.Results = nonNil(v.Results); return v },
		func(v dryrunResponse) client.Dryrun {
			return client.Dryrun{DeployRun: wireDeployRun(v.DeployRun), Results: wireAll(v.Results, wireDryrunResult), Next: v.Next}
		})

	type instanceView struct {
		store.ServiceInstance
		Deployment   Deployment         `json:"deployment"`
		ReferencedBy []InstanceReferrer `json:"referenced_by"`
	}
	checkWire(t, func(v instanceView) client.InstanceView {
		return client.InstanceView{ServiceInstance: wireInstance(v.ServiceInstance), Deployment: v.Deployment, ReferencedBy: v.ReferencedBy}
	})

	type catalogEntity struct {
		store.ServiceEntity
		LatestVersion int                       `json:"latest_version"`
		Versions      []store.EntityVersionInfo `json:"versions"`
	}
	checkWire(t, func(v catalogEntity) client.CatalogEntity {
		return client.CatalogEntity{ServiceEntity: wireServiceEntity(v.ServiceEntity), LatestVersion: v.LatestVersion,
			Versions: wireSlice(v.Versions, wireEntityVersionInfo)}
	})

	type createdToken struct {
		store.Token
		Secret string `json:"token"`
	}
	checkWire(t, func(v createdToken) client.CreatedToken {
		return client.CreatedToken{Token: wireToken(v.Token), Secret: v.Secret}
	})

	type createdCallback struct {
		store.Callback
		Secret string `json:"secret"`
	}
	checkWire(t, func(v createdCallback) client.CreatedCallback {
		return client.CreatedCallback{Callback: wireCallback(v.Callback), Secret: v.Secret}
	})

	type callbackView struct {
		store.Callback
		DeadEvents []store.CallbackEvent `json:"dead_events"`
	}
	checkView(t, func(v callbackView) callbackView { v.DeadEvents = nonNil(v.DeadEvents); return v },
		func(v callbackView) client.CallbackView {
			return client.CallbackView{Callback: wireCallback(v.Callback), DeadEvents: wireAll(v.DeadEvents, wireCallbackEvent)}
		})

	type oldResourceDiagnosis struct {
		store.ResourceState
		Error *string         `json:"error,omitempty"`
		Logs  json.RawMessage `json:"logs,omitempty"`
	}
	type oldDiagnosis struct {
		ID         string `json:"id"`
		State      string `json:"state"`
		Version    int64  `json:"version"`
		Validation *struct {
			Version int64           `json:"version"`
			Errors  json.RawMessage `json:"errors"`
		} `json:"validation,omitempty"`
		Resources []oldResourceDiagnosis `json:"resources"`
	}
	checkWire(t, func(v oldDiagnosis) client.Diagnosis {
		out := client.Diagnosis{ID: v.ID, State: v.State, Version: v.Version}
		if v.Validation != nil {
			out.Validation = &client.FailedValidation{Version: v.Validation.Version, Errors: v.Validation.Errors}
		}
		if v.Resources != nil {
			out.Resources = []client.ResourceDiagnosis{}
		}
		for _, r := range v.Resources {
			out.Resources = append(out.Resources, client.ResourceDiagnosis{ResourceState: wireResourceState(r.ResourceState),
				Error: r.Error, Logs: r.Logs})
		}
		return out
	})

	type oldInstanceDryrun struct {
		ServiceEntity       string         `json:"service_entity"`
		ID                  string         `json:"id"`
		Version             int64          `json:"version"`
		State               string         `json:"state"`
		UpdateAllowed       bool           `json:"update_allowed"`
		Allowed             []string       `json:"allowed,omitempty"`
		CandidateAttributes map[string]any `json:"candidate_attributes"`
		Validation          struct {
			OK     bool            `json:"ok"`
			Errors json.RawMessage `json:"errors,omitempty"`
		} `json:"validation"`
		RenderErrors json.RawMessage       `json:"render_errors,omitempty"`
		DesiredState *store.InstanceDryrun `json:"desired_state,omitempty"`
		Dryrun       *store.DeployRun      `json:"dryrun,omitempty"`
		DryrunURL    string                `json:"dryrun_url,omitempty"`
		Targets      []store.DryrunResult  `json:"targets,omitempty"`
	}
	checkWire(t, func(v oldInstanceDryrun) client.InstanceDryrunReport {
		out := client.InstanceDryrunReport{ServiceEntity: v.ServiceEntity, ID: v.ID, Version: v.Version, State: v.State,
			UpdateAllowed: v.UpdateAllowed, Allowed: v.Allowed, CandidateAttributes: v.CandidateAttributes,
			Validation:   client.DryrunValidation{OK: v.Validation.OK, Errors: v.Validation.Errors},
			RenderErrors: v.RenderErrors, DryrunURL: v.DryrunURL, Targets: wireSlice(v.Targets, wireDryrunResult)}
		if v.DesiredState != nil {
			d := wireInstanceDryrun(*v.DesiredState)
			out.DesiredState = &d
		}
		if v.Dryrun != nil {
			r := wireDeployRun(*v.Dryrun)
			out.Dryrun = &r
		}
		return out
	})

	// The transfer event embedded lsm.Sets.
	type transferEvent struct {
		InstanceID string          `json:"id"`
		Version    int64           `json:"version"`
		Source     string          `json:"source,omitempty"`
		Target     string          `json:"target"`
		Trigger    string          `json:"trigger"`
		Error      bool            `json:"error"`
		Operations json.RawMessage `json:"operations"`
		Actor      string          `json:"actor,omitempty"`
		Request    string          `json:"request,omitempty"`
		Reason     string          `json:"reason,omitempty"`
		lsm.Sets
		Errors     json.RawMessage `json:"errors,omitempty"`
		Terminal   bool            `json:"terminal"`
		Timestamp  time.Time       `json:"timestamp"`
		Deployment *Deployment     `json:"deployment,omitempty"`
	}
	checkWire(t, func(v transferEvent) TransferEvent {
		return TransferEvent{InstanceID: v.InstanceID, Version: v.Version, Source: v.Source, Target: v.Target,
			Trigger: v.Trigger, Error: v.Error, Operations: v.Operations, Actor: v.Actor, Request: v.Request,
			Reason: v.Reason, AttributeSets: wireSets(v.Sets), Errors: v.Errors, Terminal: v.Terminal,
			Timestamp: v.Timestamp, Deployment: v.Deployment}
	})
}
