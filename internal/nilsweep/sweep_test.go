package nilsweep

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// callTimeout bounds one call: with nothing given, nothing should take
// long.
const callTimeout = 10 * time.Second

var ctxType = reflect.TypeFor[context.Context]()

// zeroArgs returns nil or zero values for f's parameters (a
// context.Context is context.Background: a nil one is a misuse Go's
// context package documents), leaving variadic parameters empty.
func zeroArgs(f reflect.Type, skip int) []reflect.Value { return args(f, skip, false) }

// newArgs is zeroArgs with pointers to zero values instead of nil
// pointers.
func newArgs(f reflect.Type, skip int) []reflect.Value { return args(f, skip, true) }

func args(f reflect.Type, skip int, alloc bool) []reflect.Value {
	n := f.NumIn()
	if f.IsVariadic() {
		n--
	}
	var args []reflect.Value
	for i := skip; i < n; i++ {
		if in := f.In(i); in == ctxType {
			args = append(args, reflect.ValueOf(context.Background()))
		} else if alloc && in.Kind() == reflect.Pointer {
			args = append(args, reflect.New(in.Elem()))
		} else {
			args = append(args, reflect.Zero(in))
		}
	}
	return args
}

// call calls fn with args and returns the panic it raised, with the
// frames inside the swept packages, or "" when it returned.
func call(fn reflect.Value, args []reflect.Value) string {
	done := make(chan string, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Sprintf("panic: %v\n%s", p, frames(debug.Stack()))
			}
		}()
		fn.Call(args)
		done <- ""
	}()
	select {
	case s := <-done:
		return s
	case <-time.After(callTimeout):
		return fmt.Sprintf("still running after %v", callTimeout)
	}
}

// frames keeps the stack lines naming the module's packages.
func frames(stack []byte) string {
	var out []string
	for _, l := range strings.Split(string(stack), "\n") {
		if strings.Contains(l, modulePath) && !strings.Contains(l, "nilsweep") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	if len(out) > 6 {
		out = out[:6]
	}
	return strings.Join(out, "\n")
}

// indexed lists the methods documented to panic when an index argument is
// out of range, as slice indexing does (every index is out of range on a
// nil or zero value): the documented answer.
var indexed = map[string][]string{
	"type topology.Node":    {"Device", "Link", "Bandwidth", "Island", "NICLink"},
	"type topology.Cluster": {"Node", "DomainOf", "Ancestors"},
}

// madeOnlyBy lists the types callers never make nor see nil or zero:
// each is handed out by the package's own code, as its doc comment says.
var madeOnlyBy = map[string]string{
	"type simulate.State": "the replay (policies read it)",
}

// nilReceiverConventions are the methods Go code never calls on a nil
// receiver: a nil *T is no error value, and decoders unmarshal into a
// value, never into nil.
var nilReceiverConventions = []string{"Error", "Unwrap", "UnmarshalText", "UnmarshalJSON"}

// documented reports whether a panic is the documented answer.
func documented(name, method string, nilRecv bool, panicMsg string) bool {
	if strings.HasPrefix(method, "Must") {
		return true // Must* panics by contract
	}
	if _, ok := madeOnlyBy[name]; ok {
		return true
	}
	if nilRecv && slices.Contains(nilReceiverConventions, method) {
		return true
	}
	if slices.Contains(indexed[name], method) {
		return strings.Contains(panicMsg, "out of range") || strings.Contains(panicMsg, "on a node of")
	}
	return false
}

// Every exported function called with nil and zero arguments, and every
// exported method called on a nil receiver (pointer methods) and on a
// zero value with nil and zero arguments, returns: an error or a
// documented zero answer, never a panic or a hang.
func TestNilAndZeroValues(t *testing.T) {
	var failures []string
	calls := 0
	for name, f := range funcs {
		fn := reflect.ValueOf(f)
		_, short, _ := strings.Cut(name, ".")
		calls++
		if p := call(fn, zeroArgs(fn.Type(), 0)); p != "" && !documented(name, short, false, p) {
			failures = append(failures, fmt.Sprintf("%s(nil args): %s", name, p))
		}
		calls++
		if p := call(fn, newArgs(fn.Type(), 0)); p != "" && !documented(name, short, false, p) {
			failures = append(failures, fmt.Sprintf("%s(zero args): %s", name, p))
		}
	}
	for name, nilPtr := range types {
		pt := reflect.TypeOf(nilPtr)
		vt := pt.Elem()
		for i := range pt.NumMethod() {
			m := pt.Method(i)
			// Pointer methods on a nil receiver (value methods through a nil
			// pointer are the caller's dereference, not the method's).
			if _, isValue := vt.MethodByName(m.Name); !isValue {
				calls++
				args := append([]reflect.Value{reflect.Zero(pt)}, zeroArgs(m.Type, 1)...)
				if p := call(m.Func, args); p != "" && !documented(name, m.Name, true, p) {
					failures = append(failures, fmt.Sprintf("(%s)(nil).%s: %s", name, m.Name, p))
				}
			}
			calls++
			args := append([]reflect.Value{reflect.New(vt)}, zeroArgs(m.Type, 1)...)
			if p := call(m.Func, args); p != "" && !documented(name, m.Name, false, p) {
				failures = append(failures, fmt.Sprintf("zero %s .%s(nil args): %s", name, m.Name, p))
			}
			calls++
			args = append([]reflect.Value{reflect.New(vt)}, newArgs(m.Type, 1)...)
			if p := call(m.Func, args); p != "" && !documented(name, m.Name, false, p) {
				failures = append(failures, fmt.Sprintf("zero %s .%s(zero args): %s", name, m.Name, p))
			}
		}
	}
	sort.Strings(failures)
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d calls, %d panics or hangs", calls, len(failures))
	for name, methods := range indexed {
		require.Contains(t, types, name, "indexed names a type the sweep no longer has")
		pt := reflect.TypeOf(types[name])
		for _, m := range methods {
			_, ok := pt.MethodByName(m)
			require.True(t, ok, "indexed names %s.%s, which is gone", name, m)
		}
	}
	for name := range madeOnlyBy {
		require.Contains(t, types, name, "madeOnlyBy names a type the sweep no longer has")
	}
}
