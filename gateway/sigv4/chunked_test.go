package sigv4

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"
)

func testData(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// readWith reads r to its end through reads of at most step bytes, the way
// a slow consumer would, and returns what it got and the final error
// (nil for io.EOF).
func readWith(r io.Reader, step int) ([]byte, error) {
	var out []byte
	buf := make([]byte, step)
	for range 1 << 24 {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
	return out, io.ErrNoProgress
}

// checkGoodStream verifies a stream, reads it through Body, and again
// through Outbound, and checks what comes out.
func checkGoodStream(t *testing.T, v *Verifier, hdr http.Header, wire, data []byte) {
	t.Helper()
	for _, step := range []int{1, 7, 4096, 1 << 20} {
		res, err := v.Verify(serverRequest(t, hdr, wire))
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		p := res.Payload
		got, err := readWith(p.Body(), step)
		if err != nil {
			t.Fatalf("step %d: Body: %v", step, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("step %d: decoded %d bytes, want %d (equal prefix %v)", step, len(got), len(data), bytes.HasPrefix(data, got))
		}
		if !p.Consumed() || p.Err() != nil {
			t.Fatalf("Consumed %v, Err %v", p.Consumed(), p.Err())
		}
		if name := p.TrailerName(); name != "" {
			n, val, ok := p.Checksum()
			if !ok || n != name || val != testChecksum(t, name, data) {
				t.Fatalf("Checksum() = %q %q %v", n, val, ok)
			}
		}
	}

	for _, step := range []int{1, 100, 1 << 20} {
		res, err := v.Verify(serverRequest(t, hdr, wire))
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		o := res.Payload.Outbound()
		out, err := readWith(o.Body, step)
		if err != nil {
			t.Fatalf("step %d: Outbound: %v", step, err)
		}
		if o.ContentLength != int64(len(out)) {
			t.Fatalf("step %d: ContentLength %d, produced %d", step, o.ContentLength, len(out))
		}
		if o.Header.Get("X-Amz-Content-Sha256") != o.ContentSHA256 {
			t.Fatalf("outbound header hash %q != %q", o.Header.Get("X-Amz-Content-Sha256"), o.ContentSHA256)
		}
		switch res.Payload.Mode() {
		case ModeStreamingSigned:
			if !bytes.Equal(out, data) || o.ContentSHA256 != unsignedPayload {
				t.Fatalf("outbound %d bytes, hash %q", len(out), o.ContentSHA256)
			}
			if o.Header.Get("Content-Encoding") != "" {
				t.Fatalf("outbound Content-Encoding %q", o.Header.Get("Content-Encoding"))
			}
		default:
			if o.ContentSHA256 != streamingUnsignedPayloadTrailer || o.Header.Get("X-Amz-Trailer") != res.Payload.TrailerName() ||
				o.Header.Get("Content-Encoding") != "aws-chunked" || o.Header.Get("X-Amz-Decoded-Content-Length") != strconv.Itoa(len(data)) {
				t.Fatalf("outbound headers %v", o.Header)
			}
			decoded := decodeOutbound(t, out, res.Payload.TrailerName(), int64(len(data)))
			if !bytes.Equal(decoded, data) {
				t.Fatalf("re-encoded stream decodes to %d bytes, want %d", len(decoded), len(data))
			}
		}
	}
}

// decodeOutbound decodes a re-encoded outbound body with the unsigned
// trailer decoder, as the backend would.
func decodeOutbound(t *testing.T, out []byte, trailer string, declared int64) []byte {
	t.Helper()
	algo, ok := lookupChecksum(trailer)
	if !ok {
		t.Fatalf("trailer %q", trailer)
	}
	st := &payloadState{}
	d := newChunkDecoder(&source{r: bytes.NewReader(out), remaining: int64(len(out)), st: st}, nil, algo, declared)
	got, err := io.ReadAll(d)
	if err != nil {
		t.Fatalf("decoding outbound: %v\n%q", err, truncate(string(out)))
	}
	return got
}

// checkBadStream verifies a stream whose signature checks out but whose
// body does not, and checks that the right error comes out of Body, of
// Outbound and of Err, and that Outbound never released its final byte
// or the trailer.
func checkBadStream(t *testing.T, v *Verifier, hdr http.Header, wire []byte, code, msg string) {
	t.Helper()
	res, err := v.Verify(serverRequest(t, hdr, wire))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	_, err = io.ReadAll(res.Payload.Body())
	wantErr(t, err, code, msg)
	wantErr(t, res.Payload.Err(), code, msg)

	for _, step := range []int{1, 3, 64 << 10} {
		res, err := v.Verify(serverRequest(t, hdr, wire))
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		o := res.Payload.Outbound()
		out, err := readWith(o.Body, step)
		wantErr(t, err, code, msg)
		wantErr(t, res.Payload.Err(), code, msg)
		if o.ContentLength >= 0 && int64(len(out)) >= o.ContentLength {
			t.Fatalf("step %d: outbound released %d of %d bytes", step, len(out), o.ContentLength)
		}
		if res.Payload.TrailerName() != "" && bytes.Contains(out, []byte("x-amz-checksum")) {
			t.Fatalf("step %d: outbound released the trailer", step)
		}
	}
}

var streamModes = []struct {
	name    string
	mode    PayloadMode
	trailer string
}{
	{"signed", ModeStreamingSigned, ""},
	{"signed-trailer-crc32", ModeStreamingSignedTrailer, "x-amz-checksum-crc32"},
	{"signed-trailer-sha256", ModeStreamingSignedTrailer, "x-amz-checksum-sha256"},
	{"unsigned-trailer-crc32c", ModeStreamingUnsignedTrailer, "x-amz-checksum-crc32c"},
	{"unsigned-trailer-crc64nvme", ModeStreamingUnsignedTrailer, "x-amz-checksum-crc64nvme"},
	{"unsigned-trailer-sha1", ModeStreamingUnsignedTrailer, "x-amz-checksum-sha1"},
}

func TestStreamsGood(t *testing.T) {
	for _, m := range streamModes {
		for _, size := range []int{0, 1, 8191, 64 << 10, 64<<10 + 1, 200 << 10} {
			for _, chunk := range []int{8 << 10, 64 << 10, 1 << 20} {
				for _, minio := range []bool{false, true} {
					name := m.name + "/" + strconv.Itoa(size) + "/chunk" + strconv.Itoa(chunk)
					if minio {
						if m.trailer == "" {
							continue
						}
						name += "/minio-layout"
					}
					t.Run(name, func(t *testing.T) {
						data := testData(size)
						hdr, wire := testStream{mode: m.mode, data: data, chunkSize: chunk, trailer: m.trailer, minioLayout: minio}.build(t)
						checkGoodStream(t, testVerifier(testTime), hdr, wire, data)
					})
				}
			}
		}
	}
}

func TestStreamsVariants(t *testing.T) {
	data := testData(100 << 10)
	t.Run("signed without final CRLF", func(t *testing.T) {
		hdr, wire := testStream{mode: ModeStreamingSigned, data: data, omitFinalCRLF: true}.build(t)
		checkGoodStream(t, testVerifier(testTime), hdr, wire, data)
	})
	t.Run("unsigned trailer without decoded length", func(t *testing.T) {
		hdr, wire := testStream{mode: ModeStreamingUnsignedTrailer, data: data, trailer: "x-amz-checksum-crc32", noDeclared: true}.build(t)
		res, err := testVerifier(testTime).Verify(serverRequest(t, hdr, wire))
		if err != nil {
			t.Fatal(err)
		}
		o := res.Payload.Outbound()
		if o.ContentLength != -1 || o.Header.Get("X-Amz-Decoded-Content-Length") != "" {
			t.Fatalf("ContentLength %d, headers %v", o.ContentLength, o.Header)
		}
		out, err := readWith(o.Body, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeOutbound(t, out, "x-amz-checksum-crc32", -1); !bytes.Equal(got, data) {
			t.Fatal("round trip differs")
		}
	})
	t.Run("one chunk larger than 16 MiB, unsigned", func(t *testing.T) {
		// aws-sdk-go-v2 sends a body of known length as a single chunk.
		big := testData(17 << 20)
		hdr, wire := testStream{mode: ModeStreamingUnsignedTrailer, data: big, chunkSize: len(big), trailer: "x-amz-checksum-crc32"}.build(t)
		res, err := testVerifier(testTime).Verify(serverRequest(t, hdr, wire))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Payload.Body())
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
	})
	t.Run("content-encoding kept", func(t *testing.T) {
		for _, c := range []struct {
			mode    PayloadMode
			trailer string
			want    string
		}{
			{ModeStreamingSigned, "", "gzip"},
			{ModeStreamingSignedTrailer, "x-amz-checksum-crc32", "aws-chunked,gzip"},
			{ModeStreamingUnsignedTrailer, "x-amz-checksum-crc32", "aws-chunked,gzip"},
		} {
			hdr, wire := testStream{mode: c.mode, data: data, trailer: c.trailer, encoding: "aws-chunked, gzip"}.build(t)
			res, err := testVerifier(testTime).Verify(serverRequest(t, hdr, wire))
			if err != nil {
				t.Fatal(err)
			}
			o := res.Payload.Outbound()
			if got := o.Header.Get("Content-Encoding"); got != c.want {
				t.Fatalf("%s: Content-Encoding %q, want %q", c.mode, got, c.want)
			}
		}
	})
}

func TestStreamsBad(t *testing.T) {
	data := testData(150 << 10) // three chunks of 64 KiB, the last one short
	flip := func(wire []byte, i int) []byte {
		w := append([]byte(nil), wire...)
		w[i] ^= 0x01
		return w
	}
	// firstData is the offset of the first data byte; lastData of the last.
	firstData := func(wire []byte) int { return bytes.Index(wire, []byte("\r\n")) + 2 }
	lastData := func(wire []byte) int {
		i := bytes.LastIndex(wire, []byte("\r\n0"))
		if i < 0 {
			i = bytes.LastIndex(wire, []byte("0;chunk-signature")) - 2
		}
		return i - 1
	}
	type tc struct {
		name      string
		stream    testStream
		mutate    func(wire []byte) []byte
		code, msg string
	}
	var cases []tc
	for _, m := range streamModes {
		base := testStream{mode: m.mode, data: data, trailer: m.trailer}
		signed := m.mode != ModeStreamingUnsignedTrailer
		dataCode := "BadDigest"
		if signed {
			dataCode = "SignatureDoesNotMatch"
		}
		cases = append(cases,
			tc{m.name + "/first data byte", base, func(w []byte) []byte { return flip(w, firstData(w)) }, dataCode, ""},
			tc{m.name + "/last data byte", base, func(w []byte) []byte { return flip(w, lastData(w)) }, dataCode, ""},
			tc{m.name + "/truncated in data", base, func(w []byte) []byte { return w[:len(w)/2] }, "IncompleteBody", ""},
			tc{m.name + "/truncated before final chunk", base, func(w []byte) []byte { return w[:lastData(w)+3] }, "IncompleteBody", ""},
			tc{m.name + "/truncated by one byte", base, func(w []byte) []byte {
				if m.trailer == "" {
					return w[:len(w)-3] // the final CRLF is optional
				}
				return w[:len(w)-1]
			}, "IncompleteBody", ""},
			tc{m.name + "/data after the end", base, func(w []byte) []byte { return append(append([]byte(nil), w...), "junk"...) }, "InvalidRequest", "follows the end"},
			tc{m.name + "/declared length too small", testStream{mode: m.mode, data: data, trailer: m.trailer, declared: int64(len(data) - 1)}, nil, "IncompleteBody", "more than"},
			tc{m.name + "/declared length too large", testStream{mode: m.mode, data: data, trailer: m.trailer, declared: int64(len(data) + 1)}, nil, "IncompleteBody", "declares"},
			tc{m.name + "/chunk header without CRLF", base, func(w []byte) []byte {
				i := bytes.Index(w, []byte("\r\n"))
				return append(append(append([]byte(nil), w[:i]...), '\n'), w[i+2:]...)
			}, "InvalidRequest", "CRLF"},
			tc{m.name + "/data not followed by CRLF", base, func(w []byte) []byte {
				i := firstData(w) + 64<<10
				return flip(w, i)
			}, "InvalidRequest", "CRLF"},
			tc{m.name + "/non-hex size", base, func(w []byte) []byte {
				w = append([]byte(nil), w...)
				w[0] = 'g'
				return w
			}, "InvalidRequest", "chunk size"},
			tc{m.name + "/endless header line", base, func(w []byte) []byte {
				return append(bytes.Repeat([]byte("1"), 10000), w...)
			}, "InvalidRequest", ""},
		)
		if signed {
			cases = append(cases,
				tc{m.name + "/first chunk signature", base, func(w []byte) []byte {
					return flip(w, bytes.Index(w, []byte("chunk-signature="))+20)
				}, "SignatureDoesNotMatch", ""},
				tc{m.name + "/final chunk signature", base, func(w []byte) []byte {
					return flip(w, bytes.LastIndex(w, []byte("chunk-signature="))+20)
				}, "SignatureDoesNotMatch", ""},
				tc{m.name + "/chunks swapped", base, func(w []byte) []byte {
					// Move the second chunk's signature onto the first.
					i := bytes.Index(w, []byte("chunk-signature=")) + 16
					j := bytes.Index(w[i:], []byte("chunk-signature=")) + i + 16
					w = append([]byte(nil), w...)
					copy(w[i:i+64], w[j:j+64])
					return w
				}, "SignatureDoesNotMatch", ""},
				tc{m.name + "/missing chunk signature", base, func(w []byte) []byte {
					i := bytes.Index(w, []byte(";chunk-signature="))
					j := bytes.Index(w, []byte("\r\n"))
					return append(append([]byte(nil), w[:i]...), w[j:]...)
				}, "InvalidRequest", "chunk-signature"},
				tc{m.name + "/oversized signed chunk", base, func(w []byte) []byte {
					i := bytes.Index(w, []byte(";"))
					return append([]byte("1000001"), w[i:]...)
				}, "InvalidRequest", "larger than"},
			)
		}
		if m.trailer != "" {
			wrong := base64.StdEncoding.EncodeToString(make([]byte, checksumSize(t, m.trailer)))
			cases = append(cases,
				tc{m.name + "/wrong checksum", testStream{mode: m.mode, data: data, trailer: m.trailer, trailerValue: wrong}, nil, "BadDigest", m.trailer},
				tc{m.name + "/checksum not base64", testStream{mode: m.mode, data: data, trailer: m.trailer, trailerValue: "!!!!"}, nil, "InvalidDigest", ""},
				tc{m.name + "/checksum too short", testStream{mode: m.mode, data: data, trailer: m.trailer, trailerValue: "AAA="}, nil, "InvalidDigest", ""},
				tc{m.name + "/trailer missing", testStream{mode: m.mode, data: data, trailer: m.trailer, omitTrailer: true}, nil, "IncompleteBody", "not sent"},
				tc{m.name + "/other trailer name", base, func(w []byte) []byte {
					return bytes.Replace(w, []byte(m.trailer+":"), []byte("x-amz-checksum-zzz:"), 1)
				}, map[bool]string{true: "SignatureDoesNotMatch", false: "InvalidRequest"}[signed], ""},
				tc{m.name + "/endless trailer", base, func(w []byte) []byte {
					i := bytes.Index(w, []byte(m.trailer))
					junk := bytes.Repeat([]byte("x-amz-meta-a:b\r\n"), 1000)
					return append(append(append([]byte(nil), w[:i]...), junk...), w[i:]...)
				}, "InvalidRequest", ""},
			)
		}
		if m.mode == ModeStreamingSignedTrailer {
			cases = append(cases, tc{m.name + "/trailer signature", base, func(w []byte) []byte {
				return flip(w, bytes.Index(w, []byte("x-amz-trailer-signature:"))+30)
			}, "SignatureDoesNotMatch", "trailer"})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr, wire := c.stream.build(t)
			if c.mutate != nil {
				wire = c.mutate(wire)
			}
			checkBadStream(t, testVerifier(testTime), hdr, wire, c.code, c.msg)
		})
	}
}

func checksumSize(t *testing.T, name string) int {
	a, ok := lookupChecksum(name)
	if !ok {
		t.Fatal(name)
	}
	return a.size
}

// TestStreamsBodyShorterThanContentLength: the connection ends before the
// Content-Length the client announced.
func TestStreamsBodyShorterThanContentLength(t *testing.T) {
	data := testData(100 << 10)
	for _, m := range streamModes {
		t.Run(m.name, func(t *testing.T) {
			hdr, wire := testStream{mode: m.mode, data: data, trailer: m.trailer}.build(t)
			r := serverRequest(t, hdr, wire[:len(wire)-10])
			r.ContentLength = int64(len(wire))
			res, err := testVerifier(testTime).Verify(r)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(res.Payload.Body())
			wantErr(t, err, "IncompleteBody", "")
			if res.Payload.Consumed() {
				t.Fatal("Consumed after a short body")
			}
		})
	}
}

func TestStreamHeadersRefused(t *testing.T) {
	for _, c := range []struct {
		name      string
		stream    testStream
		code, msg string
	}{
		{"signed without decoded length", testStream{mode: ModeStreamingSigned, noDeclared: true}, "MissingContentLength", "x-amz-decoded-content-length"},
		{"negative decoded length", testStream{mode: ModeStreamingSigned, declared: -5}, "InvalidArgument", "x-amz-decoded-content-length"},
		{"trailer mode without trailer", testStream{mode: ModeStreamingUnsignedTrailer}, "InvalidRequest", "x-amz-trailer"},
		{"unknown trailer", testStream{mode: ModeStreamingSignedTrailer, trailer: "x-amz-checksum-md5", trailerValue: "x"}, "InvalidRequest", "not supported"},
		{"two trailers", testStream{mode: ModeStreamingSignedTrailer, trailer: "x-amz-checksum-crc32,x-amz-checksum-sha1", trailerValue: "x"}, "InvalidRequest", "exactly one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr, wire := c.stream.build(t)
			_, err := testVerifier(testTime).Verify(serverRequest(t, hdr, wire))
			wantErr(t, err, c.code, c.msg)
		})
	}
}

// sha256Hasher adapts crypto/sha256 to the hasher minio-go's signer takes.
type sha256Hasher struct{ hash.Hash }

func (sha256Hasher) Close() {}

// minioStream signs a PUT with minio-go's streaming signer, as minio-go
// does for uploads over plain HTTP, and returns the headers and wire body.
func minioStream(t *testing.T, data []byte, trailer string) (http.Header, []byte) {
	t.Helper()
	r := newRequest(t, http.MethodPut, s3URL(t, "bucket", "object", ""), data)
	r.Header.Set("Content-Type", "application/octet-stream")
	if trailer != "" {
		r.Trailer = http.Header{trailer: {testChecksum(t, trailer, data)}}
	}
	r = signer.StreamingSignV4(r, testAccessKey, testSecret, "", testRegion, int64(len(data)), testTime, sha256Hasher{sha256.New()})
	wire, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(wire)) != r.ContentLength && len(data) > 0 {
		t.Fatalf("minio-go announced %d bytes and wrote %d", r.ContentLength, len(wire))
	}
	return r.Header, wire
}

