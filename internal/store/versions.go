package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/runstages"
)

// VersionInfo describes one desired-state version.
type VersionInfo struct {
	Version       int64      `json:"version"`
	CreatedAt     time.Time  `json:"created_at"`
	ReleasedAt    *time.Time `json:"released_at"`
	ResourceCount int        `json:"resource_count"`
	ChangedCount  int        `json:"changed_count"`
	// ExportedBy and ReleasedBy are the actors (auth.Principal.Actor) who
	// exported and released it; "" for versions from before the audit.
	ExportedBy string `json:"exported_by,omitempty"`
	ReleasedBy string `json:"released_by,omitempty"`
	// KeptInstanceResources counts the resources of live service
	// instances that a full export without them carried over from the
	// version before (ExportVersion).
	KeptInstanceResources int `json:"kept_instance_resources,omitempty"`
}

// VersionResource is one resource as stored in a version.
type VersionResource struct {
	ID            string          `json:"id"`
	Attributes    json.RawMessage `json:"attributes"`
	Requires      []string        `json:"requires"`
	Purged        bool            `json:"purged"`
	SendEvent     bool            `json:"send_event"`
	ReceiveEvents bool            `json:"receive_events"`
	ReportOnly    bool            `json:"report_only"`
	// Undefined: the attributes depend on values not known yet (and may
	// be incomplete); the resource is not deployed.
	Undefined bool `json:"undefined"`
	// ResourceSet is the resource's set; "" (and absent in JSON) is the
	// shared set.
	ResourceSet string `json:"resource_set,omitempty"`
	Hash        string `json:"hash"`
}

// ExportVersion stores v as the environment's next version and returns it.
// Only what differs from the previous version is written: unchanged resources
// keep their open membership row, contents are stored once per hash.
// Exports of one environment are serialised by a lock on its row.
func (s *Store) ExportVersion(ctx context.Context, envID string, v intent.Version) (VersionInfo, error) {
	return s.ExportVersionOf(ctx, envID, v, "")
}

// ExportVersionOf is ExportVersion of a version compiled from the model
// source model ("": none known), which the version records: releasing
// it makes that source the live service instances' model
// (ReleaseVersion). A model the environment does not store is refused
// (ErrInvalid).
func (s *Store) ExportVersionOf(ctx context.Context, envID string, v intent.Version, model string) (VersionInfo, error) {
	var info VersionInfo
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		last, err := lockForExport(ctx, tx, envID)
		if err != nil {
			return err
		}
		members, open, kept, err := fullMembers(ctx, tx, envID, v)
		if err != nil {
			return err
		}
		info, err = writeVersion(ctx, tx, envID, last+1, len(open), open, members)
		info.KeptInstanceResources = kept
		if err != nil {
			return err
		}
		if err := setVersionPlugins(ctx, tx, envID, info.Version, v.Plugins); err != nil {
			return err
		}
		return setVersionModel(ctx, tx, envID, info.Version, model)
	})
	return info, err
}

// setVersionModel records the model source a version was compiled from,
// in tx; "" records nothing.
func setVersionModel(ctx context.Context, tx pgx.Tx, envID string, version int64, model string) error {
	if model == "" {
		return nil
	}
	tag, err := tx.Exec(ctx, `update versions set model_hash = $3 where environment_id = $1::uuid and version = $2
		and exists (select 1 from model_sources where environment_id = $1::uuid and hash = $3)`, envID, version, model)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return NotFound("model source %s (upload it first: PUT .../model)", model)
	}
	return nil
}

// setVersionPlugins records the plugins a version requires, in tx;
// none records null.
func setVersionPlugins(ctx context.Context, tx pgx.Tx, envID string, version int64, plugins []ledger.Plugin) error {
	if len(plugins) == 0 {
		return nil
	}
	b, err := json.Marshal(plugins)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `update versions set plugins = $3 where environment_id = $1::uuid and version = $2`,
		envID, version, b)
	return err
}

// copyVersionPlugins gives version the plugins of version from, in tx: a
// version made of another (a partial export that names no plugins, a
// rollback) runs the plugins it ran.
func copyVersionPlugins(ctx context.Context, tx pgx.Tx, envID string, version, from int64) error {
	if from <= 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `update versions set plugins = (select plugins from versions
		where environment_id = $1::uuid and version = $3) where environment_id = $1::uuid and version = $2`,
		envID, version, from)
	return err
}

