// Package callbacks is what the receiver of intend's LSM callbacks needs:
// the event a callback delivers and the check of its signature.
//
// intend server POSTs every transfer of a service instance to the URLs
// registered with POST /lsm/v1/callbacks, as a JSON Event, with three
// headers:
//
//	X-Intend-Event-Id:  the event's id (the same for every attempt)
//	X-Intend-Timestamp: when this attempt was signed, in Unix seconds
//	X-Intend-Signature: sha256=<hex of HMAC-SHA256(secret, timestamp + "." + body)>
//
// where secret is the callback's secret exactly as the registration
// showed it (its text, not decoded), timestamp the header's text and
// body the request's body as received. A receiver verifies the
// signature (Verify), refuses a timestamp too far from its clock (a
// replayed request), answers 2xx once it has the event, and ignores an
// event id it has seen: delivery is at least once, in version order per
// instance. docs/api.md states the same for other languages.
package callbacks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery.
const (
	EventIDHeader   = "X-Intend-Event-Id"
	TimestampHeader = "X-Intend-Timestamp"
	SignatureHeader = "X-Intend-Signature"
	// AttemptHeader counts the attempts to deliver the event (1 for the
	// first); informative, not signed.
	AttemptHeader = "X-Intend-Attempt"
)

// signaturePrefix names the scheme in the signature header.
const signaturePrefix = "sha256="

// DefaultTolerance is how far Verify lets a timestamp be from the
// receiver's clock.
const DefaultTolerance = 5 * time.Minute

// Event is the body of a delivery: one transfer of a service instance.
type Event struct {
	// EventID identifies the transfer: the same for every callback that
	// gets it and every attempt.
	EventID string `json:"event_id"`
	// Environment is the environment's id, EnvironmentName its name.
	Environment     string `json:"environment"`
	EnvironmentName string `json:"environment_name"`
	ServiceEntity   string `json:"service_entity"`
	InstanceID      string `json:"instance_id"`
	// Identity is the value of the entity's identity attribute, if any.
	Identity string `json:"identity,omitempty"`
	// Version is the instance version the transfer wrote.
	Version int64 `json:"version"`
	// SourceState is the state it left ("" for the create); TargetState
	// the state it reached.
	SourceState string `json:"source_state,omitempty"`
	TargetState string `json:"target_state"`
	// Trigger is create, auto, api, on_update, on_delete or resource.
	Trigger string `json:"trigger"`
	// Error says the transfer was its lifecycle's error transfer (a
	// failed validation or deploy).
	Error bool `json:"error"`
	// Operations are the attribute-set operations it applied (promote,
	// rollback, clear candidate, ...).
	Operations []string `json:"operations"`
	// Actor is who asked for it (token:NAME, oidc:SUBJECT), or
	// system:intend for the engine's own transfers.
	Actor string `json:"actor"`
	// Time is when the transfer was written.
	Time time.Time `json:"time"`
}

// Notification is the body of a delivery to an environment's
// notification webhook (PUT /api/v1/environments/{env}/notifications/webhook):
// one new notification, sent with the same headers and signature as an
// Event. Its EventID is the notification's id.
type Notification struct {
	EventID string `json:"event_id"`
	// Environment is the environment's id, EnvironmentName its name.
	Environment     string `json:"environment"`
	EnvironmentName string `json:"environment_name"`
	// ID is the notification's id (GET .../notifications/{id}).
	ID string `json:"id"`
	// Kind is compile_failed, run_failed or agent_without_executor.
	Kind string `json:"kind"`
	// Severity is error or warning.
	Severity string `json:"severity"`
	Title    string `json:"title"`
	Message  string `json:"message"`
	// Compile, Run and Agent name what it is about (nil or "": not that
	// kind).
	Compile *int64  `json:"compile"`
	Run     *int64  `json:"run"`
	Agent   *string `json:"agent"`
	// Time is when the notification was written.
	Time time.Time `json:"time"`
}

// Sign returns the X-Intend-Signature value of body signed at timestamp
// (Unix seconds, as sent in X-Intend-Timestamp) with secret.
func Sign(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return signaturePrefix + hex.EncodeToString(mac.Sum(nil))
}

// ErrSignature is wrapped by every refusal of Verify.
var ErrSignature = errors.New("callback signature")

// Verify checks a delivery's headers against its body: the signature
// must be secret's, and the timestamp within tolerance of now
// (DefaultTolerance when tolerance is 0). The comparison takes constant
// time.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	ts := h.Get(TimestampHeader)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is not Unix seconds: %q", ErrSignature, TimestampHeader, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: the timestamp is %s away from now (at most %s)", ErrSignature, d.Round(time.Second), tolerance)
	}
	got := h.Get(SignatureHeader)
	if !strings.HasPrefix(got, signaturePrefix) {
		return fmt.Errorf("%w: %s does not start with %q", ErrSignature, SignatureHeader, signaturePrefix)
	}
	if !hmac.Equal([]byte(got), []byte(Sign(secret, ts, body))) {
		return fmt.Errorf("%w: it does not match the body and the secret", ErrSignature)
	}
	return nil
}
