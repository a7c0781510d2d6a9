package lsm

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"
)

// TestPoolArithmetic: a pool's values are First, First+Step, ..., Last,
// Count of them; Value and Ordinal are inverse on them, and Ordinal
// refuses what is outside, misaligned or of the wrong type.
func TestPoolArithmetic(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		why         string
		pool        Pool
		count       int64
		first, last any
		in, out     []any
	}{
		{"a range", Pool{Name: "asn", Kind: PoolRange, From: 64512, To: 65534}, 1023, int64(64512), int64(65534),
			[]any{float64(64512), json.Number("65000"), int64(65534)}, []any{float64(64511), float64(65535), 64512.5, "64512"}},
		{"a range through zero", Pool{Name: "r", Kind: PoolRange, From: -2, To: 2}, 5, int64(-2), int64(2), []any{float64(0)}, []any{float64(3)}},
		{"vlans", Pool{Name: "vlan", Kind: PoolVLAN, From: 1, To: 4094}, 4094, int64(1), int64(4094), []any{float64(1), float64(4094)}, []any{float64(0), float64(4095)}},
		{"/30s of a /28", Pool{Name: "p2p", Kind: PoolCIDR, Prefix: "10.0.0.0/28", Size: 30}, 4, "10.0.0.0/30", "10.0.0.12/30",
			[]any{"10.0.0.4/30", "10.0.0.8/30"}, []any{"10.0.0.2/30", "10.0.0.4/31", "10.0.0.16/30", "10.0.0.4", float64(4), "2001:db8::/30"}},
		{"/64s of an IPv6 /48", Pool{Name: "v6", Kind: PoolCIDR, Prefix: "2001:db8::/48", Size: 64}, 65536, "2001:db8::/64", "2001:db8:0:ffff::/64",
			[]any{"2001:db8:0:1::/64"}, []any{"2001:db8:1::/64", "10.0.0.0/30"}},
		{"a prefix of one", Pool{Name: "one", Kind: PoolCIDR, Prefix: "192.168.1.0/24", Size: 24}, 1, "192.168.1.0/24", "192.168.1.0/24", nil, []any{"192.168.2.0/24"}},
	} {
		if err := c.pool.Check(); err != nil {
			t.Fatalf("%s: %v", c.why, err)
		}
		if n := c.pool.Count(); n != c.count {
			t.Errorf("%s: count %d, want %d", c.why, n, c.count)
		}
		first, _ := c.pool.Value(c.pool.First())
		last, _ := c.pool.Value(c.pool.Last())
		if first != c.first || last != c.last {
			t.Errorf("%s: first %v last %v, want %v %v", c.why, first, last, c.first, c.last)
		}
		span := new(big.Int).Sub(c.pool.Last(), c.pool.First())
		if span.Div(span, c.pool.Step()).Int64() != c.count-1 {
			t.Errorf("%s: (last-first)/step is not count-1", c.why)
		}
		for _, v := range append(c.in, first, last) {
			o, text, ok := c.pool.Ordinal(v)
			if !ok {
				t.Errorf("%s: %v is not in the pool", c.why, v)
				continue
			}
			back, btext := c.pool.Value(o)
			if btext != text {
				t.Errorf("%s: %v → %s → %v %q", c.why, v, o, back, btext)
			}
		}
		for _, v := range c.out {
			if _, _, ok := c.pool.Ordinal(v); ok {
				t.Errorf("%s: %v (%T) is in the pool", c.why, v, v)
			}
		}
	}
}

// TestPoolCheck: what a pool's definition may not be.
func TestPoolCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		why  string
		pool Pool
		want string
	}{
		{"vlan 0", Pool{Name: "v", Kind: PoolVLAN, From: 0, To: 10}, "within 1–4094"},
		{"vlan 4095", Pool{Name: "v", Kind: PoolVLAN, From: 1, To: 4095}, "within 1–4094"},
		{"reversed", Pool{Name: "r", Kind: PoolRange, From: 2, To: 1}, "above"},
		{"too wide", Pool{Name: "r", Kind: PoolRange, From: -1 << 62, To: 1 << 62}, "too wide"},
		{"a cidr with from", Pool{Name: "c", Kind: PoolCIDR, Prefix: "10.0.0.0/8", Size: 30, From: 1}, "not from or to"},
		{"2^64 subnets", Pool{Name: "c", Kind: PoolCIDR, Prefix: "2001:db8::/32", Size: 96}, "at most 2^62"},
		{"a bad name", Pool{Name: "1x", Kind: PoolRange, From: 1, To: 2}, "name"},
		{"no kind", Pool{Name: "x", From: 1, To: 2}, "none of range, vlan, cidr"},
	} {
		if err := c.pool.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.why, err, c.want)
		}
	}
}

// TestWithoutReadOnlyKeepsAllocated: an allocated r attribute reaches the
// model (the server chose it); a computed one does not.
func TestWithoutReadOnlyKeepsAllocated(t *testing.T) {
	t.Parallel()
	specs := []AttributeSpec{{Name: "name", Modifier: ReadWrite}, {Name: "fqdn", Modifier: ReadOnly},
		{Name: "vlan", Modifier: ReadOnly, Allocate: "vlans"}}
	got := WithoutReadOnly(specs, map[string]any{"name": "a", "fqdn": "a.example", "vlan": float64(100)})
	if _, ok := got["fqdn"]; ok || got["vlan"] != float64(100) || got["name"] != "a" {
		t.Errorf("got %v", got)
	}
}
