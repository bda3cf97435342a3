package clientip

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
)

// v2 builds a version 2 header: command, family byte, payload.
func v2(cmd, fam byte, payload []byte) []byte {
	b := append([]byte{}, v2Signature...)
	b = append(b, 0x20|cmd, fam, 0, 0)
	binary.BigEndian.PutUint16(b[14:], uint16(len(payload)))
	return append(b, payload...)
}

func v2Inet(src, dst string, sport, dport uint16) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	fam := byte(0x11)
	if s.Is6() {
		fam = 0x21
	}
	p := append(s.AsSlice(), d.AsSlice()...)
	p = binary.BigEndian.AppendUint16(p, sport)
	p = binary.BigEndian.AppendUint16(p, dport)
	return v2(1, fam, p)
}

func TestReadHeaderValid(t *testing.T) {
	tlv := append(v2Inet("192.0.2.1", "10.0.0.1", 5000, 9000)[16:], 0x04, 0x00, 0x02, 'h', 'i')
	for name, c := range map[string]struct {
		in       []byte
		src      string
		version  int
		noSource bool
	}{
		"v1 tcp4":       {in: []byte("PROXY TCP4 192.0.2.1 10.0.0.1 5000 9000\r\n"), src: "192.0.2.1:5000", version: 1},
		"v1 tcp6":       {in: []byte("PROXY TCP6 2001:db8::1 2001:db8::2 65535 1\r\n"), src: "[2001:db8::1]:65535", version: 1},
		"v1 unknown":    {in: []byte("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"), version: 1, noSource: true},
		"v1 longest":    {in: []byte("PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"), src: "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535", version: 1},
		"v2 inet":       {in: v2Inet("192.0.2.1", "10.0.0.1", 5000, 9000), src: "192.0.2.1:5000", version: 2},
		"v2 inet6":      {in: v2Inet("2001:db8::1", "2001:db8::2", 443, 80), src: "[2001:db8::1]:443", version: 2},
		"v2 tlvs":       {in: v2(1, 0x11, tlv), src: "192.0.2.1:5000", version: 2},
		"v2 local":      {in: v2(0, 0x00, nil), version: 2, noSource: true},
		"v2 local addr": {in: v2(0, 0x11, v2Inet("192.0.2.1", "10.0.0.1", 1, 2)[16:]), version: 2, noSource: true},
		"v2 unspec":     {in: v2(1, 0x00, nil), version: 2, noSource: true},
		"v2 unix":       {in: v2(1, 0x31, make([]byte, 216)), version: 2, noSource: true},
	} {
		rest := "GET / HTTP/1.1\r\n"
		r := bufio.NewReader(io.MultiReader(bytes.NewReader(c.in), strings.NewReader(rest)))
		h, err := ReadHeader(r)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if h.Version != c.version || h.Source.IsValid() == c.noSource || (!c.noSource && h.Source.String() != c.src) {
			t.Errorf("%s: got %+v, want source %s version %d", name, h, c.src, c.version)
		}
		if after, _ := io.ReadAll(r); string(after) != rest {
			t.Errorf("%s: the bytes after the header are %q, want %q", name, after, rest)
		}
		if !HasHeader(c.in[:5]) {
			t.Errorf("%s: HasHeader is false", name)
		}
	}
}

