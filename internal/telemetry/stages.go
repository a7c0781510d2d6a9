package telemetry

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intendhq/intend/internal/runstages"
)

// StageHistograms is intend_batch_stage_seconds{environment,stage}: the
// time the batches of finished deploy runs spent in each stage (queued in
// the workflow, waiting for a poller, executing, recording). A run's
// workflow measures them into runstages' buckets; the histograms add them
// up with the same buckets, so their counts and sums are exact.
type StageHistograms struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	h    map[[2]string]*runstages.Stats // by environment and stage
}

func newStageHistograms() *StageHistograms {
	return &StageHistograms{
		desc: prometheus.NewDesc("intend_batch_stage_seconds",
			"Time the batches of finished deploy runs spent in each stage: queued (in the workflow, for a dispatch slot), "+
				"poll_wait (for a poller of the agent's task queue), execute (on the executor), record (writing outcomes).",
			[]string{"environment", "stage"}, nil),
		h: map[[2]string]*runstages.Stats{},
	}
}

// AddRun adds the batches of one finished run of environment env.
func (s *StageHistograms) AddRun(env string, r runstages.Run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range runstages.Names {
		st := r.Stage(name)
		if st.Count == 0 {
			continue
		}
		k := [2]string{env, name}
		if s.h[k] == nil {
			s.h[k] = &runstages.Stats{}
		}
		s.h[k].Merge(*st)
	}
}

// Describe implements prometheus.Collector.
func (s *StageHistograms) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

// Collect implements prometheus.Collector.
func (s *StageHistograms) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([][2]string, 0, len(s.h))
	for k := range s.h {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		st := s.h[k]
		buckets := make(map[float64]uint64, len(runstages.Bounds))
		var cum uint64
		for i, b := range runstages.Bounds {
			if i < len(st.Buckets) {
				cum += uint64(st.Buckets[i])
			}
			buckets[b] = cum
		}
		ch <- prometheus.MustNewConstHistogram(s.desc, uint64(st.Count), st.Sum, buckets, k[0], k[1])
	}
}
