package sigv4

import (
	"io"
	"strconv"

	"github.com/sweepgate/sweepgate/s3err"
)

// outboundChunkSize is the chunk size of the re-encoded bodies sent to the
// backend: small enough for MinIO's 16 MiB chunk limit whatever the client
// used, large enough that framing costs nothing.
const outboundChunkSize = 64 << 10

// encodedLength is the exact length of a STREAMING-UNSIGNED-PAYLOAD-TRAILER
// body of decoded bytes in chunks of chunkSize with one trailing checksum,
// as trailerEncoder writes it; -1 when decoded is unknown. The checksum's
// base64 length is fixed per algorithm, so it is known before the digest.
func encodedLength(decoded, chunkSize int64, algo checksumAlgo) int64 {
	if decoded < 0 {
		return -1
	}
	chunk := func(size int64) int64 {
		return int64(len(strconv.FormatInt(size, 16))) + 2 + size + 2
	}
	n := decoded / chunkSize * chunk(chunkSize)
	if rest := decoded % chunkSize; rest > 0 {
		n += chunk(rest)
	}
	n += int64(len("0\r\n"))
	n += int64(len(algo.header)+len(":")+algo.encodedLen()) + 2 // trailer line
	n += 2                                                      // closing empty line
	return n
}

// trailerEncoder writes verified decoded data as an unsigned aws-chunked
// body with a trailing checksum:
//
//	size-hex\r\n data \r\n ... 0\r\n name:value\r\n \r\n
//
// The trailer is written only after the source returned io.EOF, which the
// decoder does only once the inbound body has passed every check. MinIO
// (like S3) commits nothing without the declared trailer, so a body that
// fails is never committed, even though its data went ahead.
type trailerEncoder struct {
	src       io.Reader
	name      string
	value     func() (string, bool)
	remaining int64 // decoded bytes not yet framed, -1 when unknown
	left      int64 // data bytes left in the current chunk (known length)
	frame     []byte
	pending   []byte // framing (and, for unknown length, data) not yet returned
	buf       []byte // unknown length: one chunk of data
	srcEOF    bool
	finished  bool
	err       error
}

func newTrailerEncoder(src io.Reader, decoded int64, algo checksumAlgo, value func() (string, bool)) *trailerEncoder {
	return &trailerEncoder{src: src, name: algo.header, value: value, remaining: decoded}
}

// setPending queues framing bytes built by fn in the reusable frame buffer.
func (e *trailerEncoder) setPending(fn func(b []byte) []byte) {
	e.frame = fn(e.frame[:0])
	e.pending = e.frame
}

func (e *trailerEncoder) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for range maxEmptyReads {
		if len(e.pending) > 0 {
			n := copy(p, e.pending)
			e.pending = e.pending[n:]
			return n, nil
		}
		if e.err != nil {
			return 0, e.err
		}
		if e.finished {
			e.err = io.EOF
			return 0, io.EOF
		}
		switch {
		case e.left > 0:
			n, err := e.readData(p)
			if err != nil {
				e.err = err
				return n, err
			}
			if n > 0 {
				return n, nil
			}
		case e.remaining > 0:
			size := min(int64(outboundChunkSize), e.remaining)
			e.remaining -= size
			e.left = size
			e.setPending(func(b []byte) []byte {
				return append(strconv.AppendInt(b, size, 16), '\r', '\n')
			})
		case e.remaining < 0 && !e.srcEOF:
			if err := e.fillUnknown(); err != nil {
				e.err = err
				return 0, err
			}
		case !e.srcEOF:
			if err := e.awaitEOF(p); err != nil {
				e.err = err
				return 0, err
			}
		default:
			v, ok := e.value()
			if !ok {
				e.err = s3err.ErrInternal.WithMessage("the trailing checksum is not available after the body ended")
				return 0, e.err
			}
			e.setPending(func(b []byte) []byte {
				b = append(b, "0\r\n"...)
				b = append(b, e.name...)
				b = append(b, ':')
				b = append(b, v...)
				return append(b, "\r\n\r\n"...)
			})
			e.finished = true
		}
	}
	return 0, io.ErrNoProgress
}

// readData copies data of the current chunk straight from the source.
func (e *trailerEncoder) readData(p []byte) (int, error) {
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.src.Read(p)
	e.left -= int64(n)
	if e.left == 0 {
		e.setPending(func(b []byte) []byte { return append(b, '\r', '\n') })
	}
	if err == io.EOF {
		if e.left > 0 || e.remaining > 0 {
			// The decoder checks the declared length itself; this only
			// guards against a source that ends early without saying so.
			return n, s3err.ErrIncompleteBody
		}
		e.srcEOF = true
		err = nil
	}
	if err != nil {
		e.pending = nil
	}
	return n, err
}

// awaitEOF reads the source after the last declared byte: it must end now,
// and its io.EOF is the proof that the body verified.
func (e *trailerEncoder) awaitEOF(p []byte) error {
	n, err := e.src.Read(p[:1])
	switch {
	case n > 0:
		return s3err.ErrIncompleteBody.WithMessage("The body holds more than its declared length.")
	case err == io.EOF:
		e.srcEOF = true
		return nil
	}
	return err
}

// fillUnknown frames the next piece of data when the decoded length is
// unknown: each read of the source becomes one chunk.
func (e *trailerEncoder) fillUnknown() error {
	if e.buf == nil {
		e.buf = make([]byte, outboundChunkSize)
	}
	n, err := e.src.Read(e.buf)
	if n > 0 {
		e.setPending(func(b []byte) []byte {
			b = append(strconv.AppendInt(b, int64(n), 16), '\r', '\n')
			b = append(b, e.buf[:n]...)
			return append(b, '\r', '\n')
		})
	}
	switch {
	case err == io.EOF:
		e.srcEOF = true
		e.remaining = 0
		return nil
	case err != nil:
		e.pending = nil
		return err
	}
	return nil
}
