package api

import (
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// The one place where the store's rows become the API's wire types (package
// client). Handlers write only wire types, so a row can change without the
// JSON changing by accident: where a row and its wire type have the same
// fields, a Go conversion is used and a new field in the row fails to
// compile here until someone decides whether it goes on the wire; the other
// conversions copy field by field, and TestWireMatchesRows checks that every
// wire type's JSON is its row's for a sample with every field set.

func wireProject(p store.Project) client.Project { return client.Project(p) }

func wireSettings(s store.Settings) client.Settings {
	return client.Settings{
		AutoDeploy: s.AutoDeploy, AutoRelease: s.AutoRelease, DeployInterval: s.DeployInterval, RepairInterval: s.RepairInterval,
		AutostartAgents: s.AutostartAgents, AgentTimeout: s.AgentTimeout, KeepVersions: s.KeepVersions,
		RetryAttempts: s.RetryAttempts, RetryBackoff: s.RetryBackoff, RepoURL: s.RepoURL, RepoBranch: s.RepoBranch,
		RecompileInterval: s.RecompileInterval, AllowPush: s.AllowPush, CompileCPULimit: s.CompileCPULimit,
		AllowedPaths: s.AllowedPaths, AllowedCommands: s.AllowedCommands, AllowedEndpoints: s.AllowedEndpoints,
		AllowedPlugins: s.AllowedPlugins, ArtifactQuota: s.ArtifactQuota,
		InstanceQuota: s.InstanceQuota, Retention: client.Retention(s.Retention),
	}
}

// wireEnvironment redacts a password in the repository URL.
func wireEnvironment(e store.Environment) client.Environment {
	e = redactEnv(e)
	return client.Environment{
		ID: e.ID, ProjectID: e.ProjectID, Name: e.Name, Description: e.Description,
		Settings: wireSettings(e.Settings), Halted: e.Halted, LastVersion: e.LastVersion,
		ReleasedVersion: e.ReleasedVersion, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
		Protected: e.Protected, DecommissionVersion: e.DecommissionVersion,
	}
}

func wireVersionInfo(v store.VersionInfo) client.VersionInfo { return client.VersionInfo(v) }

func wireVersionResource(r store.VersionResource) client.VersionResource {
	return client.VersionResource(r)
}

func wireRequest(r store.Request) client.Request { return client.Request(r) }

func wireRelease(r store.Release) client.Release {
	out := client.Release{Version: wireVersionInfo(r.Version), Changed: r.Changed, AlreadyReleased: r.AlreadyReleased}
	if r.Request != nil {
		req := wireRequest(*r.Request)
		out.Request = &req
	}
	return out
}

func wireRollback(r store.Rollback) client.Rollback {
	return client.Rollback{Release: wireRelease(r.Release), From: r.From, KeptInstanceResources: r.KeptInstanceResources}
}

func wireDeployRun(r store.DeployRun) client.DeployRun {
	out := client.DeployRun{Run: r.Run, Version: r.Version, Action: r.Action, Reason: r.Reason, Status: r.Status,
		RequestedAt: r.RequestedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Total: r.Total,
		Deployed: r.Deployed, Failed: r.Failed, Skipped: r.Skipped, Unavailable: r.Unavailable, WorkflowID: r.WorkflowID}
	if st := r.Stages; st != nil {
		out.Stages = &client.RunStages{Queued: client.StageStats(st.Queued), PollWait: client.StageStats(st.PollWait),
			Execute: client.StageStats(st.Execute), Record: client.StageStats(st.Record),
			MaxInFlight: st.MaxInFlight, HistoryEvents: st.HistoryEvents, Segments: st.Segments}
	}
	return out
}

func wireResourceState(r store.ResourceState) client.ResourceState { return client.ResourceState(r) }

func wireAction(a store.Action) client.Action { return client.Action(a) }

func wireFact(f store.Fact) client.Fact { return client.Fact(f) }

func wireAgentExecutor(e store.AgentExecutor) client.AgentExecutor { return client.AgentExecutor(e) }

// wireAgent is an agent with the executors that serve it.
func wireAgent(a store.Agent, execs []store.AgentExecutor) client.Agent {
	return client.Agent{Name: a.Name, Paused: a.Paused, FirstSeen: a.FirstSeen,
		Executors: wireAll(execs, wireAgentExecutor)}
}

func wireExecutor(e store.Executor) client.Executor { return client.Executor(e) }

func wireToken(t store.Token) client.Token { return client.Token(t) }

func wireAuditEntry(e store.AuditEntry) client.AuditEntry { return client.AuditEntry(e) }

// wireCompile redacts a password in the repository URL.
func wireCompile(c store.Compile) client.Compile { return client.Compile(redactCompile(c)) }

func wireDryrunResult(r store.DryrunResult) client.DryrunResult { return client.DryrunResult(r) }

func wireModified(ms []intent.ModifiedResource) []client.ModifiedResource {
	if ms == nil {
		return nil
	}
	out := make([]client.ModifiedResource, len(ms))
	for i, m := range ms {
		out[i] = client.ModifiedResource{ID: m.ID}
		if m.Changes != nil {
			out[i].Changes = make(map[string]client.Change, len(m.Changes))
			for k, c := range m.Changes {
				out[i].Changes[k] = client.Change(c)
			}
		}
	}
	return out
}

func wireVersionDiff(d store.VersionDiff) client.VersionDiff {
	return client.VersionDiff{From: d.From, To: d.To, Added: d.Added, Removed: d.Removed,
		Modified: wireModified(d.Modified), Next: d.Next}
}

// wireModelSource leaves out Replaced, which only tells the server
// whether to announce the upload.
func wireModelSource(m store.ModelSource) client.ModelSource {
	return client.ModelSource{Hash: m.Hash, Files: m.Files, Size: m.Size, Origin: m.Origin,
		UploadedAt: m.UploadedAt, AnnouncedAt: m.AnnouncedAt}
}

func wireInstanceDryrun(d store.InstanceDryrun) client.InstanceDryrun {
	out := client.InstanceDryrun{BaseVersion: d.BaseVersion, Added: d.Added, Removed: d.Removed,
		Modified: wireModified(d.Modified), Unchanged: d.Unchanged}
	if d.Run != nil {
		run := wireDeployRun(*d.Run)
		out.Run = &run
	}
	return out
}

func wireSets(s lsm.Sets) client.AttributeSets { return client.AttributeSets(s) }

func wireInstance(i store.ServiceInstance) client.ServiceInstance {
	return client.ServiceInstance{ID: i.ID, Entity: i.Entity, Identity: i.Identity, State: i.State,
		Version: i.Version, EntityVersion: i.EntityVersion, AttributeSets: wireSets(i.Sets),
		Metadata: i.Metadata, Deleted: i.Deleted, CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt}
}

func wireInstanceLogEntry(e store.InstanceLogEntry) client.InstanceLogEntry {
	return client.InstanceLogEntry{Version: e.Version, State: e.State, AttributeSets: wireSets(e.Sets),
		Event: e.Event, Errors: e.Errors, CreatedAt: e.CreatedAt}
}

// wireOrderItem leaves out Deps, the positions the store resolved
// DependsOn to (not on the wire).
func wireOrderItem(it store.OrderItem) client.OrderItem {
	return client.OrderItem{ID: it.ID, Position: it.Position, Operation: it.Operation, Entity: it.Entity,
		InstanceID: it.InstanceID, DependsOn: it.DependsOn, Status: it.Status, VersionBefore: it.VersionBefore,
		Version: it.Version, State: it.State, Error: it.Error, StartedAt: it.StartedAt,
		FinishedAt: it.FinishedAt, Request: it.Request}
}

func wireOrder(o store.Order) client.Order {
	return client.Order{ID: o.ID, Policy: o.Policy, Status: o.Status, RequestedBy: o.RequestedBy,
		ItemCount: o.ItemCount, Counts: o.Counts, CreatedAt: o.CreatedAt, StartedAt: o.StartedAt,
		FinishedAt: o.FinishedAt, Items: wireSlice(o.Items, wireOrderItem)}
}

func wireEntityDefinition(e lsm.Entity) client.EntityDefinition {
	out := client.EntityDefinition{Name: e.Name, Description: e.Description, Identity: e.Identity,
		Lifecycle: wireLifecycle(e.Lifecycle), Version: e.Version}
	if e.Attributes != nil {
		out.Attributes = wireAttributes(e.Attributes)
	}
	return out
}

func wireAttributes(specs []lsm.AttributeSpec) []client.AttributeSpec {
	out := make([]client.AttributeSpec, len(specs))
	for i, a := range specs {
		out[i] = client.AttributeSpec{Name: a.Name, Modifier: string(a.Modifier),
			Description: a.Description, Default: a.Default, Schema: a.Schema, Required: a.Required,
			References: a.References, Allocate: a.Allocate}
		if a.Embedded != nil {
			out[i].Embedded = &client.EmbeddedSpec{Attributes: wireAttributes(a.Embedded.Attributes),
				List: a.Embedded.List, Key: a.Embedded.Key}
		}
	}
	return out
}

func wireLifecycle(l lsm.Lifecycle) client.Lifecycle {
	out := client.Lifecycle{Name: l.Name, Start: l.Start, InitialStates: l.InitialStates}
	if l.States != nil {
		out.States = make(map[string]client.LifecycleState, len(l.States))
		for k, s := range l.States {
			out.States[k] = client.LifecycleState{Name: s.Name, ModelState: string(s.ModelState),
				Export: s.Export, Purge: s.Purge, Terminal: s.Terminal, Description: s.Description}
		}
	}
	if l.Transfers != nil {
		out.Transfers = make([]client.Transfer, len(l.Transfers))
		for i, t := range l.Transfers {
			out.Transfers[i] = client.Transfer{Source: t.Source, Target: t.Target, Error: t.Error,
				Trigger: string(t.Trigger), Validate: t.Validate, TargetOperation: operations(t.TargetOperation),
				ErrorOperation: operations(t.ErrorOperation), Description: t.Description, ConfigName: t.ConfigName}
		}
	}
	return out
}

func operations(ops []lsm.Operation) []string {
	if ops == nil {
		return nil
	}
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = string(o)
	}
	return out
}

