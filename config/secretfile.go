package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxSecretFileSize bounds what readSecretFile reads, so that a wrong path
// (a log, a device) fails at once instead of filling memory.
const maxSecretFileSize = 4 << 10

// readSecretFile reads one secret from the file at path: its content with
// surrounding whitespace trimmed, since editors and `echo` end files with
// a newline. An empty file is an error, not an absent secret: whoever named
// the file meant a secret to be there. what names the file in errors
// ("token file"); no error holds the file's content.
func readSecretFile(what, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFileSize+1))
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, path, err)
	}
	if len(data) > maxSecretFileSize {
		return "", fmt.Errorf("%s %s: larger than %d bytes; is it the right file?", what, path, maxSecretFileSize)
	}
	secret := strings.TrimSpace(string(data))
	if secret == "" {
		return "", fmt.Errorf("%s %s is empty", what, path)
	}
	return secret, nil
}

// readCredentialsFile reads the client credentials listed in the YAML file
// at path: a list of {access_key, secret_key, principal}, the same items as
// the credentials setting takes in the configuration file.
func readCredentialsFile(path string) ([]Credential, error) {
	data, err := readFile("credentials file", path)
	if err != nil {
		return nil, err
	}
	root, err := yamlDocument(data, path)
	if err != nil || root == nil {
		if err == nil {
			err = fmt.Errorf("%s lists no credentials", path)
		}
		return nil, err
	}
	w := yamlWalker{name: path, settings: Settings()}
	creds, _ := w.credentials("credentials_file", root)
	return creds, errors.Join(w.errs...)
}

// resolveSecretFiles reads the secrets that settings name by file
// (backend.secret_key_file, credentials_file) into c, so that everything
// past Load sees the secrets themselves. Load calls it at start and at
// every reload, so a rotated file takes effect at the next reload.
func (c *Config) resolveSecretFiles() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	if path := c.Backend.SecretKeyFile; path != "" {
		if c.Backend.SecretKey != "" {
			bad("backend.secret_key_file", "set backend.secret_key or backend.secret_key_file, not both")
		} else if secret, err := readSecretFile("secret file", path); err != nil {
			bad("backend.secret_key_file", "%v", err)
		} else {
			c.Backend.SecretKey = Secret(secret)
		}
	}
	if path := c.CredentialsFile; path != "" {
		creds, err := readCredentialsFile(path)
		if err != nil {
			bad("credentials_file", "%v", err)
		}
		c.Credentials = append(c.Credentials, creds...)
	}
	return errors.Join(errs...)
}
