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
)

// Reply is one answer to a client. Exactly one of Err, Stream and the
// status with Body is what the client gets.
type Reply struct {
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
}

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
