package sigv4

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sweepgate/sweepgate/s3err"
)

// The x-amz-content-sha256 values that name a payload mode instead of a hash.
const (
	unsignedPayload                 = "UNSIGNED-PAYLOAD"
	streamingSignedPayload          = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	streamingSignedPayloadTrailer   = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	streamingUnsignedPayloadTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	// maxObjectSize is S3's largest object; a declared decoded length above
	// it cannot be honest.
	maxObjectSize = 5 << 40
)

// PayloadMode is how the body of a request is protected, as declared by its
// x-amz-content-sha256 header (never by Content-Encoding, which clients set
// inconsistently).
type PayloadMode int

// The payload modes S3 clients use.
const (
	// ModeUnsigned is UNSIGNED-PAYLOAD (and every presigned request): the
	// body is not covered by the signature and passes unchanged.
	ModeUnsigned PayloadMode = iota
	// ModeSHA256 is a hex SHA-256 of the whole body, checked at its end.
	ModeSHA256
	// ModeStreamingSigned is STREAMING-AWS4-HMAC-SHA256-PAYLOAD: an
	// aws-chunked body in which every chunk carries a chained signature.
	ModeStreamingSigned
	// ModeStreamingSignedTrailer is STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER:
	// signed chunks followed by a signed trailing checksum.
	ModeStreamingSignedTrailer
	// ModeStreamingUnsignedTrailer is STREAMING-UNSIGNED-PAYLOAD-TRAILER:
	// unsigned aws-chunked data followed by a trailing checksum.
	ModeStreamingUnsignedTrailer
)

// String returns the x-amz-content-sha256 spelling of the mode.
func (m PayloadMode) String() string {
	switch m {
	case ModeUnsigned:
		return unsignedPayload
	case ModeSHA256:
		return "SHA-256"
	case ModeStreamingSigned:
		return streamingSignedPayload
	case ModeStreamingSignedTrailer:
		return streamingSignedPayloadTrailer
	case ModeStreamingUnsignedTrailer:
		return streamingUnsignedPayloadTrailer
	}
	return "PayloadMode(" + strconv.Itoa(int(m)) + ")"
}

func (m PayloadMode) trailer() bool {
	return m == ModeStreamingSignedTrailer || m == ModeStreamingUnsignedTrailer
}

// parseMode classifies an x-amz-content-sha256 value.
func parseMode(v string) (PayloadMode, error) {
	switch v {
	case unsignedPayload:
		return ModeUnsigned, nil
	case streamingSignedPayload:
		return ModeStreamingSigned, nil
	case streamingSignedPayloadTrailer:
		return ModeStreamingSignedTrailer, nil
	case streamingUnsignedPayloadTrailer:
		return ModeStreamingUnsignedTrailer, nil
	}
	if strings.HasPrefix(v, "STREAMING-AWS4-ECDSA-P256-SHA256") {
		return 0, s3err.ErrSignatureVersionNotSupported.WithMessage("Signature Version 4A streaming payloads (%s) are not supported.", truncate(v))
	}
	if len(v) == sha256.Size*2 {
		if _, err := hex.DecodeString(v); err == nil {
			return ModeSHA256, nil
		}
	}
	return 0, s3err.ErrInvalidArgument.WithMessage("x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value.")
}

// Payload is the body of a verified request. Read it through exactly one
// of Body or Outbound: both draw from the same inbound stream.
//
// Bytes come out as they arrive, so bytes read before the end are not yet
// verified; only io.EOF says the whole body passed every check. Any other
// error is an *s3err.Error (possibly wrapping an I/O error) saying why not.
type Payload struct {
	mode          PayloadMode
	contentSHA256 string // the declared hex hash, for ModeSHA256
	length        int64  // inbound Content-Length, -1 when unknown
	decodedLength int64  // decoded content length, -1 when unknown
	checksum      checksumAlgo
	encodings     []string // inbound Content-Encoding minus aws-chunked

	st      *payloadState
	decoded io.Reader     // decoded content; io.EOF only after verification
	chunks  *chunkDecoder // the aws-chunked decoder, for streaming modes

	outOnce  sync.Once
	outbound Outbound
}

// payloadState is what the caller may ask about a payload after the
// backend request, possibly while the transport's goroutine still reads.
type payloadState struct {
	mu       sync.Mutex
	err      error
	consumed atomic.Bool
}

