// Package s3client makes sweepgate's own S3 calls to its backend: the
// listings, reads, aborts and deletes that the gateway, the session service
// and the reclaimer decide on, as opposed to client requests the gateway
// forwards.
//
// Every answer is read through one bounded reader (ReadBody: more than the
// limit is an error, never a silent truncation), every error document
// through one parser (ErrorDocument), and every refusal comes back as an
// *Error carrying the status and the S3 code; ErrNoSuchKey, ErrNoSuchUpload,
// ErrNoSuchBucket and ErrAccessDenied match it with errors.Is.
//
// The client never retries. Each call sends its request once, and an
// answer that is lost (a timeout, a reset connection) is returned as an
// error, so the caller, which records its intent before an abort or a
// delete, decides what an unclear outcome means. (net/http's transport may
// replay a GET or HEAD whose reused connection failed before any answer;
// those change nothing.)
//
// It is written by hand rather than with an S3 SDK: it needs only the few
// calls below, sent through sweepgate's one signed connection (Backend,
// which backend.Client implements), and an SDK's client retries on its
// own, which would hide the lost answers the callers must see.
package s3client

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MaxAnswer bounds the answers read whole (XML documents and refusals); a
// page of 1000 uploads or parts with 1 KiB keys fits.
const MaxAnswer = 16 << 20

var (
	// ErrNoSuchKey says the backend does not have the object (an object
	// read answered 404, or the code says NoSuchKey).
	ErrNoSuchKey = errors.New("s3client: backend has no such object")
	// ErrNoSuchUpload says the backend does not have the multipart upload
	// (any more).
	ErrNoSuchUpload = errors.New("s3client: backend has no such upload")
	// ErrNoSuchBucket says the backend does not have the bucket (any more).
	ErrNoSuchBucket = errors.New("s3client: backend has no such bucket")
	// ErrAccessDenied says the backend refuses the key the call was signed
	// with (403 AccessDenied): its policy does not allow the call.
	ErrAccessDenied = errors.New("s3client: backend denies access")
	// ErrTooLarge says a body is larger than the limit it is read within.
	ErrTooLarge = errors.New("s3client: body larger than its limit")
)

// Backend is the S3 server behind the gateway: its endpoint and its signing
// transport. The gateway's implementation signs each request with the
// backend's credentials.
type Backend interface {
	// NewRequest builds a path-style request for bucket and key with the
	// given query and no body.
	NewRequest(ctx context.Context, method, bucket, key string, query url.Values) (*http.Request, error)
	// RoundTrip sends a request built by NewRequest (or one the caller
	// addressed the same way).
	RoundTrip(*http.Request) (*http.Response, error)
}

// Error is a backend answer other than the success a call expects: a
// status of 300 or more, or an error document in a 2xx answer.
type Error struct {
	Status  int
	Code    string // the S3 error code, "" when the answer had none
	Message string
	// Header and Body are the answer as read, for a caller that passes
	// the refusal on.
	Header http.Header
	Body   []byte
}

func (e *Error) Error() string {
	return fmt.Sprintf("backend answered %d %s", e.Status, e.Code)
}

// Is matches the sentinel errors by the answer's S3 code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNoSuchKey:
		return e.Code == "NoSuchKey"
	case ErrNoSuchUpload:
		return e.Code == "NoSuchUpload"
	case ErrNoSuchBucket:
		return e.Code == "NoSuchBucket"
	case ErrAccessDenied:
		return e.Code == "AccessDenied"
	}
	return false
}

// Client makes typed S3 calls through a Backend. It is safe for concurrent
// use.
type Client struct {
	b       Backend
	timeout time.Duration
}

// New returns a client of b. Each call is bounded by timeout (its answer
// read included) when timeout is positive, so that a hung backend stops
// the caller instead of holding it; otherwise only by its context.
func New(b Backend, timeout time.Duration) *Client {
	return &Client{b: b, timeout: timeout}
}

// ReadBody reads r whole, at most limit bytes: a longer body is
// ErrTooLarge, never a truncated read.
func ReadBody(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return b, nil
}

// ErrorDocument reports whether body is an S3 error document (its root
// element is <Error>), with its code and message. S3 can answer 200 with
// an error document for calls that take long (CompleteMultipartUpload,
// CopyObject, UploadPartCopy). A malformed error document is one, with an
// empty code and message.
func ErrorDocument(body []byte) (code, message string, ok bool) {
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		t, err := d.Token()
		if err != nil {
			return "", "", false
		}
		se, isStart := t.(xml.StartElement)
		if !isStart {
			continue
		}
		if se.Name.Local != "Error" {
			return "", "", false
		}
		var e errorDocument
		if d.DecodeElement(&e, &se) != nil {
			return "", "", true
		}
		return e.Code, e.Message, true
	}
}

// DocumentIs reports whether body is an XML document whose root element
// is named root, in any namespace.
func DocumentIs(body []byte, root string) bool {
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		t, err := d.Token()
		if err != nil {
			return false
		}
		if se, ok := t.(xml.StartElement); ok {
			return se.Name.Local == root
		}
	}
}