// VersionPlugins returns the plugins the version requires (empty: none).
func (s *Store) VersionPlugins(ctx context.Context, envID string, version int64) ([]ledger.Plugin, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `select plugins from versions where environment_id = $1::uuid and version = $2`,
		envID, version).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, NotFound("version %d", version)
	}
	if err != nil {
		return nil, err
	}
	return decodePlugins(raw)
}

// decodePlugins reads a versions.plugins value; null is none.
func decodePlugins(raw []byte) ([]ledger.Plugin, error) {
	ps := []ledger.Plugin{}
	if len(raw) == 0 {
		return ps, nil
	}
	if err := json.Unmarshal(raw, &ps); err != nil {
		return nil, fmt.Errorf("stored plugins: %w", err)
	}
	return ps, nil
}

// fullMembers makes the members of a full export of v: v's resources and
// the live instances' sets it does not hold (keepInstanceSets), with the
// open rows' hashes and how many resources were kept.
func fullMembers(ctx context.Context, tx pgx.Tx, envID string, v intent.Version) ([]member, map[string][]byte, int, error) {
	members := membersOf(v)
	kept, open, err := keepInstanceSets(ctx, tx, envID, v)
	if err != nil {
		return nil, nil, 0, err
	}
	for i := range kept {
		members = append(members, keptMember(&kept[i]))
	}
	return members, open, len(kept), nil
}

// keptMember is a stored resource kept as it is.
func keptMember(k *intent.StoredResource) member {
	return member{id: k.ID.String(), hash: k.Hash, kept: k}
}

// keepInstanceSets returns the resources of the newest version (base)
// that belong to the resource set of a live service instance
// ("<entity>/<id>") that v does not hold: a full export made without the
// inventory (intend export compiles the model alone) carries them over, so
// that the instances keep their resources. A set that v holds is v's (a
// compile with the inventory).
//
// It also returns the open rows' hashes for writeVersion.
func keepInstanceSets(ctx context.Context, tx pgx.Tx, envID string, v intent.Version) ([]intent.StoredResource, map[string][]byte, error) {
	rows, err := tx.Query(ctx, `select entity || '/' || id::text from service_instances
		where environment_id = $1::uuid and not deleted`, envID)
	if err != nil {
		return nil, nil, err
	}
	live, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, err
	}
	if len(live) == 0 {
		open, err := openHashes(ctx, tx, envID, "")
		return nil, open, err
	}
	base, open, err := openResources(ctx, tx, envID)
	if err != nil {
		return nil, nil, err
	}
	liveSet := make(map[string]bool, len(live))
	for _, s := range live {
		liveSet[s] = true
	}
	inV := make(map[string]bool, len(v.Resources))
	setsInV := map[string]bool{}
	for i := range v.Resources {
		inV[v.Resources[i].ID.String()] = true
		setsInV[v.Resources[i].ResourceSet] = true
	}
	// A set is kept whole, and a partial export's requires stay inside
	// its set, so nothing kept requires what v removed.
	var kept []intent.StoredResource
	for _, r := range base {
		if liveSet[r.ResourceSet] && !setsInV[r.ResourceSet] && !inV[r.ID.String()] {
			kept = append(kept, r)
		}
	}
	return kept, open, nil
}

// openSetHashesSQL is openHashes' read of one set ($1 environment, $2
// set), apart from the read of them all: the generic plan of one query
// matching every set on an empty $2 (or resource_set = $2) cannot use
// the set's index, and read every open row of the environment for one
// instance's export (TestSetReadsReadTheSetAlone).
const openSetHashesSQL = `select resource_id, hash from version_resources
		where environment_id = $1::uuid and resource_set = $2 and last_version is null`

