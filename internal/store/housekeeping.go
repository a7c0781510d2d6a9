package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/intent"
)

// Housekeeping an operator expects (Inmanta has each): projects renamed
// and deleted, environments cleared, decommissioned and protected,
// versions deleted. docs/operations.md, "Housekeeping", says what each
// keeps and refuses.

// RenameProject renames a project (ref: its id or name). Environments
// name their project by id, so nothing else changes.
func (s *Store) RenameProject(ctx context.Context, ref, name string) (Project, error) {
	p, err := s.GetProject(ctx, ref)
	if err != nil {
		return p, err
	}
	err = s.pool.QueryRow(ctx, `update projects set name = $2 where id = $1::uuid returning id::text, name, created_at`,
		p.ID, name).Scan(&p.ID, &p.Name, &p.CreatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return p, NotFound("project %q", ref)
	case isUniqueViolation(err, ""):
		return p, Conflict("project %q exists already", name)
	}
	return p, err
}

// DeleteProject deletes a project (ref: its id or name) that holds no
// environment; one that holds some is a conflict naming them (the first
// five): each must be deleted on its own, protection checked.
func (s *Store) DeleteProject(ctx context.Context, ref string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var id, name string
		err := tx.QueryRow(ctx, `select id::text, name from projects where id::text = $1 or name = $1 for update`, ref).
			Scan(&id, &name)
		if errors.Is(err, pgx.ErrNoRows) {
			return NotFound("project %q", ref)
		}
		if err != nil {
			return err
		}
		// The row lock keeps a new environment out (its insert checks the
		// project's row, a key share lock that waits for this one).
		var n int
		var some []string
		if err := tx.QueryRow(ctx, `select count(*), coalesce((array_agg(name order by name))[1:5], '{}')
			from environments where project_id = $1::uuid`, id).Scan(&n, &some); err != nil {
			return err
		}
		if n > 0 {
			return Conflict("project %s holds %d environment(s) (%s); delete them first", name, n, strings.Join(some, ", "))
		}
		_, err = tx.Exec(ctx, `delete from projects where id = $1::uuid`, id)
		return err
	})
}

// ProtectedError refuses a destructive operation on a protected
// environment.
type ProtectedError struct{ Environment, Operation string }

func (e *ProtectedError) Error() string {
	return fmt.Sprintf("environment %s is protected: it refuses %s until a global admin lifts the protection "+
		"(POST /api/v1/environments/%s/unprotect, intend env unprotect)", e.Environment, e.Operation, e.Environment)
}

// Unwrap makes it a conflict (409).
func (e *ProtectedError) Unwrap() error { return ErrConflict }

// SetProtected turns an environment's protection on or off and returns
// the environment.
func (s *Store) SetProtected(ctx context.Context, envID string, on bool) (Environment, error) {
	e, err := scanEnvironment(s.pool.QueryRow(ctx, `update environments set protected = $2, updated_at = now()
		where id = $1::uuid returning `+envColumns, envID, on))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, NotFound("environment %q", envID)
	}
	return e, err
}

// Cleared counts what ClearEnvironment removed.
type Cleared struct {
	Versions         int64 `json:"versions"`
	Resources        int64 `json:"resources"`
	ServiceInstances int64 `json:"service_instances"`
}

// clearedTables are the environment's tables ClearEnvironment empties,
// children before parents (foreign keys without cascades). What stays:
// the environment's row (settings, halted, protection), its tokens, audit
// trail, executor registrations and user ids, and LSM callbacks (each is
// configuration or a record of who did what, not desired or observed
// state).
var clearedTables = []string{
	"lsm_allocations", "service_instance_references", "service_instance_log", "service_instances",
	"service_entity_versions", "service_entities", "lsm_pools", "lsm_requests", "lsm_order_items", "lsm_orders",
	"resource_intents", "dryrun_resources", "deploy_batches", "deploy_runs", "deploy_requests",
	"resource_actions", "unchanged_actions", "facts", "resource_state", "version_resources", "resource_contents", "versions",
	"agents", "compiles", "model_sources",
}