// EmptyBody reports a body with nothing but white space: the answer S3
// gives to a request whose success carries no document (an abort, a
// delete).
func EmptyBody(body []byte) bool { return len(bytes.TrimSpace(body)) == 0 }

// ResultETag returns the ETag of a result document (CopyObjectResult,
// CompleteMultipartUploadResult), unquoted, and false for an error
// document or a document without one.
func ResultETag(body []byte) (string, bool) {
	var doc resultDocument
	if xml.Unmarshal(body, &doc) != nil || doc.XMLName.Local == "Error" || doc.ETag == "" {
		return "", false
	}
	return UnquoteETag(doc.ETag), true
}

// UnquoteETag returns an ETag without its quotes.
func UnquoteETag(s string) string { return strings.Trim(strings.TrimSpace(s), `"`) }

// bound applies the client's timeout to ctx.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout > 0 {
		return context.WithTimeout(ctx, c.timeout)
	}
	return context.WithCancel(ctx)
}

// send sends one request, once, with prepare applied to it first when not
// nil. The caller closes the answer's body, and cancels the returned
// context's resources with done once it has read it.
func (c *Client) send(ctx context.Context, method, bucket, key string, q url.Values, prepare func(*http.Request)) (resp *http.Response, done func(), err error) {
	ctx, cancel := c.bound(ctx)
	req, err := c.b.NewRequest(ctx, method, bucket, key, q)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if prepare != nil {
		prepare(req)
	}
	resp, err = c.b.RoundTrip(req)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("no answer from the backend: %w", err)
	}
	return resp, func() { resp.Body.Close(); cancel() }, nil
}

// refusal reads what is left of a refused answer into an *Error. A
// refusal that cannot be read is an error that does not match ErrTooLarge,
// which Get keeps for the object it reads.
func refusal(resp *http.Response) error {
	body, err := ReadBody(resp.Body, MaxAnswer)
	if err != nil {
		return fmt.Errorf("read backend answer %d: %v", resp.StatusCode, err)
	}
	return answerError(resp, body)
}

// answerError returns the *Error of an answer read whole, or nil for a 2xx
// answer that is not an error document.
func answerError(resp *http.Response, body []byte) error {
	code, msg, isErr := ErrorDocument(body)
	if resp.StatusCode/100 == 2 && !isErr {
		return nil
	}
	return &Error{Status: resp.StatusCode, Code: code, Message: msg, Header: resp.Header, Body: body}
}

// call sends one request and returns the body of its answer when the
// answer is a success (answerError); any other answer is an *Error, and no
// answer is the transport's error.
func (c *Client) call(ctx context.Context, method, bucket, key string, q url.Values, prepare func(*http.Request)) ([]byte, error) {
	resp, done, err := c.send(ctx, method, bucket, key, q, prepare)
	if err != nil {
		return nil, err
	}
	defer done()
	body, err := ReadBody(resp.Body, MaxAnswer)
	if err != nil {
		return nil, fmt.Errorf("read backend answer: %w", err)
	}
	if err := answerError(resp, body); err != nil {
		return nil, err
	}
	return body, nil
}

// keyDecoder returns the decoding of the keys of a listing answered with
// encodingType.
func keyDecoder(encodingType string) func(string) (string, error) {
	if encodingType == "url" {
		return url.QueryUnescape
	}
	return func(s string) (string, error) { return s, nil }
}

// Answer is a backend answer read whole, for a request whose outcome the
// caller must know before its own client hears it (a write, a copy, a
// complete, a DeleteObjects the gateway sends on a client's behalf).
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// ReadAnswer reads resp whole, within MaxAnswer, and closes nothing: the
// caller closes resp.Body.
func ReadAnswer(resp *http.Response) (*Answer, error) {
	body, err := ReadBody(resp.Body, MaxAnswer)
	if err != nil {
		return nil, fmt.Errorf("read backend answer: %w", err)
	}
	return &Answer{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// Success reports a 2xx answer that is not an error document (a copy or a
// complete may answer 200 and fail in its body).
func (a *Answer) Success() bool {
	_, _, isErr := ErrorDocument(a.Body)
	return a.Status >= 200 && a.Status < 300 && !isErr
}

// DefiniteFailure reports an answer that says the request changed
// nothing: a redirect or a client error.
func (a *Answer) DefiniteFailure() bool { return a.Status >= 300 && a.Status < 500 }

// Error makes a refusal usable as an error.
func (a *Answer) Error() string { return fmt.Sprintf("backend answered %d", a.Status) }

// Send sends req, built by b.NewRequest or addressed the same way, through
// b once and reads the answer whole. A transport error (no answer) is
// returned as it is, so the caller can tell it from a refusal.
func Send(b Backend, req *http.Request) (*Answer, error) {
	resp, err := b.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return ReadAnswer(resp)
}