// openHashes returns the intent hash of every resource of the newest
// version (of one resource set, when set is not ""), by id.
func openHashes(ctx context.Context, tx pgx.Tx, envID, set string) (map[string][]byte, error) {
	var rows pgx.Rows
	var err error
	if set == "" {
		rows, err = tx.Query(ctx, `select resource_id, hash from version_resources
			where environment_id = $1::uuid and last_version is null`, envID)
	} else {
		rows, err = tx.Query(ctx, openSetHashesSQL, envID, set)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	open := map[string][]byte{}
	for rows.Next() {
		var id string
		var h []byte
		if err := rows.Scan(&id, &h); err != nil {
			return nil, err
		}
		open[id] = h
	}
	return open, rows.Err()
}

// membersOf makes a whole version's resources members for writeVersion.
func membersOf(v intent.Version) []member {
	members := make([]member, len(v.Resources))
	for i := range v.Resources {
		r := &v.Resources[i]
		members[i] = member{id: r.ID.String(), hash: r.Hash(), r: r}
	}
	return members
}

// lockForExport locks the environment's row, which serialises the exports
// (and prunes) of one environment, and returns its last version. An
// environment being decommissioned takes no export (DecommissioningError).
func lockForExport(ctx context.Context, tx pgx.Tx, envID string) (int64, error) {
	var last int64
	var name string
	var decommission *int64
	err := tx.QueryRow(ctx, `select last_version, name, decommission_version from environments where id = $1::uuid for update`,
		envID).Scan(&last, &name, &decommission)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, NotFound("environment %q", envID)
	}
	if err == nil && decommission != nil {
		return 0, decommissioning(name, *decommission, "new version")
	}
	return last, err
}

// member is one resource of a complete new version, for writeVersion.
type member struct {
	id   string
	hash [32]byte
	// r is the resource's intent; nil for a resource whose content is
	// stored already (kept by a partial export), which is then neither
	// needed nor read.
	r *intent.Resource
	// kept is such a kept resource as stored; nil when it is in the open
	// rows with this hash (its row stays open).
	kept *intent.StoredResource
}

// writeVersion stores version next of the environment, whose newest
// version has prev resources. open holds open membership rows (resource id
// → hash) and members the new version's resources over the same scope:
// either the whole newest version and the whole new one, or a part of
// both that holds every row that changes (a partial export's touched
// resources), the rest staying as it is. It closes the rows of changed
// and removed resources, stores the contents that are new, opens rows for
// new and changed resources, and records the version. The caller holds
// the environment row lock (lockForExport) in tx and has validated the
// new version (ids unique, requires inside, sets).
func writeVersion(ctx context.Context, tx pgx.Tx, envID string, next int64, prev int, open map[string][]byte, members []member) (VersionInfo, error) {
	var closeIDs []string
	var contents, rows [][]any
	env, err := copyUUID(envID)
	if err != nil {
		return VersionInfo{}, err
	}
	count := prev
	seen := make(map[string]struct{}, len(members))
	for _, m := range members {
		seen[m.id] = struct{}{}
		old, existed := open[m.id]
		if existed && bytes.Equal(old, m.hash[:]) {
			continue
		}
		if !existed {
			count++
		}
		if m.r == nil {
			// Kept from an older version than the newest (a partial
			// export on the released one): its content is stored, open a
			// row for it.
			if m.kept == nil {
				return VersionInfo{}, fmt.Errorf("resource %q is kept without its content but has no open row with its hash", m.id)
			}
			if existed {
				closeIDs = append(closeIDs, m.id)
			}
			rows = append(rows, []any{env, m.id, next, m.hash[:], m.kept.ID.Type, m.kept.ID.Agent, setColumn(m.kept.ResourceSet)})
			continue
		}
		if existed {
			closeIDs = append(closeIDs, m.id)
		}
		r := m.r
		contents = append(contents, contentRow(r, m.hash[:]))
		rows = append(rows, []any{env, m.id, next, m.hash[:], r.ID.Type, r.ID.Agent, setColumn(r.ResourceSet)})
	}
	for id := range open {
		if _, ok := seen[id]; !ok {
			closeIDs = append(closeIDs, id)
			count--
		}
	}

	if err := insertContents(ctx, tx, envID, contents); err != nil {
		return VersionInfo{}, err
	}
	if len(closeIDs) > 0 {
		if _, err := tx.Exec(ctx, `update version_resources set last_version = $2
			where environment_id = $1::uuid and last_version is null and resource_id = any($3)`,
			envID, next, closeIDs); err != nil {
			return VersionInfo{}, fmt.Errorf("close memberships: %w", err)
		}
	}
	if len(rows) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"version_resources"},
			[]string{"environment_id", "resource_id", "first_version", "hash", "resource_type", "agent", "resource_set"},
			pgx.CopyFromRows(rows)); err != nil {
			return VersionInfo{}, fmt.Errorf("copy memberships: %w", err)
		}
	}
	changed := len(rows) + len(closeIDs) - countBoth(rows, closeIDs)
	var info VersionInfo
	if err := tx.QueryRow(ctx, `insert into versions (environment_id, version, resource_count, changed_count, exported_by)
		values ($1::uuid, $2, $3, $4, $5) returning `+versionColumns,
		envID, next, count, changed, ActorOf(ctx)).
		Scan(&info.Version, &info.CreatedAt, &info.ReleasedAt, &info.ResourceCount, &info.ChangedCount,
			&info.ExportedBy, &info.ReleasedBy); err != nil {
		return VersionInfo{}, err
	}
	if _, err := tx.Exec(ctx, `update environments set last_version = $2, updated_at = now() where id = $1::uuid`, envID, next); err != nil {
		return VersionInfo{}, err
	}
	return info, nil
}

