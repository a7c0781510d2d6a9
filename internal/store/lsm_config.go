package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/lsm"
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
	// AutoTransferConfigs switches the auto transfers of a config name
	// (lsm.Transfer.ConfigName) on or off; a name it lacks is on. An
	// instance's config overrides it name by name (InstanceConfig).
	AutoTransferConfigs map[string]bool `json:"auto_transfer_configs,omitempty"`
}

// Auto is the switch of the auto transfers of an instance with config
// inst (lsm.AutoConfig.Takes decides with it).
func (c EntityConfig) Auto(inst InstanceConfig) lsm.AutoConfig {
	return lsm.AutoConfig{Off: !c.AutoTransfers, InstanceOff: !inst.AutoTransfers,
		Entity: c.AutoTransferConfigs, Instance: inst.AutoTransferConfigs}
}

// InstanceConfig is what operators set for one service instance over
// its entity's config (issue 31): the same keys, where AutoTransfers
// false holds every auto transfer of the instance (it cannot turn on
// what the entity holds), and AutoTransferConfigs overrides the entity's
// entry of each name it maps.
type InstanceConfig struct {
	AutoTransfers       bool            `json:"auto_transfers"`
	AutoTransferConfigs map[string]bool `json:"auto_transfer_configs,omitempty"`
}

// DefaultInstanceConfig is the config of an instance nobody set: its
// entity's.
func DefaultInstanceConfig() InstanceConfig { return InstanceConfig{AutoTransfers: true} }

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

// InstanceConfig returns the config of the environment's instance id
// (DefaultInstanceConfig when nobody set it). ErrNotFound when the
// inventory has no such instance.
func (s *Store) InstanceConfig(ctx context.Context, envID, id string) (InstanceConfig, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `select c.config from service_instances i
		left join service_instance_configs c on c.environment_id = i.environment_id and c.instance_id = i.id
		where i.environment_id = $1::uuid and i.id = $2::uuid`, envID, id).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return InstanceConfig{}, NotFound("service instance %s", id)
	}
	if err != nil {
		return InstanceConfig{}, fmt.Errorf("the config of service instance %s: %w", id, err)
	}
	return decodeInstanceConfig(b)
}

// InstanceConfigs returns the configs of the environment's instances
// that have one set, by instance id (an instance it lacks has
// DefaultInstanceConfig).
func (s *Store) InstanceConfigs(ctx context.Context, envID string) (map[string]InstanceConfig, error) {
	rows, err := s.pool.Query(ctx, `select instance_id::text, config from service_instance_configs
		where environment_id = $1::uuid`, envID)
	if err != nil {
		return nil, fmt.Errorf("service instance configs: %w", err)
	}
	defer rows.Close()
	out := map[string]InstanceConfig{}
	for rows.Next() {
		var id string
		var b []byte
		if err := rows.Scan(&id, &b); err != nil {
			return nil, err
		}
		c, err := decodeInstanceConfig(b)
		if err != nil {
			return nil, err
		}
		out[id] = c
	}
	return out, rows.Err()
}

// SetInstanceConfig stores the config of the environment's instance id.
// ErrNotFound when the inventory has no such instance.
func (s *Store) SetInstanceConfig(ctx context.Context, envID, id string, c InstanceConfig) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `insert into service_instance_configs (environment_id, instance_id, config)
		select environment_id, id, $3 from service_instances where environment_id = $1::uuid and id = $2::uuid
		on conflict (environment_id, instance_id) do update set config = excluded.config, updated_at = now()`,
		envID, id, b)
	if err != nil {
		return fmt.Errorf("set the config of service instance %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return NotFound("service instance %s", id)
	}
	return nil
}

// decodeInstanceConfig reads a stored instance config; absent keys (and
// an absent row) take their defaults.
func decodeInstanceConfig(b []byte) (InstanceConfig, error) {
	c := DefaultInstanceConfig()
	if len(b) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("stored service instance config: %w", err)
	}
	return c, nil
}
