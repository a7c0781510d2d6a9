package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/intent"
)

// VersionDiff is what changed from one version of an environment to
// another: which resources were added, removed or modified, by id.
type VersionDiff struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Added holds the ids of resources in To but not in From, sorted.
	Added []string `json:"added"`
	// Removed holds the ids of resources in From but not in To, sorted.
	Removed []string `json:"removed"`
	// Modified holds the resources in both whose intent differs, by id.
	Modified []intent.ModifiedResource `json:"modified"`
	// Next, on a page that is full, is the last resource id on it: ask
	// for the diff after it for the next page.
	Next string `json:"next,omitempty"`
}

// DiffPage selects a page of a diff: the resources (added, removed and
// modified together, by id) after After, at most Limit (0: all).
type DiffPage struct {
	After string
	Limit int
}

// DiffVersions compares version a of an environment (From) with version b
// (To); a may be newer than b, which gives the reverse diff. Both versions
// must exist, else the error wraps ErrNotFound.
//
// A resource is modified when its intent hash differs, so only resources
// whose membership changes between the two versions are looked at (the
// rows that start or end in between), and contents are loaded only for the
// modified ones. Everything is read in one snapshot, so a concurrent prune
// cannot pull contents away half-way.
func (s *Store) DiffVersions(ctx context.Context, envID string, a, b int64, page ...DiffPage) (VersionDiff, error) {
	var pg DiffPage
	if len(page) > 0 {
		pg = page[0]
	}
	d := VersionDiff{From: a, To: b, Added: []string{}, Removed: []string{}, Modified: []intent.ModifiedResource{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `select version from versions
				where environment_id = $1::uuid and version = any(array[$2, $3]::bigint[])`, envID, a, b)
			if err != nil {
				return err
			}
			found, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return err
			}
			for _, v := range []int64{a, b} {
				if !slices.Contains(found, v) {
					return NotFound("version %d", v)
				}
			}
			if a == b {
				return nil
			}

			// A resource can differ only if one of its membership rows
			// starts or ends in (lo, hi]; its rows at a and at b then say
			// how. A resource removed and re-added with the same hash in
			// between is a candidate but compares equal.
			lo, hi := min(a, b), max(a, b)
			rows, err = tx.Query(ctx, `
				with candidates as (
					select resource_id from version_resources
					where environment_id = $1::uuid and first_version > $4 and first_version <= $5
					union
					select resource_id from version_resources
					where environment_id = $1::uuid and last_version > $4 and last_version <= $5
				),
				at_a as (
					select vr.resource_id, vr.hash from version_resources vr join candidates c using (resource_id)
					where vr.environment_id = $1::uuid and vr.first_version <= $2
					  and (vr.last_version is null or vr.last_version > $2)
				),
				at_b as (
					select vr.resource_id, vr.hash from version_resources vr join candidates c using (resource_id)
					where vr.environment_id = $1::uuid and vr.first_version <= $3
					  and (vr.last_version is null or vr.last_version > $3)
				)
				select coalesce(at_a.resource_id, at_b.resource_id) as id, at_a.hash, at_b.hash
				from at_a full join at_b on at_a.resource_id = at_b.resource_id
				where at_a.hash is distinct from at_b.hash
				  and coalesce(at_a.resource_id, at_b.resource_id) > $6
				order by id limit nullif($7, 0)`, envID, a, b, lo, hi, pg.After, pg.Limit)
			if err != nil {
				return err
			}
			type pair struct {
				id       string
				from, to []byte
			}
			var modified []pair
			var hashes [][]byte
			n := 0
			for rows.Next() {
				var p pair
				if err := rows.Scan(&p.id, &p.from, &p.to); err != nil {
					return err
				}
				if n++; pg.Limit > 0 && n == pg.Limit {
					d.Next = p.id
				}
				switch {
				case p.from == nil:
					d.Added = append(d.Added, p.id)
				case p.to == nil:
					d.Removed = append(d.Removed, p.id)
				default:
					modified = append(modified, p)
					hashes = append(hashes, p.from, p.to)
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(modified) == 0 {
				return nil
			}

			contents, err := loadContents(ctx, tx, envID, hashes)
			if err != nil {
				return err
			}
			for _, p := range modified {
				from, okFrom := contents[string(p.from)]
				to, okTo := contents[string(p.to)]
				if !okFrom || !okTo {
					// The foreign key makes this unreachable.
					return fmt.Errorf("contents of %s are missing", p.id)
				}
				changes, err := diffContents(from, to)
				if err != nil {
					return fmt.Errorf("compare %s: %w", p.id, err)
				}
				d.Modified = append(d.Modified, intent.ModifiedResource{ID: p.id, Changes: changes})
			}
			return nil
		})
	if err != nil {
		return VersionDiff{}, err
	}
	return d, nil
}

