package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// What the lifecycle engine's activities read besides the inventory: the
// live instances a validation compiles with, and the content and deploy
// state of an instance's resource set ("<entity>/<id>").

// LiveServiceInstances returns every live (not deleted) instance of the
// environment, by entity and id, as one snapshot of the inventory.
//
// Every validation reads the whole inventory (the other instances take
// part in it), so this read is kept cheap: it reads each row's id,
// version and xmin, and the whole row only of the instances that changed
// since the store last decoded them (every write of an instance makes a
// new row version with a new xmin and a higher version). The instances
// it returns share their attribute maps with other callers' results:
// callers must not change them.
func (s *Store) LiveServiceInstances(ctx context.Context, envID string) ([]ServiceInstance, error) {
	var out []ServiceInstance
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `select id::text, version, xmin::text from service_instances
			where environment_id = $1::uuid and not deleted order by entity, id`, envID)
		if err != nil {
			return err
		}
		var keys []liveKey
		var ids []string
		for rows.Next() {
			var k liveKey
			if err := rows.Scan(&k.id, &k.version, &k.xmin); err != nil {
				rows.Close()
				return err
			}
			keys = append(keys, k)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		known := s.live.lookup(envID, keys)
		for i, k := range keys {
			if known[i].ID == "" {
				ids = append(ids, k.id)
			}
		}
		fresh := map[string]ServiceInstance{}
		if len(ids) > 0 {
			rows, err := tx.Query(ctx, `select `+instanceColumns+`, xmin::text from service_instances
				where environment_id = $1::uuid and id = any($2::uuid[])`, envID, ids)
			if err != nil {
				return err
			}
			var read []liveEntry
			for rows.Next() {
				var e liveEntry
				i := &e.inst
				if err := rows.Scan(&i.ID, &i.Entity, &i.Identity, &i.State, &i.Version,
					&i.Candidate, &i.Active, &i.Rollback, &i.Deleted, &i.CreatedAt, &i.UpdatedAt,
					&i.CandidateVersion, &i.ActiveVersion, &i.RollbackVersion, &e.xmin); err != nil {
					rows.Close()
					return err
				}
				i.EntityVersion = i.Sets.EntityVersion()
				fresh[i.ID] = *i
				read = append(read, e)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			s.live.store(envID, read)
		}
		out = make([]ServiceInstance, len(keys))
		for i, k := range keys {
			if known[i].ID != "" {
				out[i] = known[i]
				continue
			}
			inst, ok := fresh[k.id]
			if !ok {
				return fmt.Errorf("service instance %s left the snapshot it was listed in", k.id)
			}
			out[i] = inst
		}
		s.live.forget(envID, keys)
		return nil
	})
	return out, err
}

// liveCache holds decoded service instances by environment and id, each
// with the version and xmin of the row it was decoded from.
type liveCache struct {
	mu   sync.Mutex
	envs map[string]map[string]liveEntry
}

type liveKey struct {
	id      string
	version int64
	xmin    string
}

type liveEntry struct {
	inst ServiceInstance
	xmin string
}

// lookup returns, for each key, the cached instance when it was decoded
// from that row version, or the zero instance.
func (c *liveCache) lookup(envID string, keys []liveKey) []ServiceInstance {
	out := make([]ServiceInstance, len(keys))
	c.mu.Lock()
	defer c.mu.Unlock()
	byID := c.envs[envID]
	for i, k := range keys {
		if e, ok := byID[k.id]; ok && e.xmin == k.xmin && e.inst.Version == k.version {
			out[i] = e.inst
		}
	}
	return out
}

// store caches freshly decoded instances.
func (c *liveCache) store(envID string, read []liveEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.envs == nil {
		c.envs = map[string]map[string]liveEntry{}
	}
	byID := c.envs[envID]
	if byID == nil {
		byID = make(map[string]liveEntry, len(read))
		c.envs[envID] = byID
	}
	for _, e := range read {
		byID[e.inst.ID] = e
	}
}

// forget drops the cached instances of the environment that are no longer
// live (keys are the live ones); an environment without any goes whole.
func (c *liveCache) forget(envID string, keys []liveKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	byID := c.envs[envID]
	if len(byID) <= len(keys) {
		if len(keys) == 0 {
			delete(c.envs, envID)
		}
		return
	}
	live := make(map[string]bool, len(keys))
	for _, k := range keys {
		live[k.id] = true
	}
	for id := range byID {
		if !live[id] {
			delete(byID, id)
		}
	}
}

// HasLiveServiceInstances reports whether the environment has a live
// instance.
func (s *Store) HasLiveServiceInstances(ctx context.Context, envID string) (bool, error) {
	var has bool
	err := s.pool.QueryRow(ctx, `select exists (select 1 from service_instances
		where environment_id = $1::uuid and not deleted)`, envID).Scan(&has)
	return has, err
}