func wireServiceEntity(e store.ServiceEntity) client.ServiceEntity {
	return client.ServiceEntity{EntityDefinition: wireEntityDefinition(e.Entity), ModelHash: e.ModelHash,
		Instances: e.Instances, RegisteredAt: e.RegisteredAt, UpdatedAt: e.UpdatedAt,
		Config: client.EntityConfig(e.Config)}
}

func wireEntityVersionInfo(v store.EntityVersionInfo) client.EntityVersionInfo {
	return client.EntityVersionInfo{EntityDefinition: wireEntityDefinition(v.Entity), ModelHash: v.ModelHash,
		RegisteredAt: v.RegisteredAt, UpdatedAt: v.UpdatedAt, Latest: v.Latest, Instances: v.Instances}
}

func wireCallback(c store.Callback) client.Callback {
	return client.Callback{ID: c.ID, EnvironmentID: c.EnvironmentID, ServiceEntity: c.ServiceEntity,
		URL: c.URL, Description: c.Description, CreatedBy: c.CreatedBy, CreatedAt: c.CreatedAt,
		Stats: client.CallbackStats(c.Stats)}
}

func wirePool(p store.PoolUsage) client.Pool {
	return client.Pool{Name: p.Name, Kind: string(p.Kind), From: p.From, To: p.To, Prefix: p.Prefix, Size: p.Size,
		Values: p.Values, Used: p.Used, Free: p.Free}
}

func wirePoolAllocation(a store.Allocation) client.PoolAllocation {
	return client.PoolAllocation{Value: a.Value, ServiceEntity: a.Entity, InstanceID: a.InstanceID, Attribute: a.Attribute,
		AllocatedAt: a.AllocatedAt}
}

func wireCallbackEvent(e store.CallbackEvent) client.CallbackEvent { return client.CallbackEvent(e) }

// wireAll converts every row of rows; a nil or empty rows is an empty,
// non-nil slice, so that a list is [] on the wire and never null.
func wireAll[R, W any](rows []R, conv func(R) W) []W {
	out := make([]W, len(rows))
	for i, r := range rows {
		out[i] = conv(r)
	}
	return out
}

// wireSlice converts every row of rows, and nil to nil (null on the wire,
// or omitted): for the fields that never went through nonNil.
func wireSlice[R, W any](rows []R, conv func(R) W) []W {
	if rows == nil {
		return nil
	}
	return wireAll(rows, conv)
}
