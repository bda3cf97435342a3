package sigv4

import "io"

// tailGuard passes a stream through but always holds back its last byte
// until the source has returned io.EOF.
//
// It protects the backend from half-verified bodies: with Content-Length
// framing the backend cannot commit a body before it has every byte, and the
// sources here return io.EOF only after the body has verified. If the source
// fails instead, the held byte is never released, the backend request ends
// short, and nothing is committed.
type tailGuard struct {
	src     io.Reader
	held    byte
	hasHeld bool
	one     [1]byte // read buffer for one-byte reads, kept to avoid an allocation per call
	err     error   // sticky source error, io.EOF included
}

func newTailGuard(src io.Reader) *tailGuard { return &tailGuard{src: src} }

// maxEmptyReads bounds how often a source may return (0, nil) in a row
// before the guard gives up with io.ErrNoProgress.
const maxEmptyReads = 100

func (g *tailGuard) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for range maxEmptyReads {
		if g.err != nil {
			if g.err == io.EOF && g.hasHeld {
				p[0], g.hasHeld = g.held, false
				return 1, nil
			}
			return 0, g.err
		}
		var n int
		var err error
		switch {
		case !g.hasHeld:
			n, err = g.src.Read(p)
			if n > 0 {
				g.held, g.hasHeld = p[n-1], true
				n--
			}
		case len(p) == 1:
			n, err = g.src.Read(g.one[:])
			if n == 1 {
				p[0], g.held = g.held, g.one[0]
			}
		default:
			// Read behind the held byte, then shift the window by one:
			// the held byte goes out first, the last byte read is held.
			n, err = g.src.Read(p[1:])
			if n > 0 {
				last := p[n]
				p[0], g.held = g.held, last
			}
		}
		if err != nil {
			g.err = err
		}
		if n > 0 {
			return n, nil
		}
	}
	return 0, io.ErrNoProgress
}
