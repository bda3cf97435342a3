package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize bounds the YAML file read, so that a wrong path (a log file, a
// device) fails fast instead of filling memory.
const MaxFileSize = 1 << 20

// UsageError is a mistake on the command line: an unknown flag, a value a
// flag cannot take, or a stray argument. Commands exit with status 2 for it,
// as the flag package does.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Defaults returns a Config holding every setting's default.
func Defaults() *Config {
	c := &Config{}
	for _, s := range Settings() {
		if s.Default == "" {
			continue
		}
		if err := s.setText(c, []string{s.Default}); err != nil {
			// The table is code; a default that does not parse is a bug
			// that every test run catches.
			panic(fmt.Sprintf("config: default of %s: %v", s.Key, err))
		}
	}
	return c
}

// Load builds the serve configuration from args (the command line after the
// command name), environ (os.Environ's form) and the YAML file named by
// --config or SWEEPGATE_CONFIG. For each setting the first source that sets it
// wins: flags, then environment, then file, then the default. Lists are not
// merged across sources.
//
// It returns an error wrapping flag.ErrHelp when args ask for help, a
// *UsageError for a bad command line, and otherwise an error that lists every
// problem found in the settings.
func Load(args, environ []string) (*Config, error) {
	c, _, err := LoadWith(args, environ, nil)
	return c, err
}

// LoadWith is Load for a command that takes serve's flags and flags of its
// own, which define adds to the flag set; it also returns the file the
// configuration was read from (--config, else SWEEPGATE_CONFIG, else "").
func LoadWith(args, environ []string, define func(*flag.FlagSet)) (*Config, string, error) {
	flags, configPath, err := parseFlags(args, define)
	if err != nil {
		return nil, "", err
	}
	if configPath == "" {
		configPath = envMap(environ)[ConfigEnv]
	}
	c, err := loadFileAndEnv(configPath, environ)
	if err != nil {
		return nil, configPath, err
	}
	settings := Settings()
	for i := range settings {
		if v := flags[settings[i].Flag]; v != nil {
			// Values were checked by the flag package already.
			if err := settings[i].setText(c, v.values); err != nil {
				return nil, configPath, &UsageError{fmt.Errorf("flag --%s: %w", settings[i].Flag, err)}
			}
		}
	}
	c.normalize()
	if err := errors.Join(c.resolveSecretFiles(), c.Validate()); err != nil {
		return nil, configPath, err
	}
	return c, configPath, nil
}

// LoadClient builds the configuration as the admin commands see it: that
// of a serve started with the same environment and YAML file (configPath,
// else the file SWEEPGATE_CONFIG names), with serve's precedence
// (environment, then file, then default) and no flags. It is not
// validated, since a command needs only a few settings (admin.listen, the
// admin token's sources, etcd.embedded.data_dir) and should not fail for
// a setting only serve uses.
func LoadClient(configPath string, environ []string) (*Config, error) {
	c, err := loadFileAndEnv(configPath, environ)
	if err != nil {
		return nil, err
	}
	c.normalize()
	return c, nil
}

// loadFileAndEnv returns the defaults overridden by the YAML file
// (configPath, else the file SWEEPGATE_CONFIG names in environ) and then by
// the environment.
func loadFileAndEnv(configPath string, environ []string) (*Config, error) {
	env := envMap(environ)
	if configPath == "" {
		configPath = env[ConfigEnv]
	}
	c := Defaults()
	if configPath != "" {
		data, err := readFile("config file", configPath)
		if err != nil {
			return nil, err
		}
		if err := applyYAML(c, data, configPath); err != nil {
			return nil, err
		}
	}
	if err := applyEnv(c, env); err != nil {
		return nil, err
	}
	return c, nil
}

// flagValue collects the values given to one setting's flag. Values are
// parsed when set, so that a bad one is a usage error naming the flag, and
// kept as text so that Load can apply them after the file and environment.
type flagValue struct {
	setting Setting
	values  []string
}

func (v *flagValue) String() string { return "" }

func (v *flagValue) Set(s string) error {
	if err := v.setting.setText(&Config{}, []string{s}); err != nil {
		return err
	}
	if v.setting.IsList() {
		v.values = append(v.values, s)
	} else {
		v.values = []string{s}
	}
	return nil
}

// IsBoolFlag lets a boolean flag be given without a value.
func (v *flagValue) IsBoolFlag() bool { return v.setting.isBool() }

// newFlagSet returns a flag set with a flag for every setting and for --config.
// Its output is discarded: callers print errors and help themselves (see
// WriteHelp), so that help shows each setting's environment variable and
// YAML key too.
func newFlagSet(name string) (*flag.FlagSet, map[string]*flagValue, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	values := make(map[string]*flagValue)
	for _, s := range Settings() {
		v := &flagValue{setting: s}
		values[s.Flag] = v
		fs.Var(v, s.Flag, s.Usage)
	}
	configPath := fs.String(ConfigFlag, "", "YAML configuration file")
	return fs, values, configPath
}

func parseFlags(args []string, define func(*flag.FlagSet)) (map[string]*flagValue, string, error) {
	fs, values, configPath := newFlagSet("serve")
	if define != nil {
		define(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, "", err
		}
		return nil, "", &UsageError{err}
	}
	if fs.NArg() > 0 {
		return nil, "", &UsageError{fmt.Errorf("unexpected argument %q (settings are flags such as --listen=:9000)", fs.Arg(0))}
	}
	set := make(map[string]*flagValue)
	fs.Visit(func(f *flag.Flag) {
		if v, ok := values[f.Name]; ok {
			set[f.Name] = v
		}
	})
	return set, *configPath, nil
}

// envMap returns the SWEEPGATE_* variables of environ that are not empty.
// An empty variable counts as unset, because deployment tools often define
// every variable a template mentions, set or not.
func envMap(environ []string) map[string]string {
	m := make(map[string]string)
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, EnvPrefix) && v != "" {
			m[k] = v
		}
	}
	return m
}

