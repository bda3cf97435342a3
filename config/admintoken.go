package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MinAdminTokenLength is the shortest admin token accepted: shorter ones
// are guessable, and a token is meant to be generated, not typed
// (`openssl rand -hex 32`).
const MinAdminTokenLength = 16

// maxTokenFileSize bounds what ReadTokenFile reads, so that a wrong path
// (a log, a device) fails at once instead of filling memory.
const maxTokenFileSize = 4 << 10

// AdminToken returns the bearer token the admin API requires: admin.token,
// or the trimmed content of admin.token_file, read now, so that a rotated
// file takes effect at the next start. Empty means no token is configured
// and the admin API is open. Errors never hold the token.
func (c *Config) AdminToken() (Secret, error) {
	if c.Admin.Token != "" || c.Admin.TokenFile == "" {
		return c.Admin.Token, nil
	}
	tok, err := ReadTokenFile(c.Admin.TokenFile)
	if err != nil {
		return "", err
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("the token in %s %w", c.Admin.TokenFile, err)
	}
	return Secret(tok), nil
}

// ReadTokenFile reads a token from the file at path: its content with
// surrounding whitespace trimmed, since editors and `echo` end files with
// a newline. An empty file is an error, not an absent token: whoever named
// the file meant a token to be there. The command-line clients read
// --token-file with it too.
func ReadTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFileSize+1))
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	if len(data) > maxTokenFileSize {
		return "", fmt.Errorf("token file %s: larger than %d bytes; is it the right file?", path, maxTokenFileSize)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// checkToken checks a token's form without ever quoting it: long enough,
// and visible ASCII only, so that it fits an Authorization header as it is.
func checkToken(tok string) error {
	if len(tok) < MinAdminTokenLength {
		return fmt.Errorf("is shorter than %d characters (generate one, such as with `openssl rand -hex 32`)", MinAdminTokenLength)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return errors.New("holds a space, a control character or a character outside ASCII; use letters, digits and punctuation only")
		}
	}
	return nil
}

// validateAdmin checks admin.token and admin.token_file, reading the file,
// so that a missing or bad token stops the start instead of leaving the
// admin API open or shut.
func (c *Config) validateAdmin() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	a := c.Admin
	switch {
	case a.Token != "" && a.TokenFile != "":
		bad("admin.token_file", "set admin.token or admin.token_file, not both")
	case a.Token != "":
		if err := checkToken(string(a.Token)); err != nil {
			bad("admin.token", "the token %v", err)
		}
	case a.TokenFile != "":
		if _, err := c.AdminToken(); err != nil {
			bad("admin.token_file", "%v", err)
		}
	}
	return errs
}