func TestReadHeaderInvalid(t *testing.T) {
	good1 := []byte("PROXY TCP4 192.0.2.1 10.0.0.1 5000 9000\r\n")
	good2 := v2Inet("192.0.2.1", "10.0.0.1", 5000, 9000)
	cases := map[string][]byte{
		"empty":               nil,
		"http":                []byte("GET / HTTP/1.1\r\n"),
		"v1 oversized":        []byte("PROXY TCP4 " + strings.Repeat("1", 200) + "\r\n"),
		"v1 no crlf":          []byte("PROXY TCP4 192.0.2.1 10.0.0.1 5000 9000\n"),
		"v1 family mismatch":  []byte("PROXY TCP4 2001:db8::1 10.0.0.1 5000 9000\r\n"),
		"v1 bad port":         []byte("PROXY TCP4 192.0.2.1 10.0.0.1 65536 9000\r\n"),
		"v1 leading zero":     []byte("PROXY TCP4 192.0.2.1 10.0.0.1 05000 9000\r\n"),
		"v1 extra field":      []byte("PROXY TCP4 192.0.2.1 10.0.0.1 5000 9000 1\r\n"),
		"v1 double space":     []byte("PROXY TCP4  192.0.2.1 10.0.0.1 5000 9000\r\n"),
		"v1 udp":              []byte("PROXY UDP4 192.0.2.1 10.0.0.1 5000 9000\r\n"),
		"v1 zone":             []byte("PROXY TCP6 fe80::1%eth0 fe80::2 1 2\r\n"),
		"v1 wrong signature":  []byte("PROXZ TCP4 192.0.2.1 10.0.0.1 5000 9000\r\n"),
		"v2 wrong signature":  append([]byte("\r\n\r\n\x00\r\nQUIX\n"), good2[12:]...),
		"v2 version 1":        append(append(append([]byte{}, good2[:12]...), 0x11), good2[13:]...),
		"v2 command 2":        append(append(append([]byte{}, good2[:12]...), 0x22), good2[13:]...),
		"v2 family 4":         v2(1, 0x41, make([]byte, 12)),
		"v2 short addresses":  v2(1, 0x21, make([]byte, 12)),
		"v2 protocol 3":       v2(1, 0x13, make([]byte, 12)),
		"v2 oversized":        v2(1, 0x11, make([]byte, MaxV2Payload+1)),
		"v1 truncated":        good1[:len(good1)-1],
		"v2 truncated fixed":  good2[:15],
		"v2 truncated length": good2[:len(good2)-1],
	}
	for i := 1; i < len(good1)-1; i += 7 {
		cases["v1 cut "+string(good1[:i])] = good1[:i]
	}
	for name, in := range cases {
		h, err := ReadHeader(bufio.NewReader(bytes.NewReader(in)))
		if err == nil {
			t.Errorf("%s: accepted as %+v", name, h)
		}
	}
	if _, err := ReadHeader(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\n"))); !errors.Is(err, ErrNoHeader) {
		t.Errorf("an HTTP request: %v, want ErrNoHeader", err)
	}
	if _, err := ReadHeader(bufio.NewReader(bytes.NewReader(good2[:20]))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a truncated header: %v, want io.ErrUnexpectedEOF", err)
	}
}

// TestReadHeaderBounded checks that a header that never ends is refused
// after the longest one the protocol allows, without reading further.
func TestReadHeaderBounded(t *testing.T) {
	// A megabyte stands for a header that never ends: a reader without
	// the bound reads all of it.
	r := &countingReader{r: io.MultiReader(strings.NewReader("PROXY "), io.LimitReader(endless('1'), 1<<20))}
	if _, err := ReadHeader(bufio.NewReaderSize(r, 16)); err == nil {
		t.Fatal("an endless version 1 header was accepted")
	}
	if r.n > maxV1Header+16 {
		t.Errorf("read %d bytes of an endless version 1 header, at most %d expected", r.n, maxV1Header+16)
	}
}

type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func FuzzReadHeader(f *testing.F) {
	f.Add([]byte("PROXY TCP4 192.0.2.1 10.0.0.1 5000 9000\r\nGET /"))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add(v2Inet("2001:db8::1", "2001:db8::2", 443, 80))
	f.Add(v2(0, 0, nil))
	f.Add(v2(1, 0x11, make([]byte, 40)))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := &countingReader{r: bytes.NewReader(in)}
		h, err := ReadHeader(bufio.NewReaderSize(r, 16))
		if r.n > 16+MaxV2Payload+16 {
			t.Fatalf("read %d bytes", r.n)
		}
		if err != nil {
			return
		}
		if h.Version != 1 && h.Version != 2 {
			t.Fatalf("version %d", h.Version)
		}
		if h.Source.IsValid() && (h.Source.Addr().Zone() != "" || h.Source.Addr().Is4In6()) {
			t.Fatalf("source %s", h.Source)
		}
		if !HasHeader(in) {
			t.Fatalf("accepted %q, which HasHeader says is no header", in)
		}
	})
}
