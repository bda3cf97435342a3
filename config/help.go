package config

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sweepgate/sweepgate/cas"
)

// defaultText is how help and docs show a setting's default; quote wraps a
// literal value.
func (s Setting) defaultText(quote func(string) string) string {
	switch {
	case s.DefaultDoc != "":
		return s.DefaultDoc
	case s.Required:
		return "none, required"
	case s.Default == "" && s.IsList():
		return "empty list"
	case s.Default == "":
		return "empty"
	default:
		return quote(s.Default)
	}
}

func codeSpan(s string) string { return "`" + s + "`" }

// flagUsage is how help and docs show a setting's flag.
func (s Setting) flagUsage() string {
	if s.isBool() {
		return "--" + s.Flag + "[=" + s.Arg + "]"
	}
	return "--" + s.Flag + " " + s.Arg
}

// WriteHelp writes the help of every setting: its flag, environment
// variable, YAML key, default and purpose.
func WriteHelp(w io.Writer) {
	fmt.Fprintf(w, `Settings come from flags, %s* environment variables and a YAML file, and
for each setting the first of these that sets it wins; then the default
applies. An empty environment variable counts as unset.

  --%s FILE
      YAML file to read settings from. Its keys are the dotted names
      below, nested: backend.endpoint is "backend: {endpoint: ...}".
      Unknown keys are errors.
      env:  %s
`, EnvPrefix, ConfigFlag, ConfigEnv)
	for _, s := range Settings() {
		fmt.Fprintf(w, "\n  %s  (default: %s)\n", s.flagUsage(), s.defaultText(strconv.Quote))
		for _, line := range wrap(s.Usage, 66) {
			fmt.Fprintf(w, "      %s\n", line)
		}
		fmt.Fprintf(w, "      env:  %s\n      yaml: %s\n", s.Env, s.Key)
	}
}

// wrap breaks text into lines of at most width bytes, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// Markdown returns the configuration reference, docs/configuration.md. It is
// generated from the same table as flags and help so that the document
// cannot describe settings the program does not have.
func Markdown() string {
	var b strings.Builder
	b.WriteString(`# Configuration

<!-- Generated from config.Settings; edit config/settings.go and run
     go test ./config -run TestConfigurationDoc -update -->

` + "`sweepgate serve`" + ` reads its settings from three sources. For each setting
the first source that sets it wins:

1. command-line flags, such as ` + "`--backend-endpoint http://127.0.0.1:9100`" + `;
2. environment variables, such as ` + "`SWEEPGATE_BACKEND_ENDPOINT`" + `
   (an empty variable counts as unset);
3. a YAML file named by ` + "`--config FILE`" + ` or ` + "`SWEEPGATE_CONFIG`" + `;

and then the default. A list set in one source replaces the list of the
sources below it; lists are not merged.

Every setting has one name, its YAML key. The flag is the key with ` + "`.`" + ` and
` + "`_`" + ` turned into ` + "`-`" + `; the environment variable is ` + "`SWEEPGATE_`" + ` and the key in
capitals with ` + "`.`" + ` turned into ` + "`_`" + `. The exceptions are lists whose
flag is given once per item: ` + flagExceptions() + `.

In the YAML file the dotted keys nest: ` + "`backend.endpoint`" + ` is written
` + "`backend: {endpoint: ...}`" + `. Unknown keys, anchors and aliases, and more than
one document are errors, so a misspelled setting is never silently ignored.
In flags and environment variables a list is comma-separated, and a flag for
a list may also be repeated. Durations are written like ` + "`30s`, `15m` or `1h`" + `.

Secrets (` + "`backend.secret_key`" + ` and the secrets in ` + "`credentials`" + `) are never
printed or logged. Prefer the environment or the file for them: other users
of the machine can read a process's flags.

## Settings

| YAML key | flag | environment | default | description |
| --- | --- | --- | --- | --- |
`)
	for _, s := range Settings() {
		fmt.Fprintf(&b, "| `%s` | `%s` | `%s` | %s | %s |\n",
			s.Key, s.flagUsage(), s.Env, mdEscape(s.defaultText(codeSpan)), mdEscape(s.Usage))
	}
	b.WriteString(digestsDoc())
	b.WriteString("\n## Example file\n\nEvery setting, with its default where it has one:\n\n```yaml\n")
	b.WriteString(ExampleYAML())
	b.WriteString("```\n")
	return b.String()
}

