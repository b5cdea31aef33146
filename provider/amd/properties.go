package amd

import (
	"bytes"
	"fmt"
	"strconv"
)

// properties is a parsed KFD "properties" file: one "key value" pair per
// line, values unsigned decimal integers, keys unique.
type properties struct {
	keys []string // in file order
	vals map[string]uint64
}

// maxPropertyLines bounds a properties file; real ones have about 40 lines.
const maxPropertyLines = 4096

// parseProperties parses a KFD properties file. Blank lines are skipped and
// surrounding spaces ignored. A line without a value, a value that is not an
// unsigned decimal integer, a repeated key or more than 4096 lines is an
// error naming the line (wrapping [ErrParse]).
func parseProperties(data []byte) (properties, error) {
	p := properties{vals: map[string]uint64{}}
	line := 0
	for len(data) > 0 {
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			l, data = data, nil
		}
		line++
		if line > maxPropertyLines {
			return properties{}, fmt.Errorf("%w: more than %d lines", ErrParse, maxPropertyLines)
		}
		f := bytes.Fields(l)
		switch len(f) {
		case 0:
			continue
		case 2:
		default:
			return properties{}, fmt.Errorf("%w: line %d: want \"key value\", got %q", ErrParse, line, truncate(l))
		}
		key := string(f[0])
		v, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return properties{}, fmt.Errorf("%w: line %d: %s value %q is not an unsigned decimal integer", ErrParse, line, truncate(f[0]), truncate(f[1]))
		}
		if _, dup := p.vals[key]; dup {
			return properties{}, fmt.Errorf("%w: line %d: key %s repeated", ErrParse, line, truncate(f[0]))
		}
		p.keys = append(p.keys, key)
		p.vals[key] = v
	}
	return p, nil
}

// truncate shortens garbage quoted in error messages.
func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// get returns the value of key and whether it is present.
func (p properties) get(key string) (uint64, bool) {
	v, ok := p.vals[key]
	return v, ok
}

// val returns the value of key, 0 when absent.
func (p properties) val(key string) uint64 { return p.vals[key] }

// has reports whether key is present.
func (p properties) has(key string) bool {
	_, ok := p.vals[key]
	return ok
}

// format writes the properties back in file order.
func (p properties) format() []byte {
	var b bytes.Buffer
	for _, k := range p.keys {
		fmt.Fprintf(&b, "%s %d\n", k, p.vals[k])
	}
	return b.Bytes()
}
