package plankit

import (
	"fmt"

	"github.com/gputopo/gputopo/topology"
)

// The enum types' text forms (encoding.TextMarshaler and TextUnmarshaler)
// share these helpers: MarshalText refuses a value that is not one of the
// type's (wrapping the sentinel given), UnmarshalText parses with the
// type's parse function (whose errors wrap topology.ErrParse).

// MarshalText returns s as text when ok, else an error wrapping sentinel.
func MarshalText(ok bool, s fmt.Stringer, sentinel error) ([]byte, error) {
	if !ok {
		return nil, fmt.Errorf("%w: %T value %v has no text form", sentinel, s, s)
	}
	return []byte(s.String()), nil
}

// UnmarshalText parses b into *dst.
func UnmarshalText[T any](dst *T, b []byte, parse func(string) (T, error)) error {
	if dst == nil {
		return fmt.Errorf("%w: UnmarshalText into a nil %T", topology.ErrParse, dst)
	}
	v, err := parse(string(b))
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// parseError is a parse error that wraps topology.ErrParse and a more
// specific sentinel without repeating both messages.
type parseError struct {
	kind error
	msg  string
}

func (e *parseError) Error() string   { return e.kind.Error() + ": " + e.msg }
func (e *parseError) Unwrap() []error { return []error{e.kind, topology.ErrParse} }

// Malformed returns a parse error wrapping topology.ErrParse and kind.
func Malformed(kind error, format string, args ...any) error {
	return &parseError{kind: kind, msg: fmt.Sprintf(format, args...)}
}