func (s *payloadState) fail(err error) {
	if err == nil || err == io.EOF {
		return
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

// Mode returns the payload mode the client declared.
func (p *Payload) Mode() PayloadMode { return p.mode }

// DecodedLength returns the length of the content (after aws-chunked
// decoding), or -1 when the client did not declare it.
func (p *Payload) DecodedLength() int64 { return p.decodedLength }

// TrailerName returns the lower-case name of the trailing checksum the
// client declared in x-amz-trailer, or "" when there is none.
func (p *Payload) TrailerName() string { return p.checksum.header }

// Body returns the decoded content: the body itself, or the data of an
// aws-chunked body. It returns io.EOF only once the body has passed every
// check (hash, each chunk signature, the final chunk, the trailing checksum
// and its signature).
func (p *Payload) Body() io.Reader { return &recorder{r: p.decoded, st: p.st} }

// Observe makes w receive a copy of the decoded content as Body or Outbound
// reads it, for a caller that hashes or counts what it forwards (the
// multipart service records each part's size and SHA-256). It must be called
// before Body or Outbound. What w saw is verified only once the read reached
// io.EOF.
func (p *Payload) Observe(w io.Writer) {
	p.decoded = io.TeeReader(p.decoded, w)
}

// Checksum returns the trailing checksum (name and base64 value) once the
// body has been read to a verified io.EOF, and ok false before that or when
// the payload has no trailer.
func (p *Payload) Checksum() (name, value string, ok bool) {
	if p.chunks == nil || p.checksum.header == "" {
		return "", "", false
	}
	v, ok := p.chunks.verifiedChecksum()
	if !ok {
		return "", "", false
	}
	return p.checksum.header, v, true
}

// Err returns the first verification or read error the body met, or nil.
// After a failed backend request the gateway asks it whether the body was
// at fault, so it can answer with that S3 error (BadDigest,
// SignatureDoesNotMatch, IncompleteBody, ...) instead of a backend error.
func (p *Payload) Err() error {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	return p.st.err
}

// Consumed reports whether the inbound body was read to its end. When it
// was not, the connection holds unread bytes and the gateway should answer
// with Connection: close.
func (p *Payload) Consumed() bool { return p.st.consumed.Load() }

// Outbound is the body and headers to send to the backend for a payload.
type Outbound struct {
	// Body yields what the backend must receive. Its final bytes are
	// withheld until the inbound body has verified, so a body that fails
	// never reaches the backend complete.
	Body io.Reader
	// ContentLength is the exact length of Body, or -1 when it cannot be
	// known in advance (the client sent neither length).
	ContentLength int64
	// ContentSHA256 is the backend request's x-amz-content-sha256, and the
	// payload hash to re-sign it with.
	ContentSHA256 string
	// Remove lists inbound headers that describe the client's framing and
	// must not reach the backend.
	Remove []string
	// Header holds headers to set on the backend request, after Remove.
	Header http.Header
}

// Outbound returns the form of the payload to forward to the backend:
//
//   - UNSIGNED-PAYLOAD: the raw body, as received.
//   - hex SHA-256: the raw body as UNSIGNED-PAYLOAD, its last byte withheld
//     until the hash has matched (so the backend need not hash it again).
//   - signed chunks without trailer: the decoded data as UNSIGNED-PAYLOAD,
//     its last byte withheld until every chunk signature has matched.
//   - any trailer mode: the decoded data re-encoded as
//     STREAMING-UNSIGNED-PAYLOAD-TRAILER in fixed-size chunks; the trailing
//     checksum, without which the backend commits nothing, is written only
//     after the inbound body has verified.
//
// Calling it again returns the same Outbound.
func (p *Payload) Outbound() Outbound {
	p.outOnce.Do(func() { p.outbound = p.buildOutbound() })
	return p.outbound
}

func (p *Payload) buildOutbound() Outbound {
	o := Outbound{Header: make(http.Header)}
	switch p.mode {
	case ModeUnsigned:
		o.Body = p.Body()
		o.ContentLength = p.length
		o.ContentSHA256 = unsignedPayload
	case ModeSHA256:
		o.Body = &recorder{r: newTailGuard(p.decoded), st: p.st}
		o.ContentLength = p.length
		// The gateway has checked the hash itself; asking the backend to
		// hash every byte again would cost a third SHA-256 pass per upload.
		o.ContentSHA256 = unsignedPayload
	case ModeStreamingSigned:
		o.Body = &recorder{r: newTailGuard(p.decoded), st: p.st}
		o.ContentLength = p.decodedLength
		o.ContentSHA256 = unsignedPayload
		o.Remove = []string{"Content-Encoding", "X-Amz-Decoded-Content-Length", "X-Amz-Trailer"}
		if len(p.encodings) > 0 {
			o.Header.Set("Content-Encoding", strings.Join(p.encodings, ","))
		}
	default: // trailer modes
		o.Body = &recorder{r: newTrailerEncoder(p.decoded, p.decodedLength, p.checksum, p.chunks.verifiedChecksum), st: p.st}
		o.ContentLength = encodedLength(p.decodedLength, outboundChunkSize, p.checksum)
		o.ContentSHA256 = streamingUnsignedPayloadTrailer
		o.Remove = []string{"Content-Encoding", "X-Amz-Decoded-Content-Length", "X-Amz-Trailer"}
		o.Header.Set("Content-Encoding", strings.Join(append([]string{"aws-chunked"}, p.encodings...), ","))
		o.Header.Set("X-Amz-Trailer", p.checksum.header)
		if p.decodedLength >= 0 {
			o.Header.Set("X-Amz-Decoded-Content-Length", strconv.FormatInt(p.decodedLength, 10))
		}
	}
	o.Header.Set("X-Amz-Content-Sha256", o.ContentSHA256)
	return o
}

// Apply puts the outbound payload on a backend request: it removes the
// client's framing headers, sets the outbound ones, and sets Body and
// ContentLength. GetBody is cleared so the transport never replays a body
// it cannot rewind.
//
// An empty body is sent as http.NoBody, so Apply reads the (empty) payload
// to its end first: the inbound stream must still verify, and Apply returns
// its error if it does not. That read is short: the payload holds no data.
func (o Outbound) Apply(req *http.Request) error {
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	for _, h := range o.Remove {
		req.Header.Del(h)
	}
	for k, vs := range o.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Del("Content-Length")
	req.GetBody = nil
	req.ContentLength = o.ContentLength
	if o.ContentLength >= 0 {
		// The client may have framed its body with HTTP chunking; the
		// backend gets the exact length instead.
		req.TransferEncoding = nil
	}
	if o.ContentLength == 0 {
		if err := drainEmpty(o.Body); err != nil {
			return err
		}
		req.Body = http.NoBody
		return nil
	}
	req.Body = io.NopCloser(o.Body)
	return nil
}

// drainEmpty reads r, which should hold no data, to its end.
func drainEmpty(r io.Reader) error {
	var b [1]byte
	for range 100 {
		n, err := r.Read(b[:])
		if n > 0 {
			return s3err.ErrInternal.WithMessage("a payload declared empty holds data")
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// newPayload checks the payload headers of a verified request and sets up
// the readers for its mode. It reads nothing.
func newPayload(r *http.Request, mode PayloadMode, contentSHA256 string, signer *chainSigner) (*Payload, error) {
	p := &Payload{
		mode:          mode,
		contentSHA256: contentSHA256,
		length:        r.ContentLength,
		decodedLength: r.ContentLength,
		st:            &payloadState{},
	}
	body := r.Body
	if body == nil {
		body = http.NoBody
	}
	src := &source{r: body, remaining: r.ContentLength, st: p.st}
	trailerNames := r.Header.Values("X-Amz-Trailer")
	if !mode.trailer() && len(trailerNames) > 0 {
		return nil, s3err.ErrInvalidRequest.WithMessage("x-amz-trailer requires x-amz-content-sha256 to be %s or %s.", streamingUnsignedPayloadTrailer, streamingSignedPayloadTrailer)
	}
	switch mode {
	case ModeUnsigned:
		p.decoded = src
		return p, nil
	case ModeSHA256:
		want, _ := hex.DecodeString(contentSHA256) // parseMode checked it
		p.decoded = &hashReader{r: src, h: sha256.New(), want: want}
		return p, nil
	}

	decoded, err := decodedLength(r, mode)
	if err != nil {
		return nil, err
	}
	p.decodedLength = decoded
	if mode.trailer() {
		var names []string
		for _, v := range trailerNames {
			for n := range strings.SplitSeq(v, ",") {
				if n = strings.TrimSpace(n); n != "" {
					names = append(names, n)
				}
			}
		}
		if len(names) != 1 {
			return nil, s3err.ErrInvalidRequest.WithMessage("x-amz-trailer must name exactly one checksum for %s.", mode)
		}
		algo, ok := lookupChecksum(names[0])
		if !ok {
			return nil, s3err.ErrInvalidRequest.WithMessage("The value specified in the x-amz-trailer header is not supported: %q.", truncate(names[0]))
		}
		p.checksum = algo
	}
	for _, v := range r.Header.Values("Content-Encoding") {
		for e := range strings.SplitSeq(v, ",") {
			if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "aws-chunked") {
				p.encodings = append(p.encodings, e)
			}
		}
	}
	if mode == ModeStreamingUnsignedTrailer {
		signer = nil
	}
	p.chunks = newChunkDecoder(src, signer, p.checksum, decoded)
	p.decoded = p.chunks
	return p, nil
}

// decodedLength reads x-amz-decoded-content-length. Signed streaming needs
// it (S3 requires it, and the decoded body is forwarded with it as its
// Content-Length); unsigned trailer uploads of unknown length may omit it.
func decodedLength(r *http.Request, mode PayloadMode) (int64, error) {
	vs := r.Header.Values("X-Amz-Decoded-Content-Length")
	switch {
	case len(vs) == 0 && mode == ModeStreamingUnsignedTrailer:
		return -1, nil
	case len(vs) == 0:
		return 0, s3err.ErrMissingContentLength.WithMessage("x-amz-decoded-content-length is required with x-amz-content-sha256 %s.", mode)
	case len(vs) > 1:
		return 0, s3err.ErrInvalidArgument.WithMessage("x-amz-decoded-content-length is given more than once.")
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil || n < 0 || n > maxObjectSize {
		return 0, s3err.ErrInvalidArgument.WithMessage("x-amz-decoded-content-length %q is not a valid length.", truncate(vs[0]))
	}
	return n, nil
}

// source reads the inbound body: it stops at Content-Length, records
// whether the body was read to its end, and turns read failures into S3
// errors (a body cut short is IncompleteBody).
type source struct {
	r         io.Reader
	remaining int64 // bytes still expected, -1 when the length is unknown
	st        *payloadState
	err       error
}

func (s *source) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.remaining == 0 {
		s.st.consumed.Store(true)
		s.err = io.EOF
		return 0, io.EOF
	}
	if s.remaining > 0 && int64(len(p)) > s.remaining {
		p = p[:s.remaining]
	}
	n, err := s.r.Read(p)
	if s.remaining > 0 {
		s.remaining -= int64(n)
		if s.remaining == 0 {
			s.st.consumed.Store(true)
		}
	}
	switch {
	case err == nil:
	case err == io.EOF && s.remaining > 0:
		s.err = s3err.ErrIncompleteBody
	case err == io.EOF:
		s.st.consumed.Store(true)
		s.err = io.EOF
	default:
		s.err = bodyReadError(err)
	}
	if s.err != nil && s.err != io.EOF {
		return n, s.err
	}
	if n > 0 {
		return n, nil
	}
	return 0, s.err
}

// bodyReadError turns a failure to read the client's body into an S3 error
// that still wraps the cause.
func bodyReadError(err error) error {
	var se *s3err.Error
	if errors.As(err, &se) {
		return err
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return fmt.Errorf("%w: %w", s3err.ErrEntityTooLarge, err)
	}
	return fmt.Errorf("%w: %w", s3err.ErrIncompleteBody, err)
}

// hashReader passes the body through while hashing it, and ends with io.EOF
// only when the hash equals the declared one.
type hashReader struct {
	r    io.Reader
	h    hash.Hash
	want []byte
	err  error
}

func (h *hashReader) Read(p []byte) (int, error) {
	if h.err != nil {
		return 0, h.err
	}
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	if err == io.EOF && !bytes.Equal(h.h.Sum(nil), h.want) {
		err = s3err.ErrXAmzContentSHA256Mismatch
	}
	if err != nil {
		h.err = err
	}
	return n, err
}

// recorder notes the first error a payload reader returns, for Err.
type recorder struct {
	r  io.Reader
	st *payloadState
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.st.fail(err)
	return n, err
}
