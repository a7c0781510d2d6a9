package store

import (
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestCopyUUIDEncodes: the environment id of a COPY row (writeVersion's
// version_resources) encodes as a uuid at once, with no error built and
// no text parsed on the way, as the string it was did per row.
func TestCopyUUIDEncodes(t *testing.T) {
	m := pgtype.NewMap()
	id := "6f1c2a5e-2b7a-4f7e-9c7a-3d2e1f0a9b8c"
	u, err := copyUUID(id)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 64)
	b, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, u, buf)
	if err != nil || len(b) != 16 {
		t.Fatalf("encode: %x, %v", b, err)
	}
	if allocs := testing.AllocsPerRun(100, func() { m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, u, buf) }); allocs > 0 {
		t.Errorf("%v allocations an encode", allocs)
	}
	if _, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id, buf); err == nil {
		t.Log("pgx encodes a string as a uuid now: copyUUID is no longer needed")
	}
	if _, err := copyUUID("not-a-uuid"); err == nil {
		t.Error("copyUUID took a malformed id")
	}
}
