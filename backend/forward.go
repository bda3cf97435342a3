package backend

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/sweepgate/sweepgate/gateway/sigv4"
)

// Forward is a client's request as the backend is to receive it: the
// gateway prepares it once the request is verified (addressed path-style,
// the client's signature and the hop-by-hop headers removed), and a service
// sends it with the client's verified payload, or with a body of its own.
// Each call returns a new request; the payload can be sent once.
type Forward struct {
	req *http.Request
	// prepare, when set, readies each clone of req for the backend: the
	// forward is built for every request a service might send on, and
	// clones only for those it does.
	prepare func(out *http.Request)
	payload *sigv4.Payload
}

// NewForward returns the forward of req, prepared for the backend, whose
// body is payload (nil: no body).
func NewForward(req *http.Request, payload *sigv4.Payload) *Forward {
	return &Forward{req: req, payload: payload}
}

// PrepareForward returns the forward of in, a client's request, whose body
// is payload (nil: no body): each request it builds is a clone of in that
// prepare readies for the backend. Nothing is cloned until one is built.
func PrepareForward(in *http.Request, prepare func(out *http.Request), payload *sigv4.Payload) *Forward {
	return &Forward{req: in, prepare: prepare, payload: payload}
}

// Request returns the request carrying the client's verified payload. It
// fails when an empty payload is not the one the client signed.
func (f *Forward) Request() (*http.Request, error) {
	out := f.clone()
	if f.payload == nil {
		return out, nil
	}
	if err := f.payload.Outbound().Apply(out); err != nil {
		return nil, err
	}
	return out, nil
}

// WithBody returns the request carrying body, unsigned, instead of the
// client's payload, without the headers that described the payload's
// framing.
func (f *Forward) WithBody(body []byte) *http.Request {
	out := f.clone()
	if f.payload != nil {
		for _, h := range f.payload.Outbound().Remove {
			out.Header.Del(h)
		}
	}
	out.TransferEncoding = nil
	out.Header.Del("Content-Length")
	out.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	out.ContentLength = int64(len(body))
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = nil
	if len(body) == 0 {
		out.Body = http.NoBody
	}
	return out
}

// WithPayloadRead returns the request carrying body, the client's verified
// payload read whole, with what the payload's framing carried besides its
// bytes: a verified trailing checksum (as a header, which the backend
// checks and stores), and content encodings other than aws-chunked.
func (f *Forward) WithPayloadRead(body []byte) *http.Request {
	out := f.WithBody(body)
	if f.payload == nil {
		return out
	}
	if name, value, ok := f.payload.Checksum(); ok {
		out.Header.Set(name, value)
	}
	var encodings []string
	for e := range strings.SplitSeq(f.payload.Outbound().Header.Get("Content-Encoding"), ",") {
		if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "aws-chunked") {
			encodings = append(encodings, e)
		}
	}
	if len(encodings) > 0 {
		out.Header.Set("Content-Encoding", strings.Join(encodings, ","))
	}
	return out
}

func (f *Forward) clone() *http.Request {
	out := f.req.Clone(f.req.Context())
	if out.Header == nil {
		out.Header = make(http.Header)
	}
	if f.prepare != nil {
		f.prepare(out)
	}
	return out
}
