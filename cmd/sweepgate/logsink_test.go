package main

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the sink's goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogSinkKeepsOrderAndFlushesOnClose writes lines through both writers
// and requires every one, in order, once Close returns, and a line written
// after Close right after them.
func TestLogSinkKeepsOrderAndFlushesOnClose(t *testing.T) {
	var out lockedBuffer
	s := newLogSink(&out, 1<<20)
	var want strings.Builder
	for i := range 1000 {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		w := io.Writer(s)
		if i%3 == 0 {
			w = s.droppable()
		}
		if _, err := io.WriteString(w, line); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if got := out.String(); got != want.String() {
		t.Fatalf("after Close the output holds %d bytes, want every line in order (%d bytes)", len(got), want.Len())
	}
	if _, err := io.WriteString(s, "after close\n"); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != want.String()+"after close\n" {
		t.Fatalf("a line written after Close did not follow the others: %q", got[max(0, len(got)-40):])
	}
	if s.Dropped() != 0 {
		t.Fatalf("dropped %d lines with room to spare", s.Dropped())
	}
}

// TestLogSinkDropsOnlyDroppableLines fills the sink while its output is
// stuck: a droppable line is dropped and counted, an ordinary line waits
// and is written once the output moves again.
func TestLogSinkDropsOnlyDroppableLines(t *testing.T) {
	pr, pw := io.Pipe()
	const limit = 64
	s := newLogSink(pw, limit)
	// Nobody reads the pipe yet: once the writer goroutine has taken the
	// first line it is stuck writing it, and the sink fills.
	io.WriteString(s, "first\n")
	for deadline := time.Now().Add(10 * time.Second); pendingLen(s) > 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the writer goroutine never took the first line")
		}
	}
	io.WriteString(s.droppable(), strings.Repeat("x", limit-1)+"\n") // fills the sink
	io.WriteString(s.droppable(), "dropped request line\n")
	if s.Dropped() != 1 {
		t.Fatalf("dropped %d lines, want the one written to the full sink", s.Dropped())
	}
	audit := make(chan struct{})
	go func() {
		io.WriteString(s, "audit line\n") // waits for room, never dropped
		close(audit)
	}()
	for deadline := time.Now().Add(10 * time.Second); waiting(s) == 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the audit line neither waited for room nor was written")
		}
	}
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(pr)
		got <- string(b)
	}()
	<-audit
	s.Close()
	pw.Close()
	out := <-got
	want := "first\n" + strings.Repeat("x", limit-1) + "\n" + "audit line\n"
	if out != want || s.Dropped() != 1 {
		t.Fatalf("output %q with %d dropped, want %q with 1", out, s.Dropped(), want)
	}
}

func pendingLen(s *logSink) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

func waiting(s *logSink) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}