// ClearEnvironment removes every version, resource state and action,
// run and request, compile and model, and the service catalog and
// inventory of an environment, keeping its settings, in one transaction
// holding the environment's row lock (which every export, release and
// run's start takes too). A protected environment is refused
// (*ProtectedError). Version and run numbers go on from where they were:
// a late report of an old run, or a cache keyed by version, never meets a
// new one of the same number. The caller stops the environment's
// workflows first (api.Scheduler.Stop): a deploy that reports after the
// clear finds no run and records nothing (recordActions).
func (s *Store) ClearEnvironment(ctx context.Context, envID string) (Cleared, error) {
	var out Cleared
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := lockEnvironment(ctx, tx, envID)
		if err != nil {
			return err
		}
		if e.Protected {
			return &ProtectedError{Environment: e.Name, Operation: "clear"}
		}
		return clearEnvironment(ctx, tx, envID, &out)
	})
	return out, err
}

func clearEnvironment(ctx context.Context, tx pgx.Tx, envID string, out *Cleared) error {
	for _, table := range clearedTables {
		tag, err := tx.Exec(ctx, `delete from `+table+` where environment_id = $1::uuid`, envID)
		if err != nil {
			return fmt.Errorf("clear %s: %w", table, err)
		}
		switch table {
		case "versions":
			out.Versions = tag.RowsAffected()
		case "resource_state":
			out.Resources = tag.RowsAffected()
		case "service_instances":
			out.ServiceInstances = tag.RowsAffected()
		}
	}
	_, err := tx.Exec(ctx, `update environments set released_version = null, decommission_version = null,
		updated_at = now() where id = $1::uuid`, envID)
	return err
}

// DeleteVersion deletes one version of an environment. It refuses the
// released version and the version of a pending or running deploy run or
// dry-run (409). Membership rows only that version needed go; when it was
// the newest, the open rows become the newest remaining version's again,
// so that a partial export builds on that one and not on the deleted
// one. Version numbers are not reused.
func (s *Store) DeleteVersion(ctx context.Context, envID string, version int64) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := lockEnvironment(ctx, tx, envID)
		if err != nil {
			return err
		}
		if e.ReleasedVersion != nil && *e.ReleasedVersion == version {
			return Conflict("version %d is the released version of environment %s; release another one first", version, e.Name)
		}
		if e.DecommissionVersion != nil && *e.DecommissionVersion == version {
			return Conflict("version %d is the decommission of environment %s under way", version, e.Name)
		}
		var run *int64
		if err := tx.QueryRow(ctx, `select min(run) from deploy_runs where environment_id = $1::uuid and version = $2
			and status in ('pending', 'running')`, envID, version).Scan(&run); err != nil {
			return err
		}
		if run != nil {
			return Conflict("version %d is in use by run %d, which has not finished", version, *run)
		}
		tag, err := tx.Exec(ctx, `delete from versions where environment_id = $1::uuid and version = $2`, envID, version)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return NotFound("version %d", version)
		}
		var newest int64
		if err := tx.QueryRow(ctx, `select coalesce(max(version), 0) from versions where environment_id = $1::uuid`,
			envID).Scan(&newest); err != nil {
			return err
		}
		if newest < version {
			// The open rows were the deleted version's: rows opened after
			// the newest remaining version go, rows closed after it open
			// again.
			if _, err := tx.Exec(ctx, `delete from version_resources where environment_id = $1::uuid
				and first_version > $2`, envID, newest); err != nil {
				return fmt.Errorf("delete the version's rows: %w", err)
			}
			if _, err := tx.Exec(ctx, `update version_resources set last_version = null where environment_id = $1::uuid
				and last_version > $2`, envID, newest); err != nil {
				return fmt.Errorf("reopen the rows of version %d: %w", newest, err)
			}
			return nil
		}
		// Rows of this version alone.
		_, err = tx.Exec(ctx, `delete from version_resources where environment_id = $1::uuid
			and first_version = $2 and last_version = $2 + 1`, envID, version)
		return err
	})
}

