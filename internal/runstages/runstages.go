// Package runstages measures where the batches of a deploy run spend their
// time: queued in the workflow (ready, waiting for a dispatch slot), waiting
// for a poller of the agent's task queue, running on the executor, and
// recording their outcomes. A run keeps, per stage, a small fixed histogram
// (mergeable across batches and continue-as-new, bounded in size whatever
// the number of batches), stored with the run and added to the server's
// intend_batch_stage_seconds histogram when the run finishes.
package runstages

import "math"

// Stage names, the label values of intend_batch_stage_seconds.
const (
	Queued   = "queued"
	PollWait = "poll_wait"
	Execute  = "execute"
	Record   = "record"
)

// Names lists the stages in the order a batch goes through them.
var Names = []string{Queued, PollWait, Execute, Record}

// Bounds are the upper bounds, in seconds, of the buckets of Stats (and of
// intend_batch_stage_seconds); a last bucket holds what is above them.
var Bounds = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800}

// Stats is the distribution of one stage's time over a run's batches.
type Stats struct {
	Count int     `json:"count"`
	Sum   float64 `json:"sum_seconds"`
	Max   float64 `json:"max_seconds"`
	// Buckets counts the batches per bucket of Bounds (not cumulative;
	// len(Bounds)+1 entries, the last above every bound).
	Buckets []int `json:"buckets,omitempty"`
}

// Observe adds one batch's time, in seconds (a negative time, from clocks
// apart, counts as 0).
func (s *Stats) Observe(sec float64) {
	if sec < 0 || math.IsNaN(sec) {
		sec = 0
	}
	if len(s.Buckets) != len(Bounds)+1 {
		s.Buckets = make([]int, len(Bounds)+1)
	}
	i := 0
	for i < len(Bounds) && sec > Bounds[i] {
		i++
	}
	s.Buckets[i]++
	s.Count++
	s.Sum += sec
	s.Max = max(s.Max, sec)
}

// Merge adds o's batches to s.
func (s *Stats) Merge(o Stats) {
	if o.Count == 0 {
		return
	}
	if len(s.Buckets) != len(Bounds)+1 {
		s.Buckets = make([]int, len(Bounds)+1)
	}
	for i := range min(len(o.Buckets), len(s.Buckets)) {
		s.Buckets[i] += o.Buckets[i]
	}
	s.Count += o.Count
	s.Sum += o.Sum
	s.Max = max(s.Max, o.Max)
}

// Mean is the average time of a batch in the stage.
func (s Stats) Mean() float64 {
	if s.Count == 0 {
		return 0
	}
	return s.Sum / float64(s.Count)
}

// Quantile estimates the q-quantile (0 < q <= 1): the upper bound of the
// bucket that holds it, never more than Max.
func (s Stats) Quantile(q float64) float64 {
	if s.Count == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(s.Count)))
	seen := 0
	for i, n := range s.Buckets {
		seen += n
		if seen >= rank {
			if i < len(Bounds) {
				return min(Bounds[i], s.Max)
			}
			break
		}
	}
	return s.Max
}

// Run is what a deploy run measured of its batches.
type Run struct {
	Queued   Stats `json:"queued"`
	PollWait Stats `json:"poll_wait"`
	Execute  Stats `json:"execute"`
	Record   Stats `json:"record"`
	// MaxInFlight is the most batches the run had dispatched at once.
	MaxInFlight int `json:"max_in_flight"`
	// HistoryEvents counts the events of the run's workflow histories
	// (summed over continue-as-new: each workflow task adds three, each
	// activity three); Segments counts its histories.
	HistoryEvents int `json:"history_events"`
	Segments      int `json:"segments"`
}

// Stage returns the stats of a stage by name (nil for an unknown one).
func (r *Run) Stage(name string) *Stats {
	switch name {
	case Queued:
		return &r.Queued
	case PollWait:
		return &r.PollWait
	case Execute:
		return &r.Execute
	case Record:
		return &r.Record
	}
	return nil
}

// Batch is what an executor measured of one batch, in seconds.
type Batch struct {
	PollWait float64 `json:",omitempty"`
	Execute  float64 `json:",omitempty"`
	Record   float64 `json:",omitempty"`
}
