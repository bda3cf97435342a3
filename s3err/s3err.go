// Package s3err defines the S3 errors that sweepgate itself returns and writes
// them as S3 XML error documents.
//
// Errors that come from the backend are not converted into this type: the
// gateway passes them to the client unchanged, but for their RequestId,
// which becomes the gateway's own (StampRequestID).
package s3err

import (
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Error is an S3 error: a code from S3's published list, the HTTP status S3
// uses with it, and a message for people.
type Error struct {
	Code       string
	Message    string
	HTTPStatus int
	// RetryAfter, when positive, is sent as the Retry-After header (in
	// whole seconds): when a retry may succeed.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, s3err.ErrAccessDenied) works whatever the message says.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// WithMessage returns a copy of e with another message.
func (e *Error) WithMessage(format string, args ...any) *Error {
	c := *e
	c.Message = fmt.Sprintf(format, args...)
	return &c
}

// The errors sweepgate produces. Codes and statuses follow
// https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html.
var (
	ErrAccessDenied                 = &Error{Code: "AccessDenied", Message: "Access Denied.", HTTPStatus: http.StatusForbidden}
	ErrAuthorizationHeaderMalformed = &Error{Code: "AuthorizationHeaderMalformed", Message: "The authorization header is malformed.", HTTPStatus: http.StatusBadRequest}
	ErrAuthorizationQueryMalformed  = &Error{Code: "AuthorizationQueryParametersError", Message: "Error parsing the X-Amz-Credential parameter.", HTTPStatus: http.StatusBadRequest}
	ErrBadDigest                    = &Error{Code: "BadDigest", Message: "The checksum you specified did not match what we received.", HTTPStatus: http.StatusBadRequest}
	ErrEntityTooLarge               = &Error{Code: "EntityTooLarge", Message: "Your proposed upload exceeds the maximum allowed object size.", HTTPStatus: http.StatusBadRequest}
	ErrExpiredToken                 = &Error{Code: "AccessDenied", Message: "Request has expired.", HTTPStatus: http.StatusForbidden}
	ErrIncompleteBody               = &Error{Code: "IncompleteBody", Message: "You did not provide the number of bytes specified by the Content-Length HTTP header.", HTTPStatus: http.StatusBadRequest}
	ErrInternal                     = &Error{Code: "InternalError", Message: "We encountered an internal error. Please try again.", HTTPStatus: http.StatusInternalServerError}
	ErrInvalidAccessKeyID           = &Error{Code: "InvalidAccessKeyId", Message: "The AWS access key ID you provided does not exist in our records.", HTTPStatus: http.StatusForbidden}
	ErrInvalidArgument              = &Error{Code: "InvalidArgument", Message: "Invalid argument.", HTTPStatus: http.StatusBadRequest}
	ErrInvalidBucketName            = &Error{Code: "InvalidBucketName", Message: "The specified bucket is not valid.", HTTPStatus: http.StatusBadRequest}
	ErrMaxMessageLengthExceeded     = &Error{Code: "MaxMessageLengthExceeded", Message: "Your request was too big.", HTTPStatus: http.StatusBadRequest}
	ErrInvalidDigest                = &Error{Code: "InvalidDigest", Message: "The Content-MD5 or checksum value you specified is not valid.", HTTPStatus: http.StatusBadRequest}
	ErrInvalidRequest               = &Error{Code: "InvalidRequest", Message: "Invalid request.", HTTPStatus: http.StatusBadRequest}
	ErrMissingContentLength         = &Error{Code: "MissingContentLength", Message: "You must provide the Content-Length HTTP header.", HTTPStatus: http.StatusLengthRequired}
	ErrNotImplemented               = &Error{Code: "NotImplemented", Message: "A header or query you provided implies functionality that is not implemented.", HTTPStatus: http.StatusNotImplemented}
	ErrRequestTimeout               = &Error{Code: "RequestTimeout", Message: "Your socket connection to the server was not read from or written to within the timeout period. Idle connections will be closed.", HTTPStatus: http.StatusBadRequest}
	ErrRequestTimeTooSkewed         = &Error{Code: "RequestTimeTooSkewed", Message: "The difference between the request time and the server's time is too large.", HTTPStatus: http.StatusForbidden}
	ErrServiceUnavailable           = &Error{Code: "ServiceUnavailable", Message: "Reduce your request rate.", HTTPStatus: http.StatusServiceUnavailable}
	ErrSignatureDoesNotMatch        = &Error{Code: "SignatureDoesNotMatch", Message: "The request signature we calculated does not match the signature you provided. Check your key and signing method.", HTTPStatus: http.StatusForbidden}
	ErrSignatureVersionNotSupported = &Error{Code: "InvalidRequest", Message: "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.", HTTPStatus: http.StatusBadRequest}
	ErrXAmzContentSHA256Mismatch    = &Error{Code: "XAmzContentSHA256Mismatch", Message: "The provided 'x-amz-content-sha256' header does not match what was computed.", HTTPStatus: http.StatusBadRequest}
	ErrBadGateway                   = &Error{Code: "ServiceUnavailable", Message: "The backend could not be reached. Please try again.", HTTPStatus: http.StatusServiceUnavailable}
	// ErrStateUnavailable refuses a request that needs sweepgate's state
	// store (etcd) while it does not answer: multipart calls, reference
	// writes, blob writes and deletes. The client retries after
	// Retry-After: each such request is safe to retry. SlowDown is the code
	// S3 clients back off on.
	ErrStateUnavailable = &Error{Code: "SlowDown", Message: "sweepgate's state store (etcd) did not answer in time, and this request must be recorded there. Please retry.",
		HTTPStatus: http.StatusServiceUnavailable, RetryAfter: 2 * time.Second}
	// ErrStateTooNew refuses a request whose state in etcd a newer
	// sweepgate release wrote in a layout this gateway does not read:
	// nothing is interpreted or changed, and a retry that reaches an
	// upgraded gateway succeeds.
	ErrStateTooNew = &Error{Code: "ServiceUnavailable", Message: "A newer sweepgate release wrote this request's state in a layout this gateway does not read; nothing was changed. Retry, or upgrade this gateway.",
		HTTPStatus: http.StatusServiceUnavailable}
)

// StateTooNew is ErrStateTooNew for a record of the given kind: it names
// the kind and the versions (or the unknown field), never the record's
// key, which would show the keyspace to the client.
func StateTooNew(kind string, version, known int, field string) *Error {
	if field != "" {
		return ErrStateTooNew.WithMessage("The %s record of this request has a field (%s) that this gateway's version %d layout does not: a newer sweepgate release wrote it. Nothing was changed; retry, or upgrade this gateway.", kind, field, known)
	}
	return ErrStateTooNew.WithMessage("The %s record of this request has layout version %d; this gateway reads versions 1 to %d: a newer sweepgate release wrote it. Nothing was changed; retry, or upgrade this gateway.", kind, version, known)
}

// SchemaNotRead is ErrStateTooNew for a keyspace in a schema this gateway
// does not read: every request that must be recorded is refused.
func SchemaNotRead(stored, lo, hi int) *Error {
	return ErrStateTooNew.WithMessage("sweepgate's state is in keyspace schema %d, and this gateway reads schemas %d to %d: nothing was changed. Retry, or upgrade this gateway.", stored, lo, hi)
}

// As returns err as an *Error, or ErrInternal when err is not one.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return ErrInternal
}

// document is the XML body of an S3 error response.
type document struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
}

// Document renders err as an S3 XML error document, with the XML header.
func Document(err error, resource, requestID string) []byte {
	e := As(err)
	body, _ := xml.Marshal(document{Code: e.Code, Message: e.Message, Resource: resource, RequestID: requestID})
	return append([]byte(xml.Header), body...)
}

// Write writes err to w as an S3 XML error document. The resource is the
// request path, and requestID is also set as the x-amz-request-id header.
func Write(w http.ResponseWriter, err error, resource, requestID string) {
	body := Document(err, resource, requestID)
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("X-Amz-Request-Id", requestID)
	h.Set("Content-Length", fmt.Sprint(len(body)))
	e := As(err)
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
	}
	w.WriteHeader(e.HTTPStatus)
	_, _ = w.Write(body)
}
