package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// BenchmarkAllocateInAFullPool times a create that allocates from pools
// already holding many values (the inventory a service_instance_quota of
// 100,000 allows; 99,000 stays under it): `go test -run '^$' -bench AllocateInAFullPool
// ./internal/store/`. The values are given densely from the pools' first,
// as creates without terminations leave them, so the lowest free one is
// past all of them.
func BenchmarkAllocateInAFullPool(b *testing.B) {
	for _, n := range []int{1_000, 99_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st, url := openStore(b)
			e := newEnv(b, st)
			ctx := context.Background()
			if _, err := st.PutModel(ctx, e.ID, linkModel("a", linkPools(4094, "10.0.0.0/8"))); err != nil {
				b.Fatal(err)
			}
			// n instances holding the first n values of asn and p2p (the
			// VLAN pool is too small: its values are left free).
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close(ctx)
			for _, q := range []string{
				`update lsm_pools set definition = jsonb_set(definition, '{to}', '1000000') where environment_id = $1::uuid and name = 'asn'`,
				`insert into service_instances (environment_id, entity, id, state, version)
					select $1::uuid, 'link', ('00000000-0000-4000-9000-' || lpad(i::text, 12, '0'))::uuid, 'up', 1
					from generate_series(1, $2::int) i`,
				`insert into lsm_allocations (environment_id, pool, value, ordinal, instance_id, attribute)
					select $1::uuid, 'asn', (64511 + i)::text, (64511 + i)::numeric,
						('00000000-0000-4000-9000-' || lpad(i::text, 12, '0'))::uuid, 'asn'
					from generate_series(1, $2::int) i`,
				`insert into lsm_allocations (environment_id, pool, value, ordinal, instance_id, attribute)
					select $1::uuid, 'p2p', '10.' || ((i-1)*4/65536) || '.' || ((i-1)*4/256%256) || '.' || ((i-1)*4%256) || '/30',
						(167772160 + (i-1)*4)::numeric, ('00000000-0000-4000-9000-' || lpad(i::text, 12, '0'))::uuid, 'subnet'
					from generate_series(1, $2::int) i`,
				`analyze lsm_allocations`,
			} {
				args := []any{e.ID, n}
				if q == `analyze lsm_allocations` {
					args = nil
				} else if q[:6] == "update" {
					args = []any{e.ID}
				}
				if _, err := conn.Exec(ctx, q, args...); err != nil {
					b.Fatalf("%s: %v", q, err)
				}
			}
			// The first create looks from each pool's first value (the
			// values above were written behind the store's back); the
			// ones timed start where it left off, as every create after a
			// server's first does.
			if _, err := createLink(ctx, st, e.ID, newLinkID(), "first"); err != nil {
				b.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `delete from lsm_allocations where environment_id = $1::uuid and pool = 'vlan'`, e.ID); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				if i > 0 && i%4 == 0 {
					b.StopTimer()
					// The VLAN pool holds 5 values: free them.
					if _, err := conn.Exec(ctx, `delete from lsm_allocations where environment_id = $1::uuid and pool = 'vlan'`, e.ID); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if _, err := createLink(ctx, st, e.ID, newLinkID(), fmt.Sprintf("l%d", i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
