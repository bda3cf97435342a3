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
	"net/http"
)

// Error is an S3 error: a code from S3's published list, the HTTP status S3
// uses with it, and a message for people.
type Error struct {
	Code       string
	Message    string
	HTTPStatus int
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
	ErrAccessDenied                 = &Error{"AccessDenied", "Access Denied.", http.StatusForbidden}
	ErrAuthorizationHeaderMalformed = &Error{"AuthorizationHeaderMalformed", "The authorization header is malformed.", http.StatusBadRequest}
	ErrAuthorizationQueryMalformed  = &Error{"AuthorizationQueryParametersError", "Error parsing the X-Amz-Credential parameter.", http.StatusBadRequest}
	ErrBadDigest                    = &Error{"BadDigest", "The checksum you specified did not match what we received.", http.StatusBadRequest}
	ErrEntityTooLarge               = &Error{"EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size.", http.StatusBadRequest}
	ErrExpiredToken                 = &Error{"AccessDenied", "Request has expired.", http.StatusForbidden}
	ErrIncompleteBody               = &Error{"IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header.", http.StatusBadRequest}
	ErrInternal                     = &Error{"InternalError", "We encountered an internal error. Please try again.", http.StatusInternalServerError}
	ErrInvalidAccessKeyID           = &Error{"InvalidAccessKeyId", "The AWS access key ID you provided does not exist in our records.", http.StatusForbidden}
	ErrInvalidArgument              = &Error{"InvalidArgument", "Invalid argument.", http.StatusBadRequest}
	ErrInvalidBucketName            = &Error{"InvalidBucketName", "The specified bucket is not valid.", http.StatusBadRequest}
	ErrInvalidDigest                = &Error{"InvalidDigest", "The Content-MD5 or checksum value you specified is not valid.", http.StatusBadRequest}
	ErrInvalidRequest               = &Error{"InvalidRequest", "Invalid request.", http.StatusBadRequest}
	ErrMissingContentLength         = &Error{"MissingContentLength", "You must provide the Content-Length HTTP header.", http.StatusLengthRequired}
	ErrNotImplemented               = &Error{"NotImplemented", "A header or query you provided implies functionality that is not implemented.", http.StatusNotImplemented}
	ErrRequestTimeTooSkewed         = &Error{"RequestTimeTooSkewed", "The difference between the request time and the server's time is too large.", http.StatusForbidden}
	ErrServiceUnavailable           = &Error{"ServiceUnavailable", "Reduce your request rate.", http.StatusServiceUnavailable}
	ErrSignatureDoesNotMatch        = &Error{"SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method.", http.StatusForbidden}
	ErrSignatureVersionNotSupported = &Error{"InvalidRequest", "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.", http.StatusBadRequest}
	ErrXAmzContentSHA256Mismatch    = &Error{"XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.", http.StatusBadRequest}
	ErrBadGateway                   = &Error{"ServiceUnavailable", "The backend could not be reached. Please try again.", http.StatusServiceUnavailable}
)

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
	w.WriteHeader(As(err).HTTPStatus)
	_, _ = w.Write(body)
}
