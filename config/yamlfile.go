package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// readFile reads a YAML file of at most MaxFileSize bytes; what names it
// in errors ("config file").
func readFile(what, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s %s: larger than %d bytes", what, path, MaxFileSize)
	}
	return data, nil
}

// LoadYAML applies a YAML configuration document to c. name labels errors
// (usually the file's path). Unknown keys, anchors and aliases, and more
// than one document are errors.
func LoadYAML(c *Config, data []byte, name string) error {
	return applyYAML(c, data, name)
}

func applyYAML(c *Config, data []byte, name string) error {
	root, err := yamlDocument(data, name)
	if err != nil || root == nil {
		return err
	}
	w := yamlWalker{name: name, settings: Settings()}
	w.mapping(c, root, "")
	return errors.Join(w.errs...)
}

// yamlDocument returns the root node of the one YAML document in data, or
// nil when the document is empty or null. name labels errors.
func yamlDocument(data []byte, name string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: only one YAML document is allowed", name)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, nil
	}
	return doc.Content[0], nil
}