// copyUUID is id for a uuid column of a COPY. pgx cannot encode a string
// there: it tries, builds an error, then parses the text, two
// allocations and a parse a row (40 MB of the 630 MB that an export of
// 100,000 resources allocates). Boxed once: each row shares it.
func copyUUID(id string) (any, error) {
	var u pgtype.UUID
	if err := u.Scan(id); err != nil {
		return nil, fmt.Errorf("environment id %q: %w", id, err)
	}
	return u, nil
}

// contentRow is r's row for insertContents, its intent hash given.
func contentRow(r *intent.Resource, hash []byte) []any {
	req := make([]string, len(r.Requires))
	for i, q := range r.Requires {
		req[i] = q.String()
	}
	return []any{hash, r.ID.String(), string(r.CanonicalAttributes()), req,
		r.Purged, r.SendEvent, r.ReceiveEvents, r.ReportOnly, r.Undefined, setColumn(r.ResourceSet)}
}

// insertContents stores contents (contentRow rows) that are not stored
// yet, in one COPY through a temporary table.
func insertContents(ctx context.Context, tx pgx.Tx, envID string, contents [][]any) error {
	if len(contents) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `create temp table tmp_contents (
		hash bytea, resource_id text, attributes text, requires text[],
		purged bool, send_event bool, receive_events bool, report_only bool, undefined bool,
		resource_set text) on commit drop`); err != nil {
		return err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"tmp_contents"},
		[]string{"hash", "resource_id", "attributes", "requires", "purged", "send_event", "receive_events", "report_only",
			"undefined", "resource_set"},
		pgx.CopyFromRows(contents)); err != nil {
		return fmt.Errorf("copy contents: %w", err)
	}
	if _, err := tx.Exec(ctx, `insert into resource_contents
		(environment_id, hash, resource_id, attributes, requires, purged, send_event, receive_events, report_only,
		 undefined, resource_set)
		select $1::uuid, hash, resource_id, attributes::jsonb, requires, purged, send_event, receive_events, report_only,
		       undefined, resource_set
		from tmp_contents on conflict do nothing`, envID); err != nil {
		return fmt.Errorf("insert contents: %w", err)
	}
	return nil
}

// setColumn is the resource_set column's value: null for the shared set.
func setColumn(set string) any {
	if set == "" {
		return nil
	}
	return set
}

// countBoth counts resources that were closed and reopened (changed): they
// appear in both lists but are one change.
func countBoth(rows [][]any, closed []string) int {
	if len(closed) == 0 {
		return 0
	}
	set := make(map[string]struct{}, len(closed))
	for _, id := range closed {
		set[id] = struct{}{}
	}
	n := 0
	for _, m := range rows {
		if _, ok := set[m[1].(string)]; ok {
			n++
		}
	}
	return n
}

// ListVersions returns the environment's versions, newest first.
func (s *Store) ListVersions(ctx context.Context, envID string, limit int) ([]VersionInfo, error) {
	rows, err := s.pool.Query(ctx, `select `+versionColumns+`
		from versions where environment_id = $1::uuid order by version desc limit $2`, envID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (VersionInfo, error) {
		var v VersionInfo
		return v, r.Scan(&v.Version, &v.CreatedAt, &v.ReleasedAt, &v.ResourceCount, &v.ChangedCount, &v.ExportedBy, &v.ReleasedBy)
	})
}

