package mig

import (
	"fmt"

	"github.com/gputopo/gputopo/mig/internal/plankit"
)

// The enum types' text forms (encoding.TextMarshaler and TextUnmarshaler)
// share these helpers: MarshalText refuses a value that is not one of the
// type's (wrapping the sentinel given), UnmarshalText parses with the
// type's parse function (whose errors wrap ErrParse).

// marshalText returns s as text when ok, else an error wrapping sentinel.
func marshalText(ok bool, s fmt.Stringer, sentinel error) ([]byte, error) {
	return plankit.MarshalText(ok, s, sentinel)
}

// unmarshalText parses b into *dst.
func unmarshalText[T any](dst *T, b []byte, parse func(string) (T, error)) error {
	return plankit.UnmarshalText(dst, b, parse)
}