// Decommission is where an environment's decommission stands.
type Decommission struct {
	// State is "purging" while the purge version deploys, "cleared"
	// once everything was purged and the environment cleared.
	State string `json:"state"`
	// Version is the purge version (0 when nothing was to purge).
	Version int64 `json:"version,omitempty"`
	// Request is the deploy request the purge's release or retry queued.
	Request *Request `json:"deploy_request,omitempty"`
	// Resources counts the purge version's resources, Purged those
	// deployed (removed), Failed those whose last attempt failed.
	Resources int `json:"resources"`
	Purged    int `json:"purged"`
	Failed    int `json:"failed"`
	// FailedIDs names up to 20 of the failed ones.
	FailedIDs []string `json:"failed_resources,omitempty"`
	// Deploying says a deploy is queued or running.
	Deploying bool `json:"deploying"`
	// Cleared is what the clear removed, with state cleared.
	Cleared *Cleared `json:"cleared,omitempty"`
}

// StartDecommission exports and releases, in one transaction, a version
// that purges every resource of the released version and of the newest
// one (report-only and undefined resources excepted: intend never changed
// the ones, never deployed the others), with requires reversed within
// each resource set, so that what depends on a resource goes before it;
// and records it as the environment's decommission. From then on the
// environment takes no other export or release (refuseDecommissioning).
// An environment with nothing to purge has Version 0 and is not marked.
func (s *Store) StartDecommission(ctx context.Context, envID string) (Decommission, error) {
	var out Decommission
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := lockEnvironment(ctx, tx, envID)
		if err != nil {
			return err
		}
		last := e.LastVersion
		if e.Protected {
			return &ProtectedError{Environment: e.Name, Operation: "decommission"}
		}
		var released int64
		if e.ReleasedVersion != nil {
			released = *e.ReleasedVersion
		}
		v, err := purgeVersion(ctx, tx, envID, released)
		if err != nil {
			return err
		}
		out.State, out.Deploying = "purging", true
		if len(v.Resources) == 0 {
			return nil
		}
		open, err := openHashes(ctx, tx, envID, "")
		if err != nil {
			return err
		}
		info, err := writeVersion(ctx, tx, envID, last+1, len(open), open, membersOf(v))
		if err != nil {
			return err
		}
		rel, err := releaseVersion(ctx, tx, envID, info.Version)
		if err != nil {
			return err
		}
		if rel.Request == nil {
			// auto_deploy off: the purge deploys all the same.
			req, err := insertRequest(ctx, tx, envID, Request{Kind: "deploy",
				Reason: fmt.Sprintf("decommission (version %d)", info.Version)})
			if err != nil {
				return err
			}
			rel.Request = &req
		}
		out.Version, out.Request, out.Resources = info.Version, rel.Request, len(v.Resources)
		_, err = tx.Exec(ctx, `update environments set decommission_version = $2 where id = $1::uuid`, envID, info.Version)
		return err
	})
	return out, err
}

