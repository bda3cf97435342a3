package sigv4

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"io"
	"strings"
	"sync"

	"github.com/sweepgate/sweepgate/s3err"
)

// Bounds on what a client can make the decoder hold or wait for.
const (
	// maxSignedChunkSize bounds one signed chunk. Chunks are streamed, not
	// buffered, so this is about sanity, not memory; it is MinIO's limit,
	// and signing clients use 64 KiB to 128 KiB.
	maxSignedChunkSize = 16 << 20
	// maxUnsignedChunkSize is S3's object size limit. aws-sdk-go-v2 sends a
	// body of known length as one unsigned chunk, so a lower cap would
	// refuse its ordinary uploads; chunks are streamed, so it costs nothing.
	maxUnsignedChunkSize = maxObjectSize
	// chunkReadBuffer is the decoder's read buffer, which also bounds the
	// length of a chunk header or trailer line.
	chunkReadBuffer = 4 << 10
	// maxTrailerBytes and maxTrailerLines bound the trailer section.
	maxTrailerBytes = 4 << 10
	maxTrailerLines = 8

	chunkSignaturePrefix   = ";chunk-signature="
	trailerSignaturePrefix = "x-amz-trailer-signature:"
)

// chainSigner holds what is needed to check the chained signatures of a
// signed aws-chunked body.
type chainSigner struct {
	key     []byte
	amzDate string
	scope   string
	prev    string // the previous signature: the seed, then each chunk's
}

func errMalformedChunk(format string, args ...any) error {
	return s3err.ErrInvalidRequest.WithMessage("Malformed aws-chunked body: "+format, args...)
}

func errMalformedTrailer(format string, args ...any) error {
	return s3err.ErrInvalidRequest.WithMessage("The request contained trailing data that was not well-formed or did not conform to our published schema: "+format, args...)
}

// chunkDecoder decodes an aws-chunked body (signed or unsigned chunks, with
// or without a trailing checksum) and yields the data. It checks each
// chunk signature as the chunk ends, the declared decoded length, the
// trailer signature and the trailing checksum, and returns io.EOF only
// after all of them passed and the inbound body has ended.
type chunkDecoder struct {
	r        *bufio.Reader
	signer   *chainSigner // nil for unsigned chunks
	checksum checksumAlgo // zero when there is no trailer
	sum      hash.Hash    // running trailing checksum over the data
	declared int64        // declared decoded length, -1 when unknown

	total     int64     // data bytes announced by chunk headers so far
	left      int64     // data bytes left in the current chunk
	chunkHash hash.Hash // SHA-256 of the current chunk, for signed chunks
	chunkSig  string    // signature claimed for the current chunk
	err       error     // sticky; io.EOF after successful verification

	mu       sync.Mutex
	verified string // base64 trailing checksum, set at verified EOF
}

func newChunkDecoder(src io.Reader, signer *chainSigner, checksum checksumAlgo, declared int64) *chunkDecoder {
	d := &chunkDecoder{
		r:        bufio.NewReaderSize(src, chunkReadBuffer),
		signer:   signer,
		checksum: checksum,
		declared: declared,
	}
	if checksum.new != nil {
		d.sum = checksum.new()
	}
	if signer != nil {
		d.chunkHash = sha256.New()
	}
	return d
}

// verifiedChecksum returns the trailing checksum once the body verified.
func (d *chunkDecoder) verifiedChecksum() (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.verified, d.verified != ""
}

func (d *chunkDecoder) Read(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for d.left == 0 {
		if err := d.nextChunk(); err != nil {
			d.err = err
			return 0, err
		}
	}
	if int64(len(p)) > d.left {
		p = p[:d.left]
	}
	n, err := d.r.Read(p)
	d.left -= int64(n)
	if d.chunkHash != nil {
		d.chunkHash.Write(p[:n])
	}
	if d.sum != nil {
		d.sum.Write(p[:n])
	}
	if err != nil {
		d.err = truncated(err)
		return n, d.err
	}
	if d.left == 0 {
		if err := d.endChunk(); err != nil {
			d.err = err
			return n, err
		}
	}
	return n, nil
}

// truncated maps the end of the inbound body in the middle of the
// aws-chunked structure to IncompleteBody; other errors are already S3
// errors from the source.
func truncated(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return s3err.ErrIncompleteBody.WithMessage("The aws-chunked body ended before it was complete.")
	}
	return err
}

