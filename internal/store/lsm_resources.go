package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// setResourcesSQL is SetResources' read ($1 environment, $2 set); the
// subquery reads the set alone, as resourceSetDeploySQL's.
const setResourcesSQL = `
		select vr.resource_id, vr.resource_type, vr.agent, rs.intent_version,
		       coalesce(encode(rs.intent_hash, 'hex'), ''), coalesce(encode(rs.deployed_hash, 'hex'), ''),
		       coalesce(rs.last_result, 'new'),
		       case when rs.intent_hash is distinct from vr.hash then 'has_update' else rs.compliance end,
		       coalesce(rs.blocked, false), false, rs.last_attempt, rs.last_success,
		       coalesce(rs.last_produced_change, false)
		from (select resource_id, environment_id, resource_type, agent, hash from version_resources
		      where environment_id = $1::uuid and resource_set = $2 and last_version is null offset 0) vr
		left join resource_state rs on rs.environment_id = vr.environment_id and rs.resource_id = vr.resource_id
		order by vr.resource_id`

// SetResources returns the resources of a resource set in the newest
// version with their deploy state, by id: a service instance's resources
// (set "<entity>/<id>"). A resource the newest version has but no release
// has reached yet is last_result "new", compliance "has_update".
func (s *Store) SetResources(ctx context.Context, envID, set string) ([]ResourceState, error) {
	rows, err := s.pool.Query(ctx, setResourcesSQL, envID, set)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ResourceState, error) { return scanState(row) })
}
