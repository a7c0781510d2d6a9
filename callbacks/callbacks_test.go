package callbacks_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/intendhq/intend/callbacks"
)

const secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestSignMatchesOpenSSL pins the scheme to an independent
// implementation:
//
//	echo -n '1700000000.{"event_id":"x"}' | openssl dgst -sha256 -hmac "$secret"
func TestSignMatchesOpenSSL(t *testing.T) {
	t.Parallel()
	got := callbacks.Sign(secret, "1700000000", []byte(`{"event_id":"x"}`))
	if want := "sha256=7bf420f399da677fbd16c5235596775aed3929ba0c3ec94e9e3df925e0c82edb"; got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"event_id":"x"}`)
	headers := func(ts time.Time, sig string) http.Header {
		h := http.Header{}
		s := strconv.FormatInt(ts.Unix(), 10)
		h.Set(callbacks.TimestampHeader, s)
		if sig == "" {
			sig = callbacks.Sign(secret, s, body)
		}
		h.Set(callbacks.SignatureHeader, sig)
		return h
	}
	if err := callbacks.Verify(secret, headers(now.Add(-time.Minute), ""), body, now, 0); err != nil {
		t.Fatalf("a good delivery: %v", err)
	}
	for _, tc := range []struct {
		why    string
		secret string
		h      http.Header
		body   string
	}{
		{"another secret", "other", headers(now, ""), string(body)},
		{"a changed body", secret, headers(now, ""), `{"event_id":"y"}`},
		{"a replay from long ago", secret, headers(now.Add(-10*time.Minute), ""), string(body)},
		{"a timestamp from the future", secret, headers(now.Add(10*time.Minute), ""), string(body)},
		{"no scheme", secret, headers(now, "7bf420f399da677fbd16c5235596775aed3929ba0c3ec94e9e3df925e0c82edb"), string(body)},
		{"no signature", secret, func() http.Header { h := headers(now, ""); h.Del(callbacks.SignatureHeader); return h }(), string(body)},
		{"no timestamp", secret, func() http.Header { h := headers(now, ""); h.Del(callbacks.TimestampHeader); return h }(), string(body)},
		{"a signed timestamp changed", secret, func() http.Header {
			h := headers(now, "")
			h.Set(callbacks.TimestampHeader, strconv.FormatInt(now.Unix()+1, 10))
			return h
		}(), string(body)},
	} {
		if err := callbacks.Verify(tc.secret, tc.h, []byte(tc.body), now, 0); !errors.Is(err, callbacks.ErrSignature) {
			t.Errorf("%s: %v", tc.why, err)
		}
	}
}