// readLine reads one line, '\n' included, bounded by the read buffer.
func (d *chunkDecoder) readLine() ([]byte, error) {
	line, err := d.r.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull:
		return nil, errMalformedChunk("a line is longer than %d bytes", chunkReadBuffer)
	case err != nil:
		return nil, truncated(err)
	}
	return line, nil
}

// nextChunk reads a chunk header. At the final (zero-length) chunk it reads
// and checks everything up to the end of the body and returns io.EOF.
func (d *chunkDecoder) nextChunk() error {
	line, err := d.readLine()
	if err != nil {
		return err
	}
	body, ok := bytes.CutSuffix(line, []byte("\r\n"))
	if !ok {
		return errMalformedChunk("a chunk header does not end with CRLF")
	}
	var sizeHex []byte
	maxSize := int64(maxUnsignedChunkSize)
	if d.signer != nil {
		var sig []byte
		sizeHex, sig, ok = bytes.Cut(body, []byte(chunkSignaturePrefix))
		if !ok {
			return errMalformedChunk("a chunk header has no chunk-signature")
		}
		if len(sig) != sha256.Size*2 {
			return errMalformedChunk("a chunk signature is not 64 hex digits")
		}
		d.chunkSig = string(sig)
		maxSize = maxSignedChunkSize
	} else {
		// Chunk extensions carry nothing we need in unsigned chunks.
		sizeHex, _, _ = bytes.Cut(body, []byte(";"))
	}
	size, err := parseChunkSize(sizeHex, maxSize)
	if err != nil {
		return err
	}
	if d.declared >= 0 && size > d.declared-d.total {
		return s3err.ErrIncompleteBody.WithMessage("The aws-chunked body holds more than the %d bytes that x-amz-decoded-content-length declares.", d.declared)
	}
	d.total += size
	if d.chunkHash != nil {
		d.chunkHash.Reset()
	}
	if size > 0 {
		d.left = size
		return nil
	}
	return d.finish()
}

// parseChunkSize parses a chunk's hexadecimal size.
func parseChunkSize(b []byte, max int64) (int64, error) {
	if len(b) == 0 || len(b) > 16 {
		return 0, errMalformedChunk("invalid chunk size %q", truncate(string(b)))
	}
	var n uint64
	for _, c := range b {
		var v byte
		switch {
		case '0' <= c && c <= '9':
			v = c - '0'
		case 'a' <= c && c <= 'f':
			v = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, errMalformedChunk("invalid chunk size %q", truncate(string(b)))
		}
		n = n<<4 | uint64(v)
		if n > uint64(max) {
			return 0, errMalformedChunk("a chunk is larger than %d bytes", max)
		}
	}
	return int64(n), nil
}

// endChunk reads the CRLF after a chunk's data and checks its signature.
func (d *chunkDecoder) endChunk() error {
	if err := d.expectCRLF(); err != nil {
		return err
	}
	return d.checkChunkSignature()
}

func (d *chunkDecoder) expectCRLF() error {
	var b [2]byte
	if _, err := io.ReadFull(d.r, b[:]); err != nil {
		return truncated(err)
	}
	if b != [2]byte{'\r', '\n'} {
		return errMalformedChunk("chunk data is not followed by CRLF")
	}
	return nil
}

func (d *chunkDecoder) checkChunkSignature() error {
	if d.signer == nil {
		return nil
	}
	s := d.signer
	want := signHex(s.key, chunkStringToSign(s.amzDate, s.scope, s.prev, hex.EncodeToString(d.chunkHash.Sum(nil))))
	if !signatureEqual(want, d.chunkSig) {
		return s3err.ErrSignatureDoesNotMatch.WithMessage("The chunk signature we calculated does not match the signature you provided.")
	}
	s.prev = want
	return nil
}

// finish handles everything after the final chunk's header: its signature,
// the declared length, the trailer and the end of the body.
func (d *chunkDecoder) finish() error {
	if err := d.checkChunkSignature(); err != nil {
		return err
	}
	if d.declared >= 0 && d.total != d.declared {
		return s3err.ErrIncompleteBody.WithMessage("The aws-chunked body holds %d bytes but x-amz-decoded-content-length declares %d.", d.total, d.declared)
	}
	if d.sum == nil {
		// No trailer: a final CRLF, which some clients leave out.
		if err := d.expectEnd(true); err != nil {
			return err
		}
		return io.EOF
	}
	lines, sig, err := d.readTrailer()
	if err != nil {
		return err
	}
	if d.signer != nil {
		h := sha256.New()
		for _, l := range lines {
			h.Write([]byte(l))
			h.Write([]byte{'\n'})
		}
		s := d.signer
		want := signHex(s.key, trailerStringToSign(s.amzDate, s.scope, s.prev, hex.EncodeToString(h.Sum(nil))))
		if !signatureEqual(want, sig) {
			return s3err.ErrSignatureDoesNotMatch.WithMessage("The trailer signature we calculated does not match the signature you provided.")
		}
		s.prev = want
	}
	value, err := d.checkTrailer(lines)
	if err != nil {
		return err
	}
	// minio-go ends an unsigned trailer with one CRLF more than the others.
	if err := d.expectEnd(d.signer == nil); err != nil {
		return err
	}
	d.mu.Lock()
	d.verified = value
	d.mu.Unlock()
	return io.EOF
}

