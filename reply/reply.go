// Package reply is what a domain service answers one client request with,
// for the gateway to write: a document the service rendered or read whole,
// a backend response to relay as it streams, or an error. The services
// never touch the client's connection; the gateway alone writes a Reply
// (Gateway.answer), so every answer gets the same request id, the same
// filter of connection-level headers and the same length rule.
package reply

import (
	"encoding/xml"
	"net/http"

	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
)

// Reply is one answer to a client. Exactly one of Pass, Err, Stream and the
// status with Body is what the client gets; the zero Reply answers nothing
// (the client went away before an answer could be made).
type Reply struct {
	// Pass asks the gateway to serve the request as it does without the
	// service that returned it: through the session service or the
	// streaming proxy.
	Pass bool
	// Err, when set, is answered as an S3 error document (s3err.As): an
	// *s3err.Error as it is, anything else as InternalError.
	Err error
	// Stream is a backend response relayed as it streams: its status, its
	// end-to-end headers and its body, which the writer closes.
	Stream *http.Response
	// Status, Header and Body are an answer read or rendered whole. A
	// backend's error document in Body gets the gateway's request id.
	Status int
	Header http.Header
	Body   []byte
	// Replayed marks an answer recorded for an earlier request (an
	// idempotent call's outcome) and sent again as it was.
	Replayed bool
	// Done, when set, is called once the answer is written (a passed-on
	// write has then reached the backend): what the service holds for the
	// request's duration is released only then.
	Done func()
}

// PassOn asks the gateway to serve the request as it does without the
// service (Reply.Pass).
func PassOn() Reply { return Reply{Pass: true} }

// Error answers err.
func Error(err error) Reply { return Reply{Err: err} }

// Relay relays resp as it streams; the writer closes its body.
func Relay(resp *http.Response) Reply { return Reply{Stream: resp} }

// Buffered answers with a backend response whose body was read whole.
func Buffered(resp *http.Response, body []byte) Reply {
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// NoContent answers 204 with no body.
func NoContent() Reply { return Reply{Status: http.StatusNoContent} }

// XML answers 200 with the XML document of v, with header's fields besides
// its Content-Type.
func XML(header http.Header, v any) Reply {
	body, err := xml.Marshal(v)
	if err != nil {
		return Error(err)
	}
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/xml")
	return Reply{Status: http.StatusOK, Header: h, Body: append([]byte(xml.Header), body...)}
}

// StatusCode is the status the client gets for r: an error's HTTP status,
// a relayed response's, or Status.
func (r Reply) StatusCode() int {
	switch {
	case r.Err != nil:
		return s3err.As(r.Err).HTTPStatus
	case r.Stream != nil:
		return r.Stream.StatusCode
	}
	return r.Status
}

// Code is the S3 error code r answers with: an error's, or that of the
// error document in Body; "" for an answer that is not an error document.
func (r Reply) Code() string {
	if r.Err != nil {
		return s3err.As(r.Err).Code
	}
	code, _, _ := s3client.ErrorDocument(r.Body)
	return code
}

// Whole returns r with a relayed response's body read whole (within
// s3client.MaxAnswer) and closed, so that a service can act on an answer
// before the client hears it. A body that cannot be read is answered
// BadGateway.
func (r Reply) Whole() Reply {
	if r.Stream == nil {
		return r
	}
	defer r.Stream.Body.Close()
	body, err := s3client.ReadBody(r.Stream.Body, s3client.MaxAnswer)
	if err != nil {
		return Error(s3err.ErrBadGateway)
	}
	return Reply{Status: r.Stream.StatusCode, Header: r.Stream.Header, Body: body}
}
