package s3client

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"unicode/utf8"
)

// A ListMultipartUploads answer of a whole bucket is megabytes of XML
// (MinIO ignores max-uploads), and encoding/xml spends most of a plan's
// own CPU decoding it. decodeUploadListing decodes the plain XML a
// backend writes for it (MinIO's encoding/xml output) directly.
//
// It understands a strict subset of XML 1.0 and is exact on it: whatever
// it decodes, encoding/xml's Decode into listUploadsResult (within its
// ListMultipartUploadsResult root) decodes to the same result
// (TestUploadListingOracle, FuzzUploadListing). The subset is: an
// optional <?xml version="1.0" encoding="UTF-8"?> and whitespace before
// the root; elements with ASCII names without a namespace prefix, whose
// attributes (ignored, as encoding/xml ignores them here) are quoted and
// hold no entity; text of XML characters with the five named entities
// and character references to XML characters, without a carriage return
// or '>' (which encoding/xml treats specially); the fields read holding
// text only and IsTruncated "true", "false" or nothing. Anything else -
// comments, CDATA, directives, processing instructions, a field with
// elements inside, a document that is not well-formed - is not guessed
// at: ok is false and the caller decodes the answer with encoding/xml.
// As encoding/xml does, it reads nothing past the root's end.

// errNotPlain is what the scanner answers for anything outside its
// subset.
var errNotPlain = errors.New("s3client: not plain XML")

// listingBuffer is the read buffer of decodeUploadListing.
const listingBuffer = 64 << 10

// decodeUploadListing decodes a ListMultipartUploadsResult document from
// r. ok false (with a nil error) means the document is outside the subset
// above; err is a failure to read r.
func decodeUploadListing(r io.Reader) (res *listUploadsResult, ok bool, err error) {
	s := &listingScanner{r: bufio.NewReaderSize(r, listingBuffer)}
	res, err = s.document()
	switch {
	case err == nil:
		return res, true, nil
	case errors.Is(err, errNotPlain):
		return nil, false, nil
	}
	return nil, false, err
}

// listingScanner reads the markup of one document.
type listingScanner struct {
	r *bufio.Reader
	// long holds a stretch that did not fit the reader's buffer; scratch
	// is where text with entities is decoded.
	long, scratch []byte
	// open is the names of the elements open inside a skipped one,
	// concatenated; ends marks where each ends in it.
	open []byte
	ends []int
}

// until returns the bytes before the next delim and consumes delim. The
// slice is valid until the next call. A document that ends first is not
// plain (encoding/xml fails on it).
func (s *listingScanner) until(delim byte) ([]byte, error) {
	b, err := s.r.ReadSlice(delim)
	if err == nil {
		return b[:len(b)-1], nil
	}
	s.long = append(s.long[:0], b...)
	for errors.Is(err, bufio.ErrBufferFull) {
		b, err = s.r.ReadSlice(delim)
		s.long = append(s.long, b...)
	}
	switch {
	case err == nil:
		return s.long[:len(s.long)-1], nil
	case errors.Is(err, io.EOF):
		return nil, errNotPlain
	}
	return nil, err
}

// next reads the text before the next tag, which it checks, and the tag's
// content between '<' and '>'.
func (s *listingScanner) next() (tag []byte, err error) {
	text, err := s.until('<')
	if err != nil {
		return nil, err
	}
	if !plainText(text) {
		return nil, errNotPlain
	}
	return s.until('>')
}

// document reads the prolog and the root element.
func (s *listingScanner) document() (*listUploadsResult, error) {
	text, err := s.until('<')
	if err != nil {
		return nil, err
	}
	if !blank(text) {
		return nil, errNotPlain
	}
	tag, err := s.until('>')
	if err != nil {
		return nil, err
	}
	if string(tag) == `?xml version="1.0" encoding="UTF-8"?` {
		if text, err = s.until('<'); err != nil {
			return nil, err
		}
		if !blank(text) {
			return nil, errNotPlain
		}
		if tag, err = s.until('>'); err != nil {
			return nil, err
		}
	}
	name, empty, err := startTag(tag)
	if err != nil {
		return nil, err
	}
	if string(name) != "ListMultipartUploadsResult" {
		return nil, errNotPlain
	}
	res := &listUploadsResult{}
	if empty {
		return res, nil
	}
	return res, s.root(res)
}