// SetContent is a resource set in the version an instance's export builds
// on (ExportInstanceSets): the released one, or the newest when none is.
type SetContent struct {
	// Hashes are the intent hashes of the set's resources, by id.
	Hashes map[string][]byte
	// LastVersion is the newest version, ReleasedVersion the released one
	// (0: none), BaseVersion the one Hashes are of.
	LastVersion     int64
	ReleasedVersion int64
	BaseVersion     int64
	// Now is the database's time of the read.
	Now time.Time
}

// ResourceSetContent reads a resource set of the version an instance's
// export builds on: its resources' intent hashes, with the newest,
// released and base version numbers.
func (s *Store) ResourceSetContent(ctx context.Context, envID, set string) (SetContent, error) {
	out := SetContent{Hashes: map[string][]byte{}}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var released *int64
		if err := tx.QueryRow(ctx, `select last_version, released_version, now() from environments where id = $1::uuid`,
			envID).Scan(&out.LastVersion, &released, &out.Now); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return NotFound("environment %q", envID)
			}
			return err
		}
		if released != nil {
			out.ReleasedVersion = *released
		}
		out.BaseVersion = out.LastVersion
		if out.ReleasedVersion > 0 && out.ReleasedVersion < out.LastVersion {
			out.BaseVersion = out.ReleasedVersion
			rows, err := tx.Query(ctx, `select resource_id, hash from version_resources
				where environment_id = $1::uuid and resource_set = $2
				  and first_version <= $3 and (last_version is null or last_version > $3)`, envID, set, out.BaseVersion)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				var h []byte
				if err := rows.Scan(&id, &h); err != nil {
					return err
				}
				out.Hashes[id] = h
			}
			return rows.Err()
		}
		var err error
		out.Hashes, err = openHashes(ctx, tx, envID, set)
		return err
	})
	return out, err
}

// SetDeploy counts how the deploy of a resource set's newest intent goes.
type SetDeploy struct {
	// Total is how many resources the set has in the newest version.
	Total int
	// Deployed: deployed with that intent (last result deployed, deployed
	// hash the intent's).
	Deployed int
	// Failed: the last attempt, made at or after since for that intent,
	// failed, and the deploy run that made it is over (a run retries a
	// transient failure before it ends: the failure is its verdict only
	// then).
	Failed int
	// IDs are the resources not deployed yet.
	IDs []string
}

// resourceSetDeploySQL is ResourceSetDeploy's read ($1 environment, $2
// set, $3 since). The set's rows are read in a subquery the planner keeps
// apart (offset 0), where nothing asks for them in resource_id order:
// joined directly, the order by (and the join on resource_id) made the
// index on (environment_id, resource_id) tie with the set's index while
// the table had no statistics yet (a new environment's first burst of
// creates), and it read every open row of the environment, 4 ms a call
// at 1,000 instances (TestSetReadsReadTheSetAlone). SetResources too.
const resourceSetDeploySQL = `
		select vr.resource_id,
		       coalesce(rs.last_result in ('deployed', 'unmanaged') and rs.deployed_hash = vr.hash, false),
		       coalesce(rs.last_result = 'failed' and rs.intent_hash = vr.hash and rs.last_attempt >= $3
		                and not exists (
		                    select 1 from deploy_runs r
		                    where r.environment_id = vr.environment_id and r.status in ('pending', 'running')
		                      and r.workflow_id = (select workflow_id from (
		                          (select a.workflow_id, a.id from resource_actions a
		                           where a.environment_id = vr.environment_id and a.resource_id = vr.resource_id
		                           order by a.id desc limit 1)
		                          union all
		                          -- a row of unchanged_actions orders by its id among the
		                          -- other rows of a resource (action_log.go)
		                          (select u.workflow_id, u.id from unchanged_actions u
		                           where u.environment_id = vr.environment_id and u.resource_ids @> array[vr.resource_id]
		                           order by u.id desc limit 1)) last
		                        order by last.id desc limit 1)), false)
		from (select resource_id, environment_id, hash from version_resources
		      where environment_id = $1::uuid and resource_set = $2 and last_version is null offset 0) vr
		left join resource_state rs on rs.environment_id = vr.environment_id and rs.resource_id = vr.resource_id
		order by vr.resource_id`

// ResourceSetDeploy reads the deploy state of a resource set's resources
// (those of the newest version). A failure counts only when it was
// recorded at or after since and the resource's intent is the set's
// (released): an older failure is not the current export's; and only
// once the deploy run that recorded it has ended, since the run may try
// the resource again (retry_attempts) and deploy it.
func (s *Store) ResourceSetDeploy(ctx context.Context, envID, set string, since time.Time) (SetDeploy, error) {
	var out SetDeploy
	rows, err := s.pool.Query(ctx, resourceSetDeploySQL, envID, set, since)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var deployed, failed bool
		if err := rows.Scan(&id, &deployed, &failed); err != nil {
			return out, err
		}
		out.Total++
		switch {
		case deployed:
			out.Deployed++
		case failed:
			out.Failed++
			out.IDs = append(out.IDs, id)
		default:
			out.IDs = append(out.IDs, id)
		}
	}
	return out, rows.Err()
}