// purgeVersion builds the version that purges the resources of the
// released version and of the newest (StartDecommission).
func purgeVersion(ctx context.Context, tx pgx.Tx, envID string, released int64) (intent.Version, error) {
	// The released version's content of a resource when it has one: that
	// is what was deployed.
	rows, err := tx.Query(ctx, `
		select distinct on (vr.resource_id) vr.resource_id, c.attributes, c.requires, coalesce(c.resource_set, '')
		from version_resources vr
		join resource_contents c on c.environment_id = vr.environment_id and c.hash = vr.hash
		where vr.environment_id = $1::uuid and not c.report_only and not c.undefined and not c.unmanaged
		  and (vr.last_version is null
		       or (vr.first_version <= $2 and vr.last_version > $2))
		order by vr.resource_id, (vr.first_version <= $2 and (vr.last_version is null or vr.last_version > $2)) desc`,
		envID, released)
	if err != nil {
		return intent.Version{}, fmt.Errorf("read the resources to purge: %w", err)
	}
	type stored struct {
		ID         string          `json:"id"`
		Attributes json.RawMessage `json:"attributes"`
		Requires   []string        `json:"requires"`
		Purged     bool            `json:"purged"`
		Set        string          `json:"resource_set,omitempty"`
	}
	rs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stored, error) {
		var s stored
		return s, r.Scan(&s.ID, &s.Attributes, &s.Requires, &s.Set)
	})
	if err != nil {
		return intent.Version{}, fmt.Errorf("read the resources to purge: %w", err)
	}
	// Requires reversed: a resource goes after what required it. Only
	// within a set (a shared resource may not require a set's); a
	// requirement on a resource that is not purged (report-only) goes.
	index := make(map[string]int, len(rs))
	for i := range rs {
		index[rs[i].ID] = i
	}
	reversed := make([][]string, len(rs))
	for _, r := range rs {
		for _, q := range r.Requires {
			if j, ok := index[q]; ok && rs[j].Set == r.Set {
				reversed[j] = append(reversed[j], r.ID)
			}
		}
	}
	for i := range rs {
		rs[i].Requires = reversed[i]
		if rs[i].Requires == nil {
			rs[i].Requires = []string{}
		}
		rs[i].Purged = true
	}
	body, err := json.Marshal(map[string]any{"resources": rs})
	if err != nil {
		return intent.Version{}, err
	}
	v, err := intent.DecodeBytes(body)
	if err != nil {
		return intent.Version{}, fmt.Errorf("the purge version: %w", err)
	}
	return v, nil
}

// DecommissionProgress reads where the environment's decommission under
// way stands: how many resources of its version were purged and which
// failed. ok is false when none is under way, or when another version
// than the purge is the released one.
func (s *Store) DecommissionProgress(ctx context.Context, envID string) (d Decommission, ok bool, err error) {
	e, err := s.GetEnvironment(ctx, envID)
	if err != nil {
		return d, false, err
	}
	if e.DecommissionVersion == nil || e.ReleasedVersion == nil || *e.ReleasedVersion != *e.DecommissionVersion {
		return d, false, nil
	}
	d = Decommission{State: "purging", Version: *e.DecommissionVersion}
	// Purged: deployed with the purge's intent (removed); failed: tried
	// since the purge's release and not removed.
	err = s.pool.QueryRow(ctx, `
		select count(*),
		       count(*) filter (where rs.last_result = 'deployed' and rs.deployed_hash = vr.hash),
		       count(*) filter (where not (rs.last_result = 'deployed' and rs.deployed_hash = vr.hash)
		                          and rs.last_attempt > v.released_at),
		       coalesce((array_agg(vr.resource_id order by vr.resource_id)
		           filter (where not (rs.last_result = 'deployed' and rs.deployed_hash = vr.hash)
		                     and rs.last_attempt > v.released_at))[1:20], '{}')
		from version_resources vr
		join versions v on v.environment_id = vr.environment_id and v.version = $2
		left join resource_state rs on rs.environment_id = vr.environment_id and rs.resource_id = vr.resource_id
		where vr.environment_id = $1::uuid and vr.first_version <= $2
		  and (vr.last_version is null or vr.last_version > $2)`,
		envID, *e.DecommissionVersion).Scan(&d.Resources, &d.Purged, &d.Failed, &d.FailedIDs)
	if err != nil {
		return d, true, err
	}
	err = s.pool.QueryRow(ctx, `select exists (select 1 from deploy_runs where environment_id = $1::uuid
		    and action <> 'dryrun' and status in ('pending', 'running'))
		or exists (select 1 from deploy_requests where environment_id = $1::uuid and kind <> 'dryrun' and run is null)`,
		envID).Scan(&d.Deploying)
	return d, true, err
}

// decommissioning refuses what an environment being decommissioned
// does not take (a conflict).
func decommissioning(env string, version int64, what string) error {
	return Conflict("environment %s is being decommissioned (version %d purges everything); it takes no %s "+
		"until the decommission has cleared it", env, version, what)
}