// root reads the root's content and its end tag into res.
func (s *listingScanner) root(res *listUploadsResult) error {
	for {
		tag, err := s.next()
		if err != nil {
			return err
		}
		if len(tag) > 0 && tag[0] == '/' {
			return endTag(tag, "ListMultipartUploadsResult")
		}
		name, empty, err := startTag(tag)
		if err != nil {
			return err
		}
		switch string(name) {
		case "EncodingType":
			res.EncodingType, err = s.field(empty, "EncodingType")
		case "NextKeyMarker":
			res.NextKeyMarker, err = s.field(empty, "NextKeyMarker")
		case "NextUploadIdMarker":
			res.NextUploadIDMarker, err = s.field(empty, "NextUploadIdMarker")
		case "IsTruncated":
			var v string
			if v, err = s.field(empty, "IsTruncated"); err == nil {
				switch v {
				case "true":
					res.IsTruncated = true
				case "false", "":
					res.IsTruncated = false
				default:
					err = errNotPlain
				}
			}
		case "Upload":
			err = s.upload(empty, res)
		default:
			err = s.skip(empty, name)
		}
		if err != nil {
			return err
		}
	}
}

// upload reads one Upload element's content and end tag and appends it to
// res.Uploads.
func (s *listingScanner) upload(empty bool, res *listUploadsResult) error {
	res.Uploads = append(res.Uploads, struct {
		Key       string `xml:"Key"`
		UploadID  string `xml:"UploadId"`
		Initiated string `xml:"Initiated"`
	}{})
	u := &res.Uploads[len(res.Uploads)-1]
	for !empty {
		tag, err := s.next()
		if err != nil {
			return err
		}
		if len(tag) > 0 && tag[0] == '/' {
			return endTag(tag, "Upload")
		}
		name, empty, err := startTag(tag)
		if err != nil {
			return err
		}
		switch string(name) {
		case "Key":
			u.Key, err = s.field(empty, "Key")
		case "UploadId":
			u.UploadID, err = s.field(empty, "UploadId")
		case "Initiated":
			u.Initiated, err = s.field(empty, "Initiated")
		default:
			err = s.skip(empty, name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// field reads the text of an element read into a string and its end tag.
// An element inside it is not plain.
func (s *listingScanner) field(empty bool, name string) (string, error) {
	if empty {
		return "", nil
	}
	text, err := s.until('<')
	if err != nil {
		return "", err
	}
	v, ok := s.unescape(text)
	if !ok {
		return "", errNotPlain
	}
	tag, err := s.until('>')
	if err != nil {
		return "", err
	}
	return v, endTag(tag, name)
}

// skip reads past the content and end of an element that is not read,
// checking it as encoding/xml would.
func (s *listingScanner) skip(empty bool, name []byte) error {
	if empty {
		return nil
	}
	s.open = append(s.open[:0], name...)
	s.ends = append(s.ends[:0], len(s.open))
	for len(s.ends) > 0 {
		tag, err := s.next()
		if err != nil {
			return err
		}
		last := len(s.ends) - 1
		top := s.open[s.startOf(last):]
		if len(tag) > 0 && tag[0] == '/' {
			if err := endTag(tag, string(top)); err != nil {
				return err
			}
			s.open = s.open[:s.startOf(last)]
			s.ends = s.ends[:last]
			continue
		}
		inner, empty, err := startTag(tag)
		if err != nil {
			return err
		}
		if !empty {
			s.open = append(s.open, inner...)
			s.ends = append(s.ends, len(s.open))
		}
	}
	return nil
}

// startOf is where the i-th open element's name starts in s.open.
func (s *listingScanner) startOf(i int) int {
	if i == 0 {
		return 0
	}
	return s.ends[i-1]
}

// unescape returns text with its entities replaced, false when it is not
// plain.
func (s *listingScanner) unescape(text []byte) (string, bool) {
	if !plainText(text) {
		return "", false
	}
	amp := bytes.IndexByte(text, '&')
	if amp < 0 {
		return string(text), true
	}
	out := append(s.scratch[:0], text[:amp]...)
	for rest := text[amp:]; len(rest) > 0; {
		if rest[0] != '&' {
			i := bytes.IndexByte(rest, '&')
			if i < 0 {
				i = len(rest)
			}
			out, rest = append(out, rest[:i]...), rest[i:]
			continue
		}
		semi := bytes.IndexByte(rest, ';')
		r, ok := entity(rest[1:max(semi, 1)])
		if semi < 0 || !ok {
			return "", false
		}
		out, rest = utf8.AppendRune(out, r), rest[semi+1:]
	}
	s.scratch = out
	return string(out), true
}

// plainText reports whether text is character data encoding/xml reads as
// it is written, apart from entities: XML characters in UTF-8 without a
// carriage return (which it translates) or '>' (it refuses "]]>"), and
// entities that entity understands.
func plainText(text []byte) bool {
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '&':
			semi := bytes.IndexByte(text[i:], ';')
			if semi < 0 {
				return false
			}
			if _, ok := entity(text[i+1 : i+semi]); !ok {
				return false
			}
			i += semi + 1
		case c == '>' || c == '\r' || c == '<':
			return false
		case c < 0x20 && c != '\t' && c != '\n':
			return false
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(text[i:])
			if r == utf8.RuneError && n == 1 || !xmlChar(r) {
				return false
			}
			i += n
		}
	}
	return true
}

// entity returns the character an entity reference (without '&' and ';')
// stands for: one of the five named entities, or a decimal or hexadecimal
// ("x", lower case) character reference of at most eight digits to an XML
// character.
func entity(name []byte) (rune, bool) {
	switch string(name) {
	case "lt":
		return '<', true
	case "gt":
		return '>', true
	case "amp":
		return '&', true
	case "apos":
		return '\'', true
	case "quot":
		return '"', true
	}
	if len(name) < 2 || name[0] != '#' {
		return 0, false
	}
	digits, base := name[1:], rune(10)
	if digits[0] == 'x' {
		digits, base = digits[1:], 16
	}
	if len(digits) == 0 || len(digits) > 8 {
		return 0, false
	}
	var r rune
	for _, c := range digits {
		var d rune
		switch {
		case '0' <= c && c <= '9':
			d = rune(c - '0')
		case base == 16 && 'a' <= c && c <= 'f':
			d = rune(c-'a') + 10
		case base == 16 && 'A' <= c && c <= 'F':
			d = rune(c-'A') + 10
		default:
			return 0, false
		}
		r = r*base + d
	}
	return r, xmlChar(r)
}

// xmlChar reports whether r is a character XML 1.0 allows (Char).
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

// blank reports whether b is nothing but spaces, tabs and newlines.
func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' {
			return false
		}
	}
	return true
}

