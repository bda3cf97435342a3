package sigv4

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"testing"
	"testing/iotest"
)

// scriptedReader returns data in the given pieces, then ends with err.
type scriptedReader struct {
	pieces [][]byte
	err    error
	empty  int // (0, nil) results to return before each piece
	calls  int
}

func (s *scriptedReader) Read(p []byte) (int, error) {
	s.calls++
	if s.empty > 0 && s.calls%(s.empty+1) != 0 {
		return 0, nil
	}
	if len(s.pieces) == 0 {
		return 0, s.err
	}
	n := copy(p, s.pieces[0])
	s.pieces[0] = s.pieces[0][n:]
	if len(s.pieces[0]) == 0 {
		s.pieces = s.pieces[1:]
	}
	return n, nil
}

func TestTailGuard(t *testing.T) {
	errBad := errors.New("bad body")
	for _, size := range []int{0, 1, 2, 3, 10, 4097} {
		data := testData(size)
		for _, step := range []int{1, 2, 3, 4096, 8192} {
			for _, srcErr := range []error{io.EOF, errBad} {
				for _, empty := range []int{0, 2} {
					name := strconv.Itoa(size) + "/" + strconv.Itoa(step) + "/" + srcErr.Error() + "/" + strconv.Itoa(empty)
					t.Run(name, func(t *testing.T) {
						var pieces [][]byte
						for rest := data; len(rest) > 0; {
							n := min(len(rest), 5)
							pieces = append(pieces, append([]byte(nil), rest[:n]...))
							rest = rest[n:]
						}
						g := newTailGuard(&scriptedReader{pieces: pieces, err: srcErr, empty: empty})
						var out []byte
						buf := make([]byte, step)
						var err error
						for range 100000 {
							var n int
							n, err = g.Read(buf)
							out = append(out, buf[:n]...)
							if err != nil {
								break
							}
						}
						if srcErr == io.EOF {
							if err != io.EOF || !bytes.Equal(out, data) {
								t.Fatalf("got %d bytes, %v; want %d bytes", len(out), err, len(data))
							}
							return
						}
						if err != errBad {
							t.Fatalf("err = %v", err)
						}
						if size > 0 && !bytes.Equal(out, data[:size-1]) {
							t.Fatalf("released %d of %d bytes; want all but the last", len(out), size)
						}
						// The error is sticky and the byte stays held.
						if n, err := g.Read(buf); n != 0 || err != errBad {
							t.Fatalf("after failure: %d, %v", n, err)
						}
					})
				}
			}
		}
	}
}

func TestTailGuardIOTest(t *testing.T) {
	data := testData(10000)
	if err := iotest.TestReader(newTailGuard(bytes.NewReader(data)), data); err != nil {
		t.Fatal(err)
	}
	if err := iotest.TestReader(newTailGuard(iotest.OneByteReader(bytes.NewReader(data))), data); err != nil {
		t.Fatal(err)
	}
	if err := iotest.TestReader(newTailGuard(iotest.DataErrReader(bytes.NewReader(data))), data); err != nil {
		t.Fatal(err)
	}
}

func TestTailGuardNoProgress(t *testing.T) {
	g := newTailGuard(&scriptedReader{pieces: [][]byte{[]byte("x")}, err: io.EOF, empty: 1000})
	_, err := g.Read(make([]byte, 4))
	if err != io.ErrNoProgress {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
}