// flagExceptions lists the settings whose flag is not derived from their
// key, so that the rule the document states cannot leave one out.
func flagExceptions() string {
	var items []string
	for _, s := range Settings() {
		if s.Flag != strings.NewReplacer(".", "-", "_", "-").Replace(s.Key) {
			items = append(items, fmt.Sprintf("`%s` (`--%s`)", s.Key, s.Flag))
		}
	}
	switch len(items) {
	case 0:
		return "none"
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// The examples of digest reclamation in docs/configuration.md. Tests load
// each, so that the document never shows a layout that is refused.
const (
	registryExampleYAML = `digests:
  namespaces:
    - registry/blobs/sha256/     # blobs: registry/blobs/sha256/<hex>
  sources:
    - registry/manifests/        # manifests naming "sha256:<hex>"
`
	lfsExampleYAML = `digests:
  namespaces:
    - name: lfs-objects
      bucket: lfs
      prefix: lfs/objects/
      # lfs/objects/<oid[0:2]>/<oid[2:4]>/<oid>
      pattern: '^[0-9a-f]{2}/[0-9a-f]{2}/(?P<hex>[0-9a-f]{64})$'
      verify: true
  sources:
    - name: lfs-pointers
      bucket: lfs
      prefix: lfs/refs/
      # a pointer file's "oid sha256:<hex>" line
      pattern: 'oid sha256:(?P<hex>[0-9a-f]{64})'
      max_body: 1024
`
)

// digestsDoc explains the two forms of digests.namespaces and
// digests.sources, which a table row is too small for, with examples.
func digestsDoc() string {
	return `
## Digest reclamation

Digest reclamation deletes the blobs of content-addressed namespaces that no
reference source names any more (see docs/digests.md). It is off
until ` + "`digests.namespaces`" + ` and ` + "`digests.sources`" + ` are set. A namespace or
a source is written in a short form, ` + "`BUCKET/PREFIX`" + ` (in flags, environment
variables and YAML), which uses the default pattern, or in YAML as a mapping:

| key | namespace | source |
| --- | --- | --- |
| ` + "`name`" + ` | names it in logs and reports; default ` + "`BUCKET/PREFIX`" + ` | the same |
| ` + "`bucket`" + ` | required | required |
| ` + "`prefix`" + ` | starts every key of the namespace; empty is the whole bucket | starts every key of the source |
| ` + "`pattern`" + ` | matches the whole key after the prefix, the digest's hex in group ` + "`hex`" + ` (its algorithm in ` + "`algo`" + `, else sha256); default ` + "`" + cas.DefaultNamespacePattern + "`" + ` | each match in a body names a digest, groups as for a namespace; default ` + "`" + cas.DefaultSourcePattern + "`" + ` |
| ` + "`verify`" + ` | refuse a blob whose content does not hash to its key's digest; default ` + "`digests.verify`" + ` | - |
| ` + "`keys`" + ` | - | a pattern the key after the prefix must match to be in the source (other keys are plain objects), such as ` + "`/link$`" + ` for a registry's link files; default: every key |
| ` + "`max_body`" + ` | - | largest body parsed, larger writes are refused; default ` + "`digests.max_body`" + ` |
| ` + "`confirm_blobs`" + ` | with ` + "`content`" + `: a manifest blob naming a blob that is not stored is refused | a write naming a blob that is not stored is refused (` + "`409 BlobNotStored`" + `, nothing stored); default false, true in the distribution preset. Leave it off for producers that write a reference before its blob. Needs every namespace to use the default pattern |

Patterns are Go regular expressions (RE2 syntax); in YAML write them in single
quotes, where a backslash is an ordinary character. No key may belong to two
places: a namespace and a source (or two of either) whose prefixes overlap in
one bucket are refused.

A registry-like layout, which the defaults fit:

` + "```yaml\n" + registryExampleYAML + "```" + `

or, on the command line, ` + "`--digests-namespace registry/blobs/sha256/ --digests-source registry/manifests/`" + `.

A Git LFS server that keeps its objects under ` + "`lfs/objects/`" + ` and the pointer
files that name them under ` + "`lfs/refs/`" + `, in the long form:

` + "```yaml\n" + lfsExampleYAML + "```" + `

[digests.md](digests.md) explains digest reclamation, with more examples.
`
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// ExampleYAML returns a YAML file that sets every setting, to its default
// where it has one and to an example value where it has none.
func ExampleYAML() string {
	examples := map[string]string{
		"backend.endpoint":   "http://127.0.0.1:9100",
		"backend.access_key": "minioadmin",
		"backend.secret_key": "minioadmin",
		"region":             "us-east-1",
		"tls_listen":         `""`,
		"tls_cert_file":      `""`,
		"tls_key_file":       `""`,
	}
	var b strings.Builder
	var open []string // the groups of the previous key
	for _, s := range Settings() {
		parts := strings.Split(s.Key, ".")
		groups, name := parts[:len(parts)-1], parts[len(parts)-1]
		common := 0
		for common < len(groups) && common < len(open) && groups[common] == open[common] {
			common++
		}
		for i := common; i < len(groups); i++ {
			fmt.Fprintf(&b, "%s%s:\n", strings.Repeat("  ", i), groups[i])
		}
		open = groups
		indent := strings.Repeat("  ", len(groups))
		switch {
		case s.Key == "credentials":
			fmt.Fprintf(&b, "%s%s:\n%s  - access_key: app1\n%s    secret_key: app1-secret\n%s    principal: app1\n",
				indent, name, indent, indent, indent)
		case s.Key == "domains":
			fmt.Fprintf(&b, "%s%s: [s3.example.com]\n", indent, name)
		case s.IsList():
			fmt.Fprintf(&b, "%s%s: []\n", indent, name)
		case examples[s.Key] != "":
			fmt.Fprintf(&b, "%s%s: %s\n", indent, name, examples[s.Key])
		default:
			fmt.Fprintf(&b, "%s%s: %s\n", indent, name, yamlScalar(s.Default))
		}
	}
	return b.String()
}

// yamlScalar quotes a value when plain YAML would read it as something else.
func yamlScalar(v string) string {
	if v == "" || strings.ContainsAny(v, ":#{}[],&*!|>'\"%@`") {
		return strconv.Quote(v)
	}
	return v
}
