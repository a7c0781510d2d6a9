package store

import (
	"encoding/json"
	"strconv"
	"time"
)

// Retention is the part of an environment's settings that says how long
// it keeps what grows with its history: the action log, deploy runs (and
// the deploy requests they took), compiles, LSM orders and service
// instance logs. Each is a number of seconds; 0 keeps everything. The
// server's periodic prune (PruneEnvironment) applies them; what is still
// referenced stays whatever its age (see PruneEnvironment).
type Retention struct {
	// ActionLogRetention: action log rows (resource_actions) that
	// finished longer ago go, except each resource's newest one and those
	// of open runs.
	ActionLogRetention int `json:"action_log_retention"`
	// RunRetention: finished deploy runs that ended longer ago go, with
	// the deploy requests taken into them or found to have nothing to
	// do; never an open run, the newest run of each action nor the newest
	// successful deploy.
	RunRetention int `json:"run_retention"`
	// CompileRetention: finished compiles that ended longer ago go,
	// never the environment's newest compile.
	CompileRetention int `json:"compile_retention"`
	// OrderRetention: LSM orders that finished longer ago go, with their
	// items.
	OrderRetention int `json:"order_retention"`
	// InstanceLogRetention: service instance log rows written longer ago
	// go when they are older than the instance's current state (an
	// instance keeps its log from its last state change on), and a
	// terminated instance last changed longer ago goes whole.
	InstanceLogRetention int `json:"instance_log_retention"`
	// NotificationRetention: resolved notifications last seen longer ago
	// go (and the oldest resolved ones beyond
	// MaxNotificationsPerEnvironment, whatever their age); unresolved
	// ones stay.
	NotificationRetention int `json:"notification_retention"`
}

const day = 24 * 3600

// DefaultRetention is the retention of a new environment.
func DefaultRetention() Retention {
	return Retention{ActionLogRetention: 7 * day, RunRetention: 30 * day, CompileRetention: 7 * day,
		OrderRetention: 30 * day, InstanceLogRetention: 90 * day, NotificationRetention: 30 * day}
}

// The range of a retention other than 0 (keep all): at least an hour (the
// prune runs hourly, and a dry-run's results or a compile's report must
// outlive the request that made them), at most ten years.
const (
	MinRetention = 3600
	MaxRetention = 10 * 366 * day
)

var retentionRule = "must be a whole number of seconds from " + strconv.Itoa(MinRetention) + " (an hour) to " +
	strconv.Itoa(MaxRetention) + " (ten years), or 0 to keep everything"

// retentionKeys are the settings Retention holds, by name.
var retentionKeys = []string{"action_log_retention", "compile_retention", "instance_log_retention",
	"notification_retention", "order_retention", "run_retention"}

// field returns the setting k of r, nil when k is not a retention.
func (r *Retention) field(k string) *int {
	switch k {
	case "action_log_retention":
		return &r.ActionLogRetention
	case "run_retention":
		return &r.RunRetention
	case "compile_retention":
		return &r.CompileRetention
	case "order_retention":
		return &r.OrderRetention
	case "instance_log_retention":
		return &r.InstanceLogRetention
	case "notification_retention":
		return &r.NotificationRetention
	}
	return nil
}

// apply sets the retention setting k from raw. known is false when k is
// not a retention; reason is why raw was refused ("" when it was taken).
func (r *Retention) apply(k string, raw json.RawMessage) (known bool, reason string) {
	f := r.field(k)
	if f == nil {
		return false, ""
	}
	var n int
	if json.Unmarshal(raw, &n) != nil || n != 0 && (n < MinRetention || n > MaxRetention) {
		return true, retentionRule
	}
	*f = n
	return true, ""
}

// cutoff is the time before which a retention of seconds prunes, counted
// back from now; ok is false for 0 (keep everything).
func cutoff(now time.Time, seconds int) (time.Time, bool) {
	if seconds <= 0 {
		return time.Time{}, false
	}
	return now.Add(-time.Duration(seconds) * time.Second), true
}
