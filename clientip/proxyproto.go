package clientip

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// The PROXY protocol (versions 1 and 2, as HAProxy specifies them) lets a
// TCP load balancer tell the server behind it the addresses of the
// connection it accepted, in a header before the connection's own bytes.

// v2Signature starts every version 2 header.
var v2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")

// v1Prefix starts every version 1 header.
const v1Prefix = "PROXY "

// maxV1Header is the longest version 1 header, its CRLF included, that the
// specification allows.
const maxV1Header = 107

// MaxV2Payload is the most bytes a version 2 header may carry after its
// 16 fixed bytes: the addresses and the TLVs. The specification allows up
// to 65535; load balancers send a few hundred at most, and a longer one
// is refused rather than buffered.
const MaxV2Payload = 1024

// Header is what a PROXY protocol header says about a connection.
type Header struct {
	// Version is 1 or 2.
	Version int
	// Source and Dest are the addresses of the connection the proxy
	// accepted: Source is the client. They are invalid when the header
	// names no address (version 1 UNKNOWN, version 2 LOCAL or an
	// unspecified or Unix family): the connection then stands for itself.
	Source, Dest netip.AddrPort
}

// ErrNoHeader says that a connection's first bytes are not a PROXY header.
var ErrNoHeader = errors.New("proxy protocol: no PROXY header")

// HasHeader reports whether prefix, a connection's first bytes (at least
// five of them, or all there are), starts a PROXY header of either
// version.
func HasHeader(prefix []byte) bool {
	n := min(len(prefix), 5)
	return n > 0 && (bytes.Equal(prefix[:n], v2Signature[:n]) || string(prefix[:n]) == v1Prefix[:n])
}

// ReadHeader reads one PROXY header from r, and no byte after it. It
// reads at most maxV1Header bytes of a version 1 header and 16 plus
// MaxV2Payload of a version 2 one; a header that is longer, truncated or
// malformed is an error, as is a connection that does not start with one
// (ErrNoHeader).
func ReadHeader(r *bufio.Reader) (Header, error) {
	first, err := r.Peek(1)
	if err != nil {
		return Header{}, fmt.Errorf("proxy protocol: reading the header: %w", err)
	}
	switch first[0] {
	case v2Signature[0]:
		return readV2(r)
	case v1Prefix[0]:
		return readV1(r)
	}
	return Header{}, ErrNoHeader
}

func readV1(r *bufio.Reader) (Header, error) {
	line := make([]byte, 0, maxV1Header)
	for {
		b, err := r.ReadByte()
		if err != nil {
			return Header{}, fmt.Errorf("proxy protocol: truncated version 1 header: %w", unexpectedEOF(err))
		}
		line = append(line, b)
		if b == '\n' {
			break
		}
		if len(line) == maxV1Header {
			return Header{}, errors.New("proxy protocol: version 1 header longer than 107 bytes")
		}
	}
	if !bytes.HasSuffix(line, []byte("\r\n")) {
		return Header{}, errors.New("proxy protocol: version 1 header does not end with CRLF")
	}
	return parseV1(string(line[:len(line)-2]))
}

// parseV1 parses a version 1 header line without its CRLF.
func parseV1(line string) (Header, error) {
	if !strings.HasPrefix(line, v1Prefix) {
		return Header{}, ErrNoHeader
	}
	f := strings.Split(line[len(v1Prefix):], " ")
	if f[0] == "UNKNOWN" {
		return Header{Version: 1}, nil
	}
	if len(f) != 5 || (f[0] != "TCP4" && f[0] != "TCP6") {
		return Header{}, fmt.Errorf("proxy protocol: malformed version 1 header %q", line)
	}
	src, err1 := parseV1Addr(f[1], f[3], f[0] == "TCP4")
	dst, err2 := parseV1Addr(f[2], f[4], f[0] == "TCP4")
	if err := errors.Join(err1, err2); err != nil {
		return Header{}, fmt.Errorf("proxy protocol: version 1 header %q: %w", line, err)
	}
	return Header{Version: 1, Source: src, Dest: dst}, nil
}

func parseV1Addr(addr, port string, v4 bool) (netip.AddrPort, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil || a.Zone() != "" || a.Is4() != v4 {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", addr)
	}
	if port == "" || (len(port) > 1 && port[0] == '0') {
		return netip.AddrPort{}, fmt.Errorf("bad port %q", port)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port %q", port)
	}
	return netip.AddrPortFrom(a, uint16(p)), nil
}

func readV2(r *bufio.Reader) (Header, error) {
	var fixed [16]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return Header{}, fmt.Errorf("proxy protocol: truncated version 2 header: %w", unexpectedEOF(err))
	}
	if !bytes.Equal(fixed[:12], v2Signature) {
		return Header{}, errors.New("proxy protocol: wrong version 2 signature")
	}
	n := int(binary.BigEndian.Uint16(fixed[14:16]))
	if n > MaxV2Payload {
		return Header{}, fmt.Errorf("proxy protocol: version 2 header carries %d bytes, more than %d", n, MaxV2Payload)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return Header{}, fmt.Errorf("proxy protocol: truncated version 2 header: %w", unexpectedEOF(err))
	}
	return parseV2(fixed[12], fixed[13], payload)
}

// parseV2 parses a version 2 header's version and command byte, its family
// and protocol byte, and its payload.
func parseV2(verCmd, fam byte, payload []byte) (Header, error) {
	if verCmd>>4 != 2 {
		return Header{}, fmt.Errorf("proxy protocol: version 2 header with version %d", verCmd>>4)
	}
	switch verCmd & 0xf {
	case 0: // LOCAL: the proxy's own connection, such as a health check
		return Header{Version: 2}, nil
	case 1: // PROXY
	default:
		return Header{}, fmt.Errorf("proxy protocol: version 2 command %d", verCmd&0xf)
	}
	var size int
	switch fam >> 4 {
	case 1:
		size = 4
	case 2:
		size = 16
	case 0, 3: // unspecified, Unix: no address to take
		return Header{Version: 2}, nil
	default:
		return Header{}, fmt.Errorf("proxy protocol: version 2 address family %d", fam>>4)
	}
	if p := fam & 0xf; p > 2 {
		return Header{}, fmt.Errorf("proxy protocol: version 2 transport protocol %d", p)
	}
	if len(payload) < 2*size+4 {
		return Header{}, fmt.Errorf("proxy protocol: version 2 header of %d address bytes, want %d", len(payload), 2*size+4)
	}
	src, _ := netip.AddrFromSlice(payload[:size])
	dst, _ := netip.AddrFromSlice(payload[size : 2*size])
	ports := payload[2*size:]
	return Header{
		Version: 2,
		Source:  netip.AddrPortFrom(src.Unmap(), binary.BigEndian.Uint16(ports[0:2])),
		Dest:    netip.AddrPortFrom(dst.Unmap(), binary.BigEndian.Uint16(ports[2:4])),
	}, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
