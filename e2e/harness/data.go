package harness

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
)

// dataBlock is the unit in which Data generates bytes; each block has its
// own generator, so any offset can be read without generating what comes
// before it.
const dataBlock = 64 << 10

// Data is a deterministic pseudo-random byte sequence: the same seed and size
// always give the same bytes. It lets a test upload and check large objects
// without holding them in memory.
type Data struct {
	Seed uint64
	Size int64
}

// NewData returns the sequence of size bytes for seed.
func NewData(seed uint64, size int64) Data { return Data{Seed: seed, Size: size} }

// Reader returns a reader over the bytes that also seeks and reads at
// offsets, as aws-sdk-go-v2 needs to hash a body before sending it over
// plain HTTP.
func (d Data) Reader() *DataReader { return &DataReader{d: d, block: -1} }

// Section returns a reader over the bytes [off, off+n), for example one part
// of a multipart upload of the whole.
func (d Data) Section(off, n int64) *io.SectionReader {
	return io.NewSectionReader(d.Reader(), off, n)
}

// Bytes returns all the bytes; for small sizes only.
func (d Data) Bytes() []byte {
	b := make([]byte, d.Size)
	if _, err := d.Reader().ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		panic(err)
	}
	return b
}

// Range returns the bytes [off, off+n), clipped to the size.
func (d Data) Range(off, n int64) []byte {
	if off >= d.Size {
		return nil
	}
	n = min(n, d.Size-off)
	b := make([]byte, n)
	if _, err := d.Reader().ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		panic(err)
	}
	return b
}

// SHA256 returns the hex SHA-256 of the bytes.
func (d Data) SHA256() string {
	h := sha256.New()
	if _, err := io.Copy(h, d.Reader()); err != nil {
		panic(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// WriteFile writes the bytes to path.
func (d Data) WriteFile(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	if _, err := io.Copy(f, d.Reader()); err != nil {
		f.Close()
		t.Fatalf("harness: write %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("harness: write %s: %v", path, err)
	}
}

// DataReader reads a Data. It implements io.ReadSeeker and io.ReaderAt;
// ReadAt may be called concurrently, as io.ReaderAt allows (minio-go reads
// parts in parallel).
type DataReader struct {
	d   Data
	off int64

	mu    sync.Mutex // guards the generated block
	block int64
	buf   [dataBlock]byte
}

func (r *DataReader) fill(block int64) {
	if r.block == block {
		return
	}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[0:], r.d.Seed)
	binary.LittleEndian.PutUint64(seed[8:], uint64(block))
	copy(seed[16:], "sweepgate-e2e-da")
	_, _ = rand.NewChaCha8(seed).Read(r.buf[:])
	r.block = block
}

// ReadAt implements io.ReaderAt.
func (r *DataReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("harness: negative offset")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for n < len(p) {
		if off >= r.d.Size {
			return n, io.EOF
		}
		r.fill(off / dataBlock)
		in := off % dataBlock
		c := copy(p[n:], r.buf[in:min(int64(dataBlock), in+r.d.Size-off)])
		n += c
		off += int64(c)
	}
	return n, nil
}

// Read implements io.Reader.
func (r *DataReader) Read(p []byte) (int, error) {
	if r.off >= r.d.Size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.d.Size-r.off)]
	n, err := r.ReadAt(p, r.off)
	r.off += int64(n)
	if errors.Is(err, io.EOF) && n > 0 {
		err = nil
	}
	return n, err
}

// Seek implements io.Seeker.
func (r *DataReader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = r.off + offset
	case io.SeekEnd:
		abs = r.d.Size + offset
	default:
		return 0, fmt.Errorf("harness: bad whence %d", whence)
	}
	if abs < 0 {
		return 0, errors.New("harness: negative position")
	}
	r.off = abs
	return abs, nil
}

// Len returns the number of unread bytes.
func (r *DataReader) Len() int { return int(max(0, r.d.Size-r.off)) }

// HashReader reads r to its end and returns the hex SHA-256 and the number
// of bytes.
func HashReader(r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// SHA256Hex returns the hex SHA-256 of b.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