// minioUnsignedTrailer signs with minio-go's unsigned-trailer signer (as
// minio-go does over HTTPS with checksums). It takes the clock itself, so
// the verifier's clock is set from the request.
func minioUnsignedTrailer(t *testing.T, data []byte, trailer string) (http.Header, []byte, time.Time) {
	t.Helper()
	r := newRequest(t, http.MethodPut, s3URL(t, "bucket", "object", ""), data)
	r.Header.Set("X-Amz-Content-Sha256", streamingUnsignedPayloadTrailer)
	r = signer.SignV4Trailer(*r, testAccessKey, testSecret, "", testRegion, http.Header{trailer: {testChecksum(t, trailer, data)}})
	wire, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(iso8601Basic, r.Header.Get("X-Amz-Date"))
	if err != nil {
		t.Fatal(err)
	}
	return r.Header, wire, at
}

func TestMinioGoStreams(t *testing.T) {
	for _, size := range []int{1, 1000, 64 << 10, 300<<10 + 17} {
		data := testData(size)
		for _, trailer := range []string{"", "x-amz-checksum-crc32", "x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme", "x-amz-checksum-sha256"} {
			t.Run("signed/"+strconv.Itoa(size)+"/"+trailer, func(t *testing.T) {
				hdr, wire := minioStream(t, data, trailer)
				v := testVerifier(testTime)
				checkGoodStream(t, v, hdr, wire, data)
				code := "SignatureDoesNotMatch"
				checkBadStream(t, v, hdr, flipAt(wire, bytes.Index(wire, []byte("\r\n"))+2+size/2), code, "")
				checkBadStream(t, v, hdr, wire[:len(wire)-1], "IncompleteBody", "")
				if trailer != "" {
					bad := bytes.Replace(wire, []byte(trailer+":"+testChecksum(t, trailer, data)),
						[]byte(trailer+":"+testChecksum(t, trailer, data[1:])), 1)
					checkBadStream(t, v, hdr, bad, "SignatureDoesNotMatch", "trailer")
				}
			})
			if trailer == "" {
				continue
			}
			t.Run("unsigned/"+strconv.Itoa(size)+"/"+trailer, func(t *testing.T) {
				hdr, wire, at := minioUnsignedTrailer(t, data, trailer)
				v := testVerifier(at)
				checkGoodStream(t, v, hdr, wire, data)
				checkBadStream(t, v, hdr, flipAt(wire, bytes.Index(wire, []byte("\r\n"))+2+size/2), "BadDigest", "")
				checkBadStream(t, v, hdr, wire[:len(wire)-6], "IncompleteBody", "")
			})
		}
	}
}

