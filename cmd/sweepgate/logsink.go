package main

import (
	"io"
	"sync"
	"sync/atomic"
)

// logSinkLimit is how many bytes of log lines a logSink holds before a
// droppable line is dropped and any other line waits: about four thousand
// request lines, a few seconds' worth at the gateway's small-request rate.
const logSinkLimit = 1 << 20

// logSink carries serve's log lines to out from one goroutine, so that
// writing a line costs its writer a copy and never a system call: lines
// that arrive while out is being written go out together in one write.
// Lines keep the order they were written in. A line written through Write
// is never dropped: when limit bytes are waiting, its writer waits for
// room. A line written through the droppable writer (the gateway's
// one line per request) is dropped instead and counted. Close writes out
// every line written before it; lines written after it go straight to out.
type logSink struct {
	out   io.Writer
	limit int

	mu      sync.Mutex
	changed sync.Cond     // signalled when lines arrive, are written out, or the sink closes
	pending []byte        // lines not yet handed to out
	closed  bool          // Close was called
	stopped bool          // the writer goroutine has written everything and returned
	waiting int           // writers waiting for room
	done    chan struct{} // closed when stopped is set

	dropped atomic.Uint64
}

func newLogSink(out io.Writer, limit int) *logSink {
	s := &logSink{out: out, limit: limit, done: make(chan struct{})}
	s.changed.L = &s.mu
	go s.run()
	return s
}

// Write queues p, waiting while the sink is full.
func (s *logSink) Write(p []byte) (int, error) {
	return s.write(p, false)
}

// droppable returns a writer that queues each line like Write, but drops
// it when the sink is full rather than wait.
func (s *logSink) droppable() io.Writer { return droppableWriter{s} }

type droppableWriter struct{ s *logSink }

func (w droppableWriter) Write(p []byte) (int, error) { return w.s.write(p, true) }

func (s *logSink) write(p []byte, droppable bool) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.closed && len(s.pending) > 0 && len(s.pending)+len(p) > s.limit {
		if droppable {
			s.dropped.Add(1)
			return len(p), nil
		}
		s.waiting++
		s.changed.Wait()
		s.waiting--
	}
	if s.closed {
		// Once the writer goroutine has written everything before it,
		// writing here, under the lock, keeps the order.
		for !s.stopped {
			s.changed.Wait()
		}
		return s.out.Write(p)
	}
	s.pending = append(s.pending, p...)
	s.changed.Broadcast()
	return len(p), nil
}

// run writes out what is pending until the sink closes and nothing is left.
func (s *logSink) run() {
	defer close(s.done)
	var writing []byte
	for {
		s.mu.Lock()
		for len(s.pending) == 0 && !s.closed {
			s.changed.Wait()
		}
		if len(s.pending) == 0 {
			s.stopped = true
			s.changed.Broadcast()
			s.mu.Unlock()
			return
		}
		writing, s.pending = s.pending, writing[:0]
		s.changed.Broadcast() // room for the writers waiting for it
		s.mu.Unlock()
		// A failed write loses its lines: there is nowhere else to report it.
		_, _ = s.out.Write(writing)
		if cap(writing) > 4*s.limit {
			writing = nil // a burst's buffer is not kept for good
		}
	}
}

// Close writes out every line written so far and stops the writer
// goroutine. Lines written afterwards go straight to out.
func (s *logSink) Close() {
	s.mu.Lock()
	s.closed = true
	s.changed.Broadcast()
	s.mu.Unlock()
	<-s.done
}

// Dropped returns how many droppable lines were dropped.
func (s *logSink) Dropped() uint64 { return s.dropped.Load() }
