package admin

import (
	"sync"

	"github.com/sweepgate/sweepgate/reclaim"
)

// ProgressHub passes the reclaimer's progress reports to the requests that
// stream them. A slow reader misses intermediate reports, never the pass:
// each subscriber holds only the newest one.
type ProgressHub struct {
	mu   sync.Mutex
	subs map[chan reclaim.Progress]struct{}
}

// NewProgressHub returns a hub without subscribers.
func NewProgressHub() *ProgressHub {
	return &ProgressHub{subs: make(map[chan reclaim.Progress]struct{})}
}

// Publish is the reclaimer's Progress callback; it never blocks the pass.
func (h *ProgressHub) Publish(p reclaim.Progress) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case <-ch: // drop the older report
		default:
		}
		ch <- p // room for one, and only Publish sends
	}
}

func (h *ProgressHub) subscribe() (<-chan reclaim.Progress, func()) {
	ch := make(chan reclaim.Progress, 1)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}