// storedContent is one stored resource intent, attributes still encoded.
type storedContent struct {
	attributes    []byte
	requires      []string
	purged        bool
	sendEvent     bool
	receiveEvents bool
	reportOnly    bool
	undefined     bool
	unmanaged     bool
	resourceSet   *string
}

// loadContents reads the contents with the given hashes, keyed by hash.
func loadContents(ctx context.Context, tx pgx.Tx, envID string, hashes [][]byte) (map[string]storedContent, error) {
	rows, err := tx.Query(ctx, `select hash, attributes, requires, purged, send_event, receive_events, report_only,
		undefined, unmanaged, resource_set from resource_contents where environment_id = $1::uuid and hash = any($2::bytea[])`, envID, hashes)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]storedContent, len(hashes))
	for rows.Next() {
		var h []byte
		var c storedContent
		if err := rows.Scan(&h, &c.attributes, &c.requires, &c.purged, &c.sendEvent, &c.receiveEvents, &c.reportOnly,
			&c.undefined, &c.unmanaged, &c.resourceSet); err != nil {
			return nil, err
		}
		out[string(h)] = c
	}
	return out, rows.Err()
}

// diffContents compares two contents attribute by attribute. Values are
// compared by their canonical JSON (numbers by their text, as the intent
// hash does), so "420" and "420.0" differ.
func diffContents(from, to storedContent) (map[string]intent.Change, error) {
	fa, err := decodeAttributes(from.attributes)
	if err != nil {
		return nil, err
	}
	ta, err := decodeAttributes(to.attributes)
	if err != nil {
		return nil, err
	}
	changes := map[string]intent.Change{}
	for k, fv := range fa {
		tv, ok := ta[k]
		if !ok {
			changes[k] = intent.Change{From: fv, To: nil}
			continue
		}
		same, err := sameJSON(fv, tv)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		if !same {
			changes[k] = intent.Change{From: fv, To: tv}
		}
	}
	for k, tv := range ta {
		if _, ok := fa[k]; !ok {
			changes[k] = intent.Change{From: nil, To: tv}
		}
	}
	// The resource's own fields go after the attributes: on a name clash
	// they win, because they are what the orchestrator acts on.
	fr, tr := sortedIDs(from.requires), sortedIDs(to.requires)
	if !slices.Equal(fr, tr) {
		changes["requires"] = intent.Change{From: fr, To: tr}
	}
	if fs, ts := setName(from.resourceSet), setName(to.resourceSet); fs != ts {
		changes["resource_set"] = intent.Change{From: fs, To: ts}
	}
	for _, f := range []struct {
		name     string
		from, to bool
	}{
		{"purged", from.purged, to.purged},
		{"send_event", from.sendEvent, to.sendEvent},
		{"receive_events", from.receiveEvents, to.receiveEvents},
		{"report_only", from.reportOnly, to.reportOnly},
		{"undefined", from.undefined, to.undefined},
		{"unmanaged", from.unmanaged, to.unmanaged},
	} {
		if f.from != f.to {
			changes[f.name] = intent.Change{From: f.from, To: f.to}
		}
	}
	return changes, nil
}

// setName is a resource set for a diff: nil (shared) or its name.
func setName(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// decodeAttributes decodes stored attributes, keeping numbers as
// json.Number so that nothing is lost to float64.
func decodeAttributes(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode attributes: %w", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// sameJSON reports whether two decoded values have the same canonical JSON:
// encoding/json sorts object members and writes json.Number as its text.
func sameJSON(a, b any) (bool, error) {
	ea, err := json.Marshal(a)
	if err != nil {
		return false, err
	}
	eb, err := json.Marshal(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ea, eb), nil
}

// sortedIDs returns ids sorted, never nil (so JSON shows [] rather than
// null); stored requires are sorted already, this only guards the
// comparison.
func sortedIDs(ids []string) []string {
	out := slices.Clone(ids)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return out
}
