package plugin

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/intendhq/intend/adapters/plugin/adapterv1"
)

// sentMessages records what a session sends; nothing else of the stream
// is used.
type sentMessages struct {
	adapterv1.Adapter_SessionServer
	sizes   []int
	replies int
	after   func(replies int)
}

func (s *sentMessages) Send(m *adapterv1.PluginMessage) error {
	s.sizes = append(s.sizes, proto.Size(m))
	s.replies += len(m.GetReplies())
	s.after(s.replies)
	return nil
}

// TestWriteSplitsLargeReplies: replies that are ready together go in one
// message, but never one larger than gRPC's default limit (4 MiB) when
// each fits in it: 20 observations of 300 KiB each.
func TestWriteSplitsLargeReplies(t *testing.T) {
	const n = 20
	replies := make(chan *adapterv1.Reply, n)
	big := []byte(`{"v":"` + strings.Repeat("x", 300<<10) + `"}`)
	for i := range n {
		replies <- &adapterv1.Reply{Id: uint64(i + 1), Exists: true, AttributesJson: big}
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	s := &sentMessages{after: func(r int) {
		if r == n {
			cancel(nil)
		}
	}}
	(&server{}).write(ctx, cancel, s, replies)
	if s.replies != n {
		t.Fatalf("%d replies sent, want %d", s.replies, n)
	}
	for i, size := range s.sizes {
		if size > 4<<20 {
			t.Errorf("message %d is %d bytes, above gRPC's default limit of 4 MiB", i, size)
		}
	}
	if len(s.sizes) >= n {
		t.Errorf("%d messages for %d replies that were ready together, want them grouped", len(s.sizes), n)
	}
}