func applyEnv(c *Config, env map[string]string) error {
	var errs []error
	for _, s := range Settings() {
		v, ok := env[s.Env]
		if !ok {
			continue
		}
		if err := s.setText(c, []string{v}); err != nil {
			if s.Secret {
				err = errors.New("malformed value (not shown: it is secret)")
			}
			errs = append(errs, fmt.Errorf("environment %s: %w", s.Env, err))
		}
	}
	return errors.Join(errs...)
}

// UnknownEnv returns the names of SWEEPGATE_* variables in environ that no
// setting reads, so that serve can warn about a misspelled one instead of
// silently using a default.
func UnknownEnv(environ []string) []string {
	known := map[string]bool{ConfigEnv: true}
	for _, s := range Settings() {
		known[s.Env] = true
	}
	var unknown []string
	for k := range envMap(environ) {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	return unknown
}

type yamlWalker struct {
	name     string
	settings []Setting
	errs     []error
}

func (w *yamlWalker) errorf(n *yaml.Node, format string, args ...any) {
	w.errs = append(w.errs, fmt.Errorf("%s:%d:%d: %s", w.name, n.Line, n.Column, fmt.Sprintf(format, args...)))
}

// mapping applies the keys of a YAML mapping found at path (empty for the
// top level, "etcd.embedded." below etcd: embedded:).
func (w *yamlWalker) mapping(c *Config, n *yaml.Node, path string) {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		w.errorf(n, "anchors and aliases are not supported")
		return
	}
	if n.Kind != yaml.MappingNode {
		where := "the top level"
		if path != "" {
			where = strings.TrimSuffix(path, ".")
		}
		w.errorf(n, "%s must be a mapping of settings", where)
		return
	}
	seen := make(map[string]bool)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			w.errorf(k, "keys must be plain names")
			continue
		}
		key := path + k.Value
		if seen[key] {
			w.errorf(k, "%s is set twice", key)
			continue
		}
		seen[key] = true
		if s, ok := w.setting(key); ok {
			w.leaf(c, s, v)
			continue
		}
		if w.isGroup(key) {
			if isNull(v) {
				continue
			}
			w.mapping(c, v, key+".")
			continue
		}
		w.errorf(k, "unknown setting %s%s", key, w.suggest(key))
	}
}

func (w *yamlWalker) setting(key string) (Setting, bool) {
	for _, s := range w.settings {
		if s.Key == key {
			return s, true
		}
	}
	return Setting{}, false
}

func (w *yamlWalker) isGroup(key string) bool {
	for _, s := range w.settings {
		if strings.HasPrefix(s.Key, key+".") {
			return true
		}
	}
	return false
}

