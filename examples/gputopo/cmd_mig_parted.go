package main

import (
	"fmt"
	"io"
	"os"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/parted"
)

// readPartedTemplates reads a mig-parted configuration file as candidate
// templates, telling stderr which configurations are not templates.
func readPartedTemplates(path string, c *mig.Catalog, stderr io.Writer) ([]mig.Template, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, err := parted.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	templates, skipped := cfg.Templates(c)
	for _, s := range skipped {
		fmt.Fprintf(stderr, "%s: not a template: %s\n", path, s)
	}
	if len(templates) == 0 {
		return nil, fmt.Errorf("%s: %w: no configuration is a template of a known model", path, mig.ErrInvalidLayout)
	}
	return templates, nil
}

// partedOutput is what --write-mig-parted wrote.
type partedOutput struct {
	File   string            `json:"file"`
	Config string            `json:"config"`
	Labels map[string]string `json:"labels"`
}

// writeParted writes the chosen template as a mig-parted configuration
// file for the model of the layouts and returns the node labels that
// select it.
func writeParted(path string, ch *mig.TemplateChoice, layouts []*mig.Layout) (*partedOutput, error) {
	cfg, err := parted.FromTemplate("", ch.Template, layouts[0].Model)
	if err != nil {
		return nil, err
	}
	labels, err := parted.NodeLabels(cfg.Configs[0].Name)
	if err != nil {
		return nil, err
	}
	data, err := cfg.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, err
	}
	return &partedOutput{File: path, Config: cfg.Configs[0].Name, Labels: labels}, nil
}
