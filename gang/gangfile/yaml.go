package gangfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/queue"
	"github.com/gputopo/gputopo/topology"
	"go.yaml.in/yaml/v2"
)

// ReadAll reads a job or cluster file from r, like io.ReadAll but at most
// MaxFileBytes: a longer input is an error wrapping gang.ErrParse and
// topology.ErrLimit, after reading no more than MaxFileBytes+1 bytes.
func ReadAll(r io.Reader) ([]byte, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: reading a nil reader", gang.ErrParse)
	}
	b := make([]byte, 0, 4096)
	for len(b) <= MaxFileBytes {
		if len(b) == cap(b) { // grow geometrically, never past the limit
			nb := make([]byte, len(b), min(2*cap(b), MaxFileBytes+1))
			copy(nb, b)
			b = nb
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(b) > MaxFileBytes {
		return nil, limitErr("file larger than MaxFileBytes (%d)", MaxFileBytes)
	}
	return b, nil
}

// toJSON converts a YAML (or JSON) document to JSON the way
// sigs.k8s.io/yaml's YAMLToJSONStrict does: YAML 1.1 through
// go.yaml.in/yaml/v2 (duplicate keys are errors; yes/no are booleans),
// non-string map keys turned into strings, then encoding/json. The file and
// the document with its aliases expanded are bounded by MaxFileBytes; the
// YAML library itself refuses alias bombs ("excessive aliasing") and
// nesting deeper than 10,000.
func toJSON(data []byte, limits []docLimit) ([]byte, error) {
	if len(data) > MaxFileBytes {
		return nil, limitErr("file is %d bytes, more than MaxFileBytes (%d)", len(data), MaxFileBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, parseErr("empty file")
	}
	var v any
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		return nil, parseErr("%v", err)
	}
	budget := MaxFileBytes
	j, err := jsonable(v, &budget)
	if err != nil {
		return nil, err
	}
	if err := checkDoc(j, limits); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(j)
	if err != nil {
		return nil, parseErr("%v", err)
	}
	return raw, nil
}

// docLimit is a bound on the length of a list or map at a path of a
// decoded document, checked before the document is decoded into structs
// (which take far more memory per element than the text does).
type docLimit struct {
	path []string // keys; "*" is every element of a list
	max  int
	name string
}

var (
	jobDocLimits = []docLimit{
		{[]string{"jobs"}, gang.MaxJobs, "gang.MaxJobs"},
		{[]string{"queues"}, gang.MaxJobs, "gang.MaxJobs"},
		{[]string{"podSets"}, gang.MaxPodSets, "gang.MaxPodSets"},
		{[]string{"podSets", "*", "nodeSelector"}, gang.MaxLabels, "gang.MaxLabels"},
		{[]string{"jobs", "*", "podSets"}, gang.MaxPodSets, "gang.MaxPodSets"},
		{[]string{"jobs", "*", "podSets", "*", "nodeSelector"}, gang.MaxLabels, "gang.MaxLabels"},
		{[]string{"groups"}, gang.MaxGroups, "gang.MaxGroups"},
		{[]string{"jobs", "*", "groups"}, gang.MaxGroups, "gang.MaxGroups"},
		{[]string{"wait", "steps"}, queue.MaxWaitSteps, "queue.MaxWaitSteps"},
		{[]string{"jobs", "*", "wait", "steps"}, queue.MaxWaitSteps, "queue.MaxWaitSteps"},
		{[]string{"fairShare", "queues"}, gang.MaxJobs, "gang.MaxJobs"},
		{[]string{"fairShare", "history"}, gang.MaxJobs * 16, "16 × gang.MaxJobs"},
		{[]string{"fairShare", "runningMin"}, gang.MaxJobs, "gang.MaxJobs"},
	}
	clusterDocLimits = []docLimit{
		{[]string{"levels"}, gang.MaxLevels, "gang.MaxLevels"},
		{[]string{"hyperNodes"}, gang.MaxNodes, "gang.MaxNodes"},
		{[]string{"hyperNodes", "*", "members"}, gang.MaxNodes, "gang.MaxNodes"},
		{[]string{"nodes"}, gang.MaxNodes, "gang.MaxNodes"},
		{[]string{"nodes", "*", "labels"}, gang.MaxLabels, "gang.MaxLabels"},
		{[]string{"nodes", "*", "mig"}, topology.MaxDevices, "topology.MaxDevices"},
		{[]string{"allocations"}, gang.MaxAllocations, "gang.MaxAllocations"},
		{[]string{"allocations", "*", "gpus"}, topology.MaxDevices, "topology.MaxDevices"},
		{[]string{"allocations", "*", "mig"}, topology.MaxDevices, "topology.MaxDevices"},
	}
)

// checkDoc checks doc against limits.
func checkDoc(doc any, limits []docLimit) error {
	for _, l := range limits {
		if err := checkPath(doc, l, 0, l.path[0]); err != nil {
			return err
		}
	}
	return nil
}

func checkPath(v any, l docLimit, i int, where string) error {
	if i == len(l.path) {
		n := 0
		switch t := v.(type) {
		case []any:
			n = len(t)
		case map[string]any:
			n = len(t)
		}
		if n > l.max {
			return limitErr("%s has %d entries, more than %s (%d)", where, n, l.name, l.max)
		}
		return nil
	}
	if l.path[i] == "*" {
		list, _ := v.([]any)
		for k, x := range list {
			if err := checkPath(x, l, i+1, fmt.Sprintf("%s[%d]", where, k)); err != nil {
				return err
			}
		}
		return nil
	}
	m, _ := v.(map[string]any)
	x, ok := m[l.path[i]]
	if !ok {
		return nil
	}
	if i > 0 {
		where += "." + l.path[i]
	}
	return checkPath(x, l, i+1, where)
}

// jsonable converts a decoded YAML value to one encoding/json can marshal,
// charging its size (strings' bytes, 1 byte a value: about its JSON
// length) to budget.
func jsonable(v any, budget *int) (any, error) {
	*budget--
	if *budget < 0 {
		return nil, limitErr("the document is larger than MaxFileBytes (%d) once its YAML aliases are expanded", MaxFileBytes)
	}
	switch t := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			ks, err := yamlKey(k)
			if err != nil {
				return nil, err
			}
			*budget -= len(ks)
			if m[ks], err = jsonable(x, budget); err != nil {
				return nil, err
			}
		}
		return m, nil
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			var err error
			if out[i], err = jsonable(x, budget); err != nil {
				return nil, err
			}
		}
		return out, nil
	case string:
		*budget -= len(t)
		if *budget < 0 {
			return nil, limitErr("the document is larger than MaxFileBytes (%d) once its YAML aliases are expanded", MaxFileBytes)
		}
	}
	return v, nil
}

// yamlKey turns a YAML map key into a JSON object key, as
// sigs.k8s.io/yaml does.
func yamlKey(k any) (string, error) {
	switch t := k.(type) {
	case string:
		return t, nil
	case int:
		return strconv.Itoa(t), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case float64:
		s := strconv.FormatFloat(t, 'g', -1, 32)
		switch s {
		case "+Inf":
			s = ".inf"
		case "-Inf":
			s = "-.inf"
		case "NaN":
			s = ".nan"
		}
		return s, nil
	case bool:
		return strconv.FormatBool(t), nil
	}
	return "", parseErr("unsupported map key %.100v (of type %T)", k, k)
}

func strict(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", gang.ErrParse, err)
	}
	if d.More() {
		return parseErr("trailing data after the document")
	}
	return nil
}
