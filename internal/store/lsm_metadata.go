package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Instance metadata (docs/lsm.md, "Metadata"): free key/values per
// instance, in service_instances.metadata. A write takes no transfer: it
// updates that column alone, in one statement, so the instance's
// version, state, sets and log stay as they are. A transfer's write
// (ApplyInstanceChange) sets the other columns and never this one, and
// PostgreSQL's row lock orders the two: neither overwrites the other.

// MaxMetadataBytes bounds an instance's metadata: the object as
// PostgreSQL prints it (jsonb::text), in bytes.
const MaxMetadataBytes = 16 << 10

// MetadataTooLargeError is a metadata write that would leave the
// instance's metadata above MaxMetadataBytes; nothing was written.
type MetadataTooLargeError struct {
	Bytes int
}

func (e *MetadataTooLargeError) Error() string {
	return fmt.Sprintf("the instance's metadata would take %d bytes as JSON, more than the %d it may", e.Bytes, MaxMetadataBytes)
}

// WriteInstanceMetadata writes the metadata of entity's instance ref (its
// id or identity) and returns the instance as it is then. With replace,
// the metadata become set; without, set is merged into them (each key
// replaced) and the keys of remove are removed. A deleted instance, or
// one of another entity, is not found. Metadata above MaxMetadataBytes is
// a *MetadataTooLargeError, and nothing is written.
func (s *Store) WriteInstanceMetadata(ctx context.Context, envID, entity, ref string, set map[string]any, remove []string, replace bool) (ServiceInstance, error) {
	if set == nil {
		set = map[string]any{}
	}
	if remove == nil {
		remove = []string{}
	}
	var out ServiceInstance
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var size int
		where := `environment_id = $1::uuid and entity = $2 and not deleted and `
		args := []any{envID, entity, ref, set, remove, replace}
		if IsUUID(ref) {
			where += `id = $3::uuid`
		} else {
			where += `identity = $3`
		}
		// One statement, on this column alone: a transfer's write of the
		// same row waits for it (or it for the transfer) and keeps it.
		err := tx.QueryRow(ctx, `update service_instances
			set metadata = nullif(case when $6 then $4::jsonb
			                           else (coalesce(metadata, '{}'::jsonb) || $4::jsonb) - $5::text[] end, '{}'::jsonb)
			where `+where+`
			returning coalesce(octet_length(metadata::text), 0)`, args...).Scan(&size)
		if errors.Is(err, pgx.ErrNoRows) {
			return NotFound("service instance %s", ref)
		}
		if err != nil {
			return err
		}
		if size > MaxMetadataBytes {
			return &MetadataTooLargeError{Bytes: size}
		}
		out, err = getInstance(ctx, tx, envID, entity, ref)
		return err
	})
	return out, err
}