// GetVersion returns one version's metadata.
func (s *Store) GetVersion(ctx context.Context, envID string, version int64) (VersionInfo, error) {
	var v VersionInfo
	err := s.pool.QueryRow(ctx, `select `+versionColumns+`
		from versions where environment_id = $1::uuid and version = $2`, envID, version).
		Scan(&v.Version, &v.CreatedAt, &v.ReleasedAt, &v.ResourceCount, &v.ChangedCount, &v.ExportedBy, &v.ReleasedBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, NotFound("version %d", version)
	}
	return v, err
}

// VersionResources returns up to limit resources of a version with ids after
// the cursor, in id order.
func (s *Store) VersionResources(ctx context.Context, envID string, version int64, after string, limit int) ([]VersionResource, error) {
	rows, err := s.pool.Query(ctx, `
		select vr.resource_id, c.attributes, c.requires, c.purged, c.send_event, c.receive_events, c.report_only,
		       c.undefined, coalesce(c.resource_set, ''), c.hash
		from version_resources vr
		join resource_contents c on c.environment_id = vr.environment_id and c.hash = vr.hash
		where vr.environment_id = $1::uuid and vr.first_version <= $2
		  and (vr.last_version is null or vr.last_version > $2) and vr.resource_id > $3
		order by vr.resource_id limit $4`, envID, version, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (VersionResource, error) {
		var v VersionResource
		var h []byte
		err := r.Scan(&v.ID, &v.Attributes, &v.Requires, &v.Purged, &v.SendEvent, &v.ReceiveEvents, &v.ReportOnly,
			&v.Undefined, &v.ResourceSet, &h)
		v.Hash = fmt.Sprintf("%x", h)
		return v, err
	})
}

// ResourceIntent is one resource as version holds it, and the ids of the
// resources of that version that require it (at most limit, sorted). A
// resource the version lacks is a *NotFoundError.
func (s *Store) ResourceIntent(ctx context.Context, envID string, version int64, rid string, limit int) (VersionResource, []string, error) {
	var v VersionResource
	var h []byte
	err := s.pool.QueryRow(ctx, `
		select vr.resource_id, c.attributes, c.requires, c.purged, c.send_event, c.receive_events, c.report_only,
		       c.undefined, coalesce(c.resource_set, ''), c.hash
		from version_resources vr
		join resource_contents c on c.environment_id = vr.environment_id and c.hash = vr.hash
		where vr.environment_id = $1::uuid and vr.resource_id = $3 and vr.first_version <= $2
		  and (vr.last_version is null or vr.last_version > $2)`, envID, version, rid).Scan(
		&v.ID, &v.Attributes, &v.Requires, &v.Purged, &v.SendEvent, &v.ReceiveEvents, &v.ReportOnly,
		&v.Undefined, &v.ResourceSet, &h)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, nil, NotFound("resource %s in version %d", rid, version)
	}
	if err != nil {
		return v, nil, err
	}
	v.Hash = fmt.Sprintf("%x", h)
	rows, err := s.pool.Query(ctx, `
		select vr.resource_id
		from version_resources vr
		join resource_contents c on c.environment_id = vr.environment_id and c.hash = vr.hash
		where vr.environment_id = $1::uuid and vr.first_version <= $2
		  and (vr.last_version is null or vr.last_version > $2) and $3 = any(c.requires)
		order by vr.resource_id limit $4`, envID, version, rid, limit)
	if err != nil {
		return v, nil, err
	}
	by, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return v, by, err
}