// readTrailer reads the trailer section up to its closing empty line. Two
// layouts are in use and both are accepted:
//
//	aws-sdk, .NET:  name:value\r\n [x-amz-trailer-signature:sig\r\n] \r\n
//	minio-go:       name:value\n \r\n [x-amz-trailer-signature:sig\r\n] \r\n
//
// For signed trailers the closing empty line is the one after the
// signature; an empty line between the trailers and the signature is
// tolerated once.
func (d *chunkDecoder) readTrailer() (lines []string, sig string, err error) {
	read, blank, haveSig := 0, false, false
	for range maxTrailerLines + 3 {
		raw, err := d.readLine()
		if err != nil {
			return nil, "", err
		}
		if read += len(raw); read > maxTrailerBytes {
			return nil, "", errMalformedTrailer("the trailer is longer than %d bytes", maxTrailerBytes)
		}
		line := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
		switch {
		case line == "" && (d.signer == nil || haveSig):
			return lines, sig, nil
		case line == "":
			if blank || len(lines) == 0 {
				return nil, "", errMalformedTrailer("unexpected empty line")
			}
			blank = true
		case strings.HasPrefix(line, trailerSignaturePrefix):
			if d.signer == nil || haveSig {
				return nil, "", errMalformedTrailer("unexpected x-amz-trailer-signature")
			}
			sig, haveSig = strings.TrimSpace(line[len(trailerSignaturePrefix):]), true
		case haveSig || blank:
			return nil, "", errMalformedTrailer("a trailer follows the trailer signature")
		default:
			if len(lines) == maxTrailerLines {
				return nil, "", errMalformedTrailer("more than %d trailers", maxTrailerLines)
			}
			lines = append(lines, line)
		}
	}
	return nil, "", errMalformedTrailer("the trailer section does not end")
}

// checkTrailer finds the declared checksum among the trailer lines and
// compares it with the checksum of the data.
func (d *chunkDecoder) checkTrailer(lines []string) (string, error) {
	value, found := "", false
	for _, l := range lines {
		name, v, ok := strings.Cut(l, ":")
		if !ok {
			return "", errMalformedTrailer("%q is not name:value", truncate(l))
		}
		name = strings.ToLower(strings.TrimSpace(name))
		if name != d.checksum.header {
			return "", errMalformedTrailer("unexpected trailer %q", truncate(name))
		}
		if found {
			return "", errMalformedTrailer("%s is sent twice", name)
		}
		value, found = strings.TrimSpace(v), true
	}
	if !found {
		return "", s3err.ErrIncompleteBody.WithMessage("The trailing checksum %s declared in x-amz-trailer was not sent.", d.checksum.header)
	}
	got, err := base64.StdEncoding.Strict().DecodeString(value)
	if err != nil || len(got) != d.checksum.size {
		return "", s3err.ErrInvalidDigest.WithMessage("The %s value is not a valid base64 %d-byte checksum.", d.checksum.header, d.checksum.size)
	}
	sum := d.sum.Sum(nil)
	if !bytes.Equal(got, sum) {
		return "", s3err.ErrBadDigest.WithMessage("The %s you specified did not match the calculated checksum.", d.checksum.header)
	}
	return base64.StdEncoding.EncodeToString(sum), nil
}

// expectEnd requires the inbound body to end here, after at most one
// CRLF when allowCRLF.
func (d *chunkDecoder) expectEnd(allowCRLF bool) error {
	b, err := d.r.ReadByte()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	if allowCRLF && b == '\r' {
		if b, err = d.r.ReadByte(); err != nil {
			return truncated(err)
		}
		if b == '\n' {
			return d.expectEnd(false)
		}
	}
	return errMalformedChunk("data follows the end of the aws-chunked body")
}