// suggest names the setting a misspelled or misplaced key probably meant.
func (w *yamlWalker) suggest(key string) string {
	norm := func(s string) string {
		return strings.NewReplacer("-", "", "_", "", ".", "").Replace(strings.ToLower(s))
	}
	last := key[strings.LastIndexByte(key, '.')+1:]
	for _, s := range w.settings {
		if norm(s.Key) == norm(key) || norm(s.Key[strings.LastIndexByte(s.Key, '.')+1:]) == norm(last) {
			return fmt.Sprintf(" (did you mean %s?)", s.Key)
		}
	}
	return ""
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// leaf applies one setting's YAML value. A null value (`key:` or `key: ~`)
// leaves the setting as it was.
func (w *yamlWalker) leaf(c *Config, s Setting, n *yaml.Node) {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		w.errorf(n, "%s: anchors and aliases are not supported", s.Key)
		return
	}
	if isNull(n) {
		return
	}
	switch p := s.field(c).(type) {
	case *[]string:
		if n.Kind != yaml.SequenceNode {
			w.errorf(n, "%s must be a list", s.Key)
			return
		}
		items := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode || isNull(item) {
				w.errorf(item, "%s: each item must be a string", s.Key)
				return
			}
			items = append(items, item.Value)
		}
		*p = items
	case *[]Credential:
		if creds, ok := w.credentials(s.Key, n); ok {
			*p = creds
		}
	case *[]BackendIdentity:
		*p, _ = w.identities(n)
	case *[]EtcdShard:
		if shards, ok := w.shards(n); ok {
			*p = shards
		}
	case *[]DigestNamespace:
		if n.Kind != yaml.SequenceNode {
			w.errorf(n, "%s must be a list of BUCKET/PREFIX strings or {name, bucket, prefix, pattern, verify} mappings", s.Key)
			return
		}
		out := make([]DigestNamespace, 0, len(n.Content))
		for _, item := range n.Content {
			ns, ok := w.namespace(s.Key, item)
			if !ok {
				return
			}
			out = append(out, ns)
		}
		*p = out
	case *[]DigestSource:
		if n.Kind != yaml.SequenceNode {
			w.errorf(n, "%s must be a list of BUCKET/PREFIX strings or {name, bucket, prefix, pattern, max_body, confirm_blobs} mappings", s.Key)
			return
		}
		out := make([]DigestSource, 0, len(n.Content))
		for _, item := range n.Content {
			src, ok := w.source(s.Key, item)
			if !ok {
				return
			}
			out = append(out, src)
		}
		*p = out
	default:
		if n.Kind != yaml.ScalarNode {
			w.errorf(n, "%s must be a single value", s.Key)
			return
		}
		if err := s.setText(c, []string{n.Value}); err != nil {
			if s.Secret {
				err = errors.New("malformed value (not shown: it is secret)")
			}
			w.errorf(n, "%s: %v", s.Key, err)
		}
	}
}

// credentials reads a list of credentials: the value of the credentials
// setting, or the whole of a credentials_file.
func (w *yamlWalker) credentials(key string, n *yaml.Node) ([]Credential, bool) {
	if n.Kind != yaml.SequenceNode {
		w.errorf(n, "%s must be a list of {access_key, secret_key, principal}", key)
		return nil, false
	}
	creds := make([]Credential, 0, len(n.Content))
	for _, item := range n.Content {
		cr, ok := w.credential(item)
		if !ok {
			return nil, false
		}
		creds = append(creds, cr)
	}
	return creds, true
}

