package config

import (
	"fmt"

	"github.com/sweepgate/sweepgate/cas"
)

// addPreset adds the layout digests.preset names, for the storage
// digests.preset_storage gives, to l.
func (c *Config) addPreset(l *cas.Layout) []error {
	d := c.Digests
	switch {
	case d.Preset == "" && d.PresetStorage == "":
		return nil
	case d.Preset == "":
		return []error{fmt.Errorf("%s: is set, but digests.preset is not", describe("digests.preset_storage"))}
	case d.PresetStorage == "":
		return []error{fmt.Errorf("%s: names %q, which needs digests.preset_storage (the registry's BUCKET, or BUCKET/ROOTDIRECTORY)", describe("digests.preset"), d.Preset)}
	}
	bucket, root, err := cas.ParseSpec(d.PresetStorage)
	if err == nil {
		err = checkBucket(bucket)
	}
	if err != nil {
		return []error{fmt.Errorf("%s: %v", describe("digests.preset_storage"), err)}
	}
	p, err := cas.Preset(d.Preset, bucket, root, d.MaxBody)
	if err != nil {
		return []error{fmt.Errorf("%s: %v", describe("digests.preset"), err)}
	}
	l.Namespaces = append(l.Namespaces, p.Namespaces...)
	l.Sources = append(l.Sources, p.Sources...)
	return nil
}
