package mig

import "fmt"

// The enum types' text forms (encoding.TextMarshaler and TextUnmarshaler)
// share these helpers: MarshalText refuses a value that is not one of the
// type's (wrapping the sentinel given), UnmarshalText parses with the
// type's parse function (whose errors wrap ErrParse).

// marshalText returns s as text when ok, else an error wrapping sentinel.
func marshalText(ok bool, s fmt.Stringer, sentinel error) ([]byte, error) {
	if !ok {
		return nil, fmt.Errorf("%w: %T value %v has no text form", sentinel, s, s)
	}
	return []byte(s.String()), nil
}

// unmarshalText parses b into *dst.
func unmarshalText[T any](dst *T, b []byte, parse func(string) (T, error)) error {
	if dst == nil {
		return fmt.Errorf("%w: UnmarshalText into a nil %T", ErrParse, dst)
	}
	v, err := parse(string(b))
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// optionalMode is parse for AMD modes, where empty text is the zero value
// (no mode, or any).
func optionalMode[M ~string](parse func(string) (M, error)) func(string) (M, error) {
	return func(s string) (M, error) {
		if s == "" {
			return "", nil
		}
		return parse(s)
	}
}