// casItem reads one item of digests.namespaces or digests.sources. The
// short form, a string BUCKET/PREFIX, comes back as spec; the long form, a
// mapping of plain values whose keys are all in known, as fields (a null
// value counts as unset).
func (w *yamlWalker) casItem(key string, n *yaml.Node, known []string) (spec string, fields map[string]*yaml.Node, ok bool) {
	want := "each item must be a string BUCKET/PREFIX or a mapping with " + strings.Join(known, ", ")
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		w.errorf(n, "%s: anchors and aliases are not supported", key)
		return "", nil, false
	}
	switch {
	case n.Kind == yaml.ScalarNode && !isNull(n):
		return n.Value, nil, true
	case n.Kind != yaml.MappingNode:
		w.errorf(n, "%s: %s", key, want)
		return "", nil, false
	}
	fields = make(map[string]*yaml.Node)
	ok = true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode || v.Anchor != "" {
			w.errorf(k, "%s: keys and values must be plain values", key)
			ok = false
			continue
		}
		if !slices.Contains(known, k.Value) {
			w.errorf(k, "%s: unknown key %s (want %s)", key, k.Value, strings.Join(known, ", "))
			ok = false
			continue
		}
		if _, dup := fields[k.Value]; dup {
			w.errorf(k, "%s: %s is set twice", key, k.Value)
			ok = false
			continue
		}
		fields[k.Value] = v
	}
	if !ok {
		return "", nil, false
	}
	for k, v := range fields {
		if isNull(v) {
			delete(fields, k)
		}
	}
	if fields["bucket"] == nil {
		w.errorf(n, "%s: bucket is required", key)
		return "", nil, false
	}
	return "", fields, true
}

// fieldText returns a field's value, "" when it is unset.
func fieldText(fields map[string]*yaml.Node, name string) string {
	if v := fields[name]; v != nil {
		return v.Value
	}
	return ""
}

func (w *yamlWalker) namespace(key string, n *yaml.Node) (DigestNamespace, bool) {
	spec, fields, ok := w.casItem(key, n, []string{"name", "bucket", "prefix", "pattern", "verify", "content", "confirm_blobs"})
	if !ok {
		return DigestNamespace{}, false
	}
	if fields == nil {
		bucket, prefix, err := parseCASSpec(spec)
		if err != nil {
			w.errorf(n, "%s: %v", key, err)
			return DigestNamespace{}, false
		}
		return DigestNamespace{Bucket: bucket, Prefix: prefix}, true
	}
	ns := DigestNamespace{Name: fieldText(fields, "name"), Bucket: fieldText(fields, "bucket"), Prefix: fieldText(fields, "prefix"), Pattern: fieldText(fields, "pattern"), Content: fieldText(fields, "content")}
	if v := fields["verify"]; v != nil {
		b, err := strconv.ParseBool(v.Value)
		if err != nil {
			w.errorf(v, "%s: verify: %q is not a boolean (use true or false)", key, v.Value)
			return DigestNamespace{}, false
		}
		ns.Verify = &b
	}
	if ns.ConfirmBlobs, ok = w.casBool(key, fields, "confirm_blobs"); !ok {
		return DigestNamespace{}, false
	}
	return ns, true
}

func (w *yamlWalker) source(key string, n *yaml.Node) (DigestSource, bool) {
	spec, fields, ok := w.casItem(key, n, []string{"name", "bucket", "prefix", "pattern", "keys", "max_body", "kind", "confirm_blobs"})
	if !ok {
		return DigestSource{}, false
	}
	if fields == nil {
		bucket, prefix, err := parseCASSpec(spec)
		if err != nil {
			w.errorf(n, "%s: %v", key, err)
			return DigestSource{}, false
		}
		return DigestSource{Bucket: bucket, Prefix: prefix}, true
	}
	src := DigestSource{Name: fieldText(fields, "name"), Bucket: fieldText(fields, "bucket"), Prefix: fieldText(fields, "prefix"), Pattern: fieldText(fields, "pattern"), Keys: fieldText(fields, "keys"), Kind: fieldText(fields, "kind")}
	if v := fields["max_body"]; v != nil {
		mb, err := strconv.ParseInt(strings.TrimSpace(v.Value), 10, 64)
		if err != nil {
			w.errorf(v, "%s: max_body: %q is not a whole number of bytes", key, v.Value)
			return DigestSource{}, false
		}
		src.MaxBody = mb
	}
	if src.ConfirmBlobs, ok = w.casBool(key, fields, "confirm_blobs"); !ok {
		return DigestSource{}, false
	}
	return src, true
}

// casBool reads a boolean field of a namespace or source mapping; false
// when it is unset, ok false (reported) when it is not a boolean.
func (w *yamlWalker) casBool(key string, fields map[string]*yaml.Node, name string) (value, ok bool) {
	v := fields[name]
	if v == nil {
		return false, true
	}
	b, err := strconv.ParseBool(v.Value)
	if err != nil {
		w.errorf(v, "%s: %s: %q is not a boolean (use true or false)", key, name, v.Value)
		return false, false
	}
	return b, true
}