// DeployRun is one deploy workflow's record.
type DeployRun struct {
	Run         int64      `json:"run"`
	Version     int64      `json:"version"`
	Action      string     `json:"action"`
	Reason      string     `json:"reason"`
	Status      string     `json:"status"`
	RequestedAt time.Time  `json:"requested_at"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	Total       int        `json:"total"`
	Deployed    int        `json:"deployed"`
	Failed      int        `json:"failed"`
	Skipped     int        `json:"skipped"`
	Unavailable int        `json:"unavailable"`
	WorkflowID  string     `json:"workflow_id"`
	// Stages is where the run's batches spent their time, recorded when
	// it finished (nil: a run of before, one that dispatched nothing,
	// or one still running).
	Stages *runstages.Run `json:"stages,omitempty"`
}

// Release is what ReleaseVersion did.
type Release struct {
	Version VersionInfo `json:"version"`
	// Changed counts the resources whose intent changed with this release.
	Changed int `json:"changed"`
	// Request is the deploy the release queued for the scheduler (nil when
	// auto_deploy is off or the version was released already).
	Request *Request `json:"deploy_request"`
	// AlreadyReleased is true when the version was the released one already.
	AlreadyReleased bool `json:"already_released"`
	// Model is the model source the release made the live service
	// instances' model and that they were not told of yet: the caller
	// announces it after the commit, unless the environment is halted
	// (the server's reconciler announces one a crash left untold; a
	// resume announces). "": nothing to announce.
	Model string `json:"-"`
}

// ReleaseVersion makes version the one the orchestrator enforces: the
// deploy state of every resource whose intent changed since the previously
// released version is updated (and only those), and, when auto_deploy is on,
// a deploy request is queued for the scheduler in the same transaction, so
// it takes effect once even if the server dies right after.
func (s *Store) ReleaseVersion(ctx context.Context, envID string, version int64) (Release, error) {
	var out Release
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = releaseVersion(ctx, tx, envID, version)
		return err
	})
	return out, err
}

// releaseVersion is ReleaseVersion in tx.
func releaseVersion(ctx context.Context, tx pgx.Tx, envID string, version int64) (Release, error) {
	e, err := lockEnvironment(ctx, tx, envID)
	if err != nil {
		return Release{}, err
	}
	v, err := scanVersion(tx.QueryRow(ctx, `select `+versionColumns+`
		from versions where environment_id = $1::uuid and version = $2`, envID, version))
	if errors.Is(err, pgx.ErrNoRows) {
		return Release{}, NotFound("version %d", version)
	}
	if err != nil {
		return Release{}, err
	}
	var prev int64
	if e.ReleasedVersion != nil {
		prev = *e.ReleasedVersion
	}
	if prev == version {
		// Released again: a compile of a source whose resources are the
		// same may have recorded a newer source on it.
		model, err := releaseModel(ctx, tx, envID, version)
		return Release{Version: v, AlreadyReleased: true, Model: model}, err
	}
	if e.DecommissionVersion != nil && *e.DecommissionVersion != version {
		return Release{}, decommissioning(e.Name, *e.DecommissionVersion, "other release")
	}
	if version < prev {
		return Release{}, Conflict("version %d is older than the released version %d", version, prev)
	}
	tag, err := tx.Exec(ctx, `
		insert into resource_state (environment_id, resource_id, resource_type, agent, intent_hash, intent_version)
		select vr.environment_id, vr.resource_id, vr.resource_type, vr.agent, vr.hash, $3
		from version_resources vr
		where vr.environment_id = $1::uuid and vr.first_version > $2 and vr.first_version <= $3
		  and (vr.last_version is null or vr.last_version > $3)
		on conflict (environment_id, resource_id) do update set
		  intent_hash = excluded.intent_hash,
		  intent_version = excluded.intent_version,
		  compliance = case when resource_state.deployed_hash = excluded.intent_hash
		                     and resource_state.last_result = 'deployed'
		                    then 'compliant' else 'has_update' end`, envID, prev, version)
	if err != nil {
		return Release{}, fmt.Errorf("update deploy state: %w", err)
	}
	changed := int(tag.RowsAffected())
	if _, err := tx.Exec(ctx, `
		insert into agents (environment_id, name)
		select distinct vr.environment_id, vr.agent from version_resources vr
		where vr.environment_id = $1::uuid and vr.first_version > $2 and vr.first_version <= $3
		on conflict do nothing`, envID, prev, version); err != nil {
		return Release{}, fmt.Errorf("record agents: %w", err)
	}
	tag, err = tx.Exec(ctx, `
		update resource_state rs set intent_hash = null, intent_version = $3
		where rs.environment_id = $1::uuid and rs.intent_hash is not null
		  and exists (select 1 from version_resources vr where vr.environment_id = rs.environment_id
		      and vr.resource_id = rs.resource_id and vr.last_version > $2 and vr.last_version <= $3)
		  and not exists (select 1 from version_resources vr where vr.environment_id = rs.environment_id
		      and vr.resource_id = rs.resource_id and vr.first_version <= $3
		      and (vr.last_version is null or vr.last_version > $3))`, envID, prev, version)
	if err != nil {
		return Release{}, fmt.Errorf("orphan removed resources: %w", err)
	}
	changed += int(tag.RowsAffected())
	if err := tx.QueryRow(ctx, `update versions set released_at = now(), released_by = $3
		where environment_id = $1::uuid and version = $2 returning released_at, coalesce(released_by, '')`, envID, version,
		ActorOf(ctx)).Scan(&v.ReleasedAt, &v.ReleasedBy); err != nil {
		return Release{}, err
	}
	// A release held by a halt (HoldRelease) that this one passes is
	// done with.
	if _, err := tx.Exec(ctx, `update environments set released_version = $2, updated_at = now(),
			held_version = case when held_version <= $2 then null else held_version end
		where id = $1::uuid`, envID, version); err != nil {
		return Release{}, err
	}
	model, err := releaseModel(ctx, tx, envID, version)
	if err != nil {
		return Release{}, fmt.Errorf("release the model source: %w", err)
	}
	out := Release{Version: v, Changed: changed, Model: model}
	if e.Settings.AutoDeploy {
		req, err := insertRequest(ctx, tx, envID, Request{Kind: "deploy", Reason: fmt.Sprintf("new version %d", version)})
		if err != nil {
			return Release{}, err
		}
		out.Request = &req
	}
	return out, nil
}

func scanVersion(row pgx.Row) (VersionInfo, error) {
	var v VersionInfo
	return v, row.Scan(&v.Version, &v.CreatedAt, &v.ReleasedAt, &v.ResourceCount, &v.ChangedCount, &v.ExportedBy, &v.ReleasedBy)
}

// runColumns are the columns of a DeployRun (scanRun) from deploy_runs:
// a running run's counters are its row's plus its batches'
// (countProgress).
var runColumns = `run, version, action, reason, status, requested_at, started_at, finished_at,
	total, ` + liveCounter("deployed") + `, ` + liveCounter("failed") + `, ` + liveCounter("skipped") + `, ` +
	liveCounter("unavailable") + `, workflow_id, stages`

// runRowColumns are runColumns of a run that has no batches (one just
// made).
const runRowColumns = `run, version, action, reason, status, requested_at, started_at, finished_at,
	total, deployed, failed, skipped, unavailable, workflow_id, stages`

// liveCounter is a running run's counter c: its row's plus its batches'.
func liveCounter(c string) string {
	return c + ` + case when deploy_runs.status = 'running' then (select coalesce(sum(b.` + c + `), 0)
		from deploy_batches b where b.environment_id = deploy_runs.environment_id and b.run = deploy_runs.run)
		else 0 end`
}

func scanRun(row pgx.Row) (DeployRun, error) {
	var r DeployRun
	return r, row.Scan(&r.Run, &r.Version, &r.Action, &r.Reason, &r.Status, &r.RequestedAt, &r.StartedAt,
		&r.FinishedAt, &r.Total, &r.Deployed, &r.Failed, &r.Skipped, &r.Unavailable, &r.WorkflowID, &r.Stages)
}

// insertRun records a pending deploy run; the caller holds the environment
// row lock.
func insertRun(ctx context.Context, tx pgx.Tx, e Environment, version int64, action, reason string, token *string) (DeployRun, error) {
	var run int64
	if err := tx.QueryRow(ctx, `update environments set last_deploy_run = last_deploy_run + 1
		where id = $1::uuid returning last_deploy_run`, e.ID).Scan(&run); err != nil {
		return DeployRun{}, err
	}
	wf := names.DeployWorkflowID(e.Name, run)
	if action == string(ledger.ActionDryrun) {
		wf = names.DryrunWorkflowID(e.Name, run)
	}
	return scanRun(tx.QueryRow(ctx, `insert into deploy_runs (environment_id, run, version, action, reason, workflow_id, token)
		values ($1::uuid, $2, $3, $4, $5, $6, $7) returning `+runRowColumns,
		e.ID, run, version, action, reason, wf, token))
}
