package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// EntityConfig is what operators set for a service entity, apart from
// what the model defines (seed 003: "auto transfers can be disabled by
// adding a configuration option"). It is kept with the entity's catalog
// row and survives model exports, which rewrite the rest of the row; it
// goes with the entity when the model drops the entity.
type EntityConfig struct {
	// AutoTransfers: the lifecycle engine takes the entity's auto
	// transfers by itself (the default). Off, an instance stops in a
	// state an auto transfer leaves, and an operator takes that transfer
	// with a set-state naming its target.
	AutoTransfers bool `json:"auto_transfers"`
}

// DefaultEntityConfig is the configuration of an entity nobody set.
func DefaultEntityConfig() EntityConfig { return EntityConfig{AutoTransfers: true} }

// decodeEntityConfig reads a stored configuration; absent keys take
// their defaults.
func decodeEntityConfig(b []byte) (EntityConfig, error) {
	c := DefaultEntityConfig()
	if len(b) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("stored service entity config: %w", err)
	}
	return c, nil
}

// SetEntityConfig stores the configuration of the environment's entity
// and returns the entity as it is then. ErrNotFound when the catalog has
// no such entity.
func (s *Store) SetEntityConfig(ctx context.Context, envID, entity string, c EntityConfig) (ServiceEntity, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return ServiceEntity{}, err
	}
	tag, err := s.pool.Exec(ctx, `update service_entities set config = $3
		where environment_id = $1::uuid and name = $2`, envID, entity, b)
	if err != nil {
		return ServiceEntity{}, fmt.Errorf("set the config of service entity %s: %w", entity, err)
	}
	if tag.RowsAffected() == 0 {
		return ServiceEntity{}, NotFound("service entity %s", entity)
	}
	return s.GetEntity(ctx, envID, entity)
}
