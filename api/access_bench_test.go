package api_test

import (
	"context"
	"testing"

	"github.com/intendhq/intend/api"

	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
)

// BenchmarkAuthenticate is what authentication adds to every request: one
// token lookup by hash in PostgreSQL (make bench; docs/benchmarks.md).
func BenchmarkAuthenticate(b *testing.B) {
	st, err := store.Open(context.Background(), testenv.Database(b))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	secret := auth.NewSecret()
	if _, err := st.CreateToken(context.Background(), store.NewToken{Name: "bench", Role: "admin",
		Hash: auth.Hash(secret), Hint: auth.Hint(secret), CreatedBy: "bench"}); err != nil {
		b.Fatal(err)
	}
	a := &auth.Authenticator{Tokens: st}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := a.Authenticate(ctx, secret); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGuardedRead is one authenticated read through the whole
// route guard (token, environment, role) and the handler, over HTTP: the
// request a client's wait loop repeats.
func BenchmarkGuardedRead(b *testing.B) {
	f := newFixture(b, api.Options{})
	f.env("bench")
	b.ResetTimer()
	for b.Loop() {
		if code, out := f.call("GET", "/api/v1/environments/bench", ""); code != 200 {
			b.Fatalf("%d %v", code, out)
		}
	}
}
