package multipart

import (
	"errors"
	"testing"

	"github.com/sweepgate/sweepgate/s3err"
)

func TestParseComplete(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    int
		wantErr *s3err.Error
	}{
		{"two parts", `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"a"</ETag></Part><Part><PartNumber>3</PartNumber><ETag>b</ETag></Part></CompleteMultipartUpload>`, 2, nil},
		{"namespaced", `<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part><ETag>"a"</ETag><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>`, 1, nil},
		{"not xml", `hello`, 0, errMalformedXML},
		{"empty", ``, 0, errMalformedXML},
		{"no parts", `<CompleteMultipartUpload></CompleteMultipartUpload>`, 0, errMalformedXML},
		{"wrong root", `<Other><Part><PartNumber>1</PartNumber><ETag>a</ETag></Part></Other>`, 0, errMalformedXML},
		{"missing etag", `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>`, 0, errMalformedXML},
		{"part zero", `<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>a</ETag></Part></CompleteMultipartUpload>`, 0, errPartNumber},
		{"part 10001", `<CompleteMultipartUpload><Part><PartNumber>10001</PartNumber><ETag>a</ETag></Part></CompleteMultipartUpload>`, 0, errPartNumber},
		{"descending", `<CompleteMultipartUpload><Part><PartNumber>2</PartNumber><ETag>a</ETag></Part><Part><PartNumber>1</PartNumber><ETag>b</ETag></Part></CompleteMultipartUpload>`, 0, errInvalidPartOrder},
		{"duplicate", `<CompleteMultipartUpload><Part><PartNumber>2</PartNumber><ETag>a</ETag></Part><Part><PartNumber>2</PartNumber><ETag>b</ETag></Part></CompleteMultipartUpload>`, 0, errInvalidPartOrder},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts, err := parseComplete([]byte(tt.body))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(parts) != tt.want {
				t.Fatalf("parts = %d, err = %v; want %d parts", len(parts), err, tt.want)
			}
		})
	}
}

func TestMultipartETag(t *testing.T) {
	// Two parts whose ETags are the MD5s of "a" and "b": the object's ETag is
	// the MD5 of the two digests, then "-2" (S3's documented rule).
	parts := []completePart{
		{1, `"0cc175b9c0f1b6a831c399e269772661"`},
		{2, `92eb5ffee6ae2fec3ad71c777531578f`},
	}
	if got, want := multipartETag(parts), "96e024ba2074fe77e8e965ba43a704be-2"; got != want {
		t.Errorf("multipartETag = %q, want %q", got, want)
	}
	if got := multipartETag([]completePart{{1, `"not-an-md5"`}}); got != "" {
		t.Errorf("multipartETag of a non-MD5 ETag = %q, want empty", got)
	}
}

func TestPartsDigestIgnoresQuotes(t *testing.T) {
	a := partsDigest([]completePart{{1, `"abc"`}, {2, "def"}})
	b := partsDigest([]completePart{{1, "abc"}, {2, `"def"`}})
	c := partsDigest([]completePart{{1, "abc"}, {3, "def"}})
	if a != b || a == c {
		t.Errorf("digests: %s %s %s", a, b, c)
	}
}

func TestErrorCode(t *testing.T) {
	tests := []struct{ body, want string }{
		{`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<Error><Code>NoSuchUpload</Code><Message>x</Message></Error>`, "NoSuchUpload"},
		{"   \n  <Error><Code>InternalError</Code></Error>", "InternalError"},
		{`<CompleteMultipartUploadResult><ETag>x</ETag></CompleteMultipartUploadResult>`, ""},
		{``, ""},
		{`<Error><Code>`, ""},
	}
	for _, tt := range tests {
		if got := ErrorCode([]byte(tt.body)); got != tt.want {
			t.Errorf("ErrorCode(%q) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

func TestPartNumbers(t *testing.T) {
	for _, s := range []string{"1", "10000", "42"} {
		if _, err := parsePartNumber(s); err != nil {
			t.Errorf("parsePartNumber(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"0", "10001", "-1", "", "1.5", "abc", "99999999999999999999"} {
		if _, err := parsePartNumber(s); !errors.Is(err, errPartNumber) {
			t.Errorf("parsePartNumber(%q) = %v, want InvalidArgument", s, err)
		}
	}
}

func TestCopyRangeSize(t *testing.T) {
	tests := map[string]int64{"bytes=0-99": 100, "bytes=5-5": 1, "": 0, "bytes=9-1": 0, "bytes=a-b": 0, "0-9": 0}
	for in, want := range tests {
		if got := copyRangeSize(in); got != want {
			t.Errorf("copyRangeSize(%q) = %d, want %d", in, got, want)
		}
	}
}
