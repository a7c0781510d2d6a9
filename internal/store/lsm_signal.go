package store

import (
	"context"
)

// RunInstance is a service instance whose resource set ("<entity>/<id>")
// had resources in a deploy run.
type RunInstance struct {
	Entity string
	ID     string
}

// RunServiceInstances returns the name of the environment and the service
// instances (by entity and id) whose resource sets had resources in the
// run: those with an action record of the run's workflow, each in the set
// its version gave it. A dry-run has none, and so has an environment
// without live instances, at the cost of one query that reads no action
// record.
func (s *Store) RunServiceInstances(ctx context.Context, envID string, run int64) (string, []RunInstance, error) {
	// The exists is uncorrelated: PostgreSQL evaluates it once, and an
	// environment without instances reads no action record.
	rows, err := s.pool.Query(ctx, `
		with r as (
			select d.workflow_id, e.name
			from deploy_runs d join environments e on e.id = d.environment_id
			where d.environment_id = $1::uuid and d.run = $2 and d.action <> 'dryrun'
			  and exists (select 1 from service_instances where environment_id = $1::uuid and not deleted)
		), sets as (
			select distinct vr.resource_set
			from r
			join action_log a on a.workflow_id = (select workflow_id from r) and a.environment_id = $1::uuid
			-- The set the resource is in now, or was in at the action's
			-- version: a run's plan takes the resources' intent when it is
			-- planned (resource_state) while its actions carry the version
			-- the run was requested for, which may be older than the one
			-- that added the resource (instances exported between the two).
			join version_resources vr on vr.environment_id = a.environment_id and vr.resource_id = a.resource_id
			     and (vr.last_version is null or (vr.first_version <= a.version and vr.last_version > a.version))
			where vr.resource_set is not null
		)
		select r.name, si.entity, si.id::text
		from r cross join sets
		join service_instances si on si.environment_id = $1::uuid and si.entity || '/' || si.id::text = sets.resource_set
		where not si.deleted
		order by si.entity, si.id`, envID, run)
	if err != nil {
		return "", nil, err
	}
	defer rows.Close()
	var name string
	var out []RunInstance
	for rows.Next() {
		var ri RunInstance
		if err := rows.Scan(&name, &ri.Entity, &ri.ID); err != nil {
			return "", nil, err
		}
		out = append(out, ri)
	}
	return name, out, rows.Err()
}