// tagSpace reports whether c is white space inside a tag.
func tagSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// nameLen returns the length of the ASCII XML name without a colon b
// starts with (0 for none).
func nameLen(b []byte) int {
	for i, c := range b {
		letter := 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || c == '_'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '.' || c == '-')) {
			return i
		}
	}
	return len(b)
}

// startTag parses the content of a start tag: its name, and whether it is
// empty (<name/>). Its attributes are checked, not kept.
func startTag(tag []byte) (elem []byte, empty bool, err error) {
	if bytes.IndexByte(tag, '<') >= 0 {
		return nil, false, errNotPlain
	}
	if n := len(tag); n > 0 && tag[n-1] == '/' {
		tag, empty = tag[:n-1], true
	}
	n := nameLen(tag)
	if n == 0 {
		return nil, false, errNotPlain
	}
	elem, rest := tag[:n], tag[n:]
	for len(rest) > 0 {
		if !tagSpace(rest[0]) {
			return nil, false, errNotPlain
		}
		rest = bytes.TrimLeft(rest, " \t\n\r")
		if len(rest) == 0 {
			break
		}
		if rest, err = attribute(rest); err != nil {
			return nil, false, err
		}
	}
	return elem, empty, nil
}

// attribute checks the attribute b starts with (name="value", the name
// with at most one colon inside it, the value without entities) and
// returns what follows it.
func attribute(b []byte) ([]byte, error) {
	n := nameLen(b)
	if n == 0 {
		return nil, errNotPlain
	}
	if n < len(b) && b[n] == ':' {
		m := nameLen(b[n+1:])
		if m == 0 {
			return nil, errNotPlain
		}
		n += 1 + m
	}
	b = bytes.TrimLeft(b[n:], " \t\n\r")
	if len(b) == 0 || b[0] != '=' {
		return nil, errNotPlain
	}
	b = bytes.TrimLeft(b[1:], " \t\n\r")
	if len(b) == 0 || b[0] != '"' && b[0] != '\'' {
		return nil, errNotPlain
	}
	end := bytes.IndexByte(b[1:], b[0])
	if end < 0 {
		return nil, errNotPlain
	}
	value := b[1 : 1+end]
	if bytes.IndexByte(value, '&') >= 0 || !plainText(value) {
		return nil, errNotPlain
	}
	return b[2+end:], nil
}

// endTag checks that tag is the end tag of elem.
func endTag(tag []byte, elem string) error {
	if len(tag) == 0 || tag[0] != '/' || string(bytes.TrimRight(tag[1:], " \t\n\r")) != elem {
		return errNotPlain
	}
	return nil
}
