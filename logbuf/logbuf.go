// Package logbuf holds Buffer, where a test points a logger: any number of
// goroutines may write it while the test reads what was written.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer whose writes and reads are serialised. The zero
// value is empty and ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