func flipAt(wire []byte, i int) []byte {
	w := append([]byte(nil), wire...)
	w[i] ^= 0x20
	return w
}

func TestOutboundEncoderRoundTrip(t *testing.T) {
	for _, name := range []string{"x-amz-checksum-crc32", "x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme", "x-amz-checksum-sha1", "x-amz-checksum-sha256"} {
		algo, _ := lookupChecksum(name)
		for _, size := range []int{0, 1, outboundChunkSize - 1, outboundChunkSize, outboundChunkSize + 1, 3*outboundChunkSize + 5} {
			for _, known := range []bool{true, false} {
				t.Run(name+"/"+strconv.Itoa(size)+"/known="+strconv.FormatBool(known), func(t *testing.T) {
					data := testData(size)
					value := testChecksum(t, name, data)
					declared := int64(size)
					if !known {
						declared = -1
					}
					// A source that ends with io.EOF, read in odd pieces.
					src := iotest.HalfReader(bytes.NewReader(data))
					e := newTrailerEncoder(src, declared, algo, func() (string, bool) { return value, true })
					out, err := readWith(e, 777)
					if err != nil {
						t.Fatal(err)
					}
					if known && encodedLength(declared, outboundChunkSize, algo) != int64(len(out)) {
						t.Fatalf("encodedLength %d, produced %d", encodedLength(declared, outboundChunkSize, algo), len(out))
					}
					if !bytes.HasSuffix(out, []byte("0\r\n"+name+":"+value+"\r\n\r\n")) {
						t.Fatalf("stream does not end with the trailer: %q", out[max(0, len(out)-80):])
					}
					if got := decodeOutbound(t, out, name, declared); !bytes.Equal(got, data) {
						t.Fatal("round trip differs")
					}
				})
			}
		}
	}
}

// TestEncoderWithholdsTrailer: whatever the source fails with, the encoder
// passes the error on and never writes the trailer.
func TestEncoderWithholdsTrailer(t *testing.T) {
	algo, _ := lookupChecksum("x-amz-checksum-crc32")
	data := testData(100)
	for _, declared := range []int64{100, -1} {
		src := io.MultiReader(bytes.NewReader(data), iotest.ErrReader(io.ErrUnexpectedEOF))
		e := newTrailerEncoder(src, declared, algo, func() (string, bool) { return "AAAAAA==", true })
		out, err := readWith(e, 1)
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("err = %v", err)
		}
		if strings.Contains(string(out), "x-amz-checksum") {
			t.Fatal("trailer written after a failure")
		}
	}
	// A source longer than declared is refused before the trailer.
	e := newTrailerEncoder(bytes.NewReader(data), 50, algo, func() (string, bool) { return "AAAAAA==", true })
	out, err := readWith(e, 10)
	wantErr(t, err, "IncompleteBody", "")
	if strings.Contains(string(out), "x-amz-checksum") {
		t.Fatal("trailer written after a failure")
	}
}
