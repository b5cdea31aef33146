package dra

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Validate checks complete pools of ResourceSlices against the rules of
// resource.k8s.io/v1 that do not need an API server: name formats (DNS
// labels and subdomains, C-identifier attribute names), exactly one node
// selection, devices or counters but not both in one slice, the size
// limits (8 counter sets per slice, 32 counters per set, 64 devices per
// slice when any consumes counters and 128 otherwise, 32 attributes and
// capacities per device, 64-byte strings, 2 counter consumptions per
// device), unique device and counter-set names within a pool, consistent
// pool slice counts, and counter consumption that names an existing set
// and counter of the pool and does not exceed it (such a device could never
// be allocated). The error joins one error per problem, each wrapping
// [ErrInvalid].
func Validate(slices []resourceapi.ResourceSlice) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	type poolKey struct{ driver, pool string }
	type poolInfo struct {
		slices  int
		count   int64
		gen     int64
		devices map[string]bool
		sets    map[string]resourceapi.CounterSet
	}
	pools := map[poolKey]*poolInfo{}
	var order []poolKey
	for si, s := range slices {
		where := fmt.Sprintf("slice %d (%s)", si, s.Name)
		if msgs := subdomainProblems(s.Name); len(msgs) > 0 {
			bad("%s: name: %s", where, strings.Join(msgs, "; "))
		}
		spec := s.Spec
		if msgs := subdomainProblems(spec.Driver); len(msgs) > 0 || len(spec.Driver) > resourceapi.DriverNameMaxLength {
			bad("%s: driver %q must be a lower-case DNS subdomain of at most %d characters", where, spec.Driver, resourceapi.DriverNameMaxLength)
		}
		if spec.Pool.Name == "" || len(spec.Pool.Name) > resourceapi.PoolNameMaxLength {
			bad("%s: pool name %q must have 1 to %d characters", where, spec.Pool.Name, resourceapi.PoolNameMaxLength)
		} else {
			for _, part := range strings.Split(spec.Pool.Name, "/") {
				if msgs := subdomainProblems(part); len(msgs) > 0 {
					bad("%s: pool name %q: %s", where, spec.Pool.Name, strings.Join(msgs, "; "))
				}
			}
		}
		if spec.Pool.ResourceSliceCount <= 0 {
			bad("%s: resourceSliceCount %d must be positive", where, spec.Pool.ResourceSliceCount)
		}
		selections := 0
		if spec.NodeName != nil {
			selections++
			if msgs := subdomainProblems(*spec.NodeName); len(msgs) > 0 {
				bad("%s: node name %q: %s", where, *spec.NodeName, strings.Join(msgs, "; "))
			}
		}
		if spec.NodeSelector != nil {
			selections++
		}
		if spec.AllNodes != nil && *spec.AllNodes {
			selections++
		}
		if spec.PerDeviceNodeSelection != nil && *spec.PerDeviceNodeSelection {
			selections++
		}
		if selections != 1 {
			bad("%s: exactly one of nodeName, nodeSelector, allNodes and perDeviceNodeSelection must be set (%d are)", where, selections)
		}
		if len(spec.Devices) > 0 && len(spec.SharedCounters) > 0 {
			bad("%s: only one of devices and sharedCounters may be set", where)
		}
		key := poolKey{spec.Driver, spec.Pool.Name}
		p, ok := pools[key]
		if !ok {
			p = &poolInfo{count: spec.Pool.ResourceSliceCount, gen: spec.Pool.Generation, devices: map[string]bool{}, sets: map[string]resourceapi.CounterSet{}}
			pools[key] = p
			order = append(order, key)
		}
		p.slices++
		if spec.Pool.ResourceSliceCount != p.count || spec.Pool.Generation != p.gen {
			bad("%s: pool %q: generation %d / resourceSliceCount %d differ from the pool's other slices (%d / %d)",
				where, spec.Pool.Name, spec.Pool.Generation, spec.Pool.ResourceSliceCount, p.gen, p.count)
		}
		if len(spec.SharedCounters) > maxCounterSets {
			bad("%s: %d counter sets, at most %d per slice", where, len(spec.SharedCounters), maxCounterSets)
		}
		for _, cs := range spec.SharedCounters {
			if msgs := labelProblems(cs.Name); len(msgs) > 0 {
				bad("%s: counter set %q: %s", where, cs.Name, strings.Join(msgs, "; "))
			}
			if _, dup := p.sets[cs.Name]; dup {
				bad("%s: counter set %q defined twice in pool %q", where, cs.Name, spec.Pool.Name)
			}
			p.sets[cs.Name] = cs
			if len(cs.Counters) == 0 || len(cs.Counters) > maxCountersPerCounterSet {
				bad("%s: counter set %q has %d counters, must have 1 to %d", where, cs.Name, len(cs.Counters), maxCountersPerCounterSet)
			}
			for name, c := range cs.Counters {
				if msgs := labelProblems(name); len(msgs) > 0 {
					bad("%s: counter set %q: counter %q: %s", where, cs.Name, name, strings.Join(msgs, "; "))
				}
				if c.Value.Sign() < 0 {
					bad("%s: counter set %q: counter %q is negative", where, cs.Name, name)
				}
			}
		}
		advanced := false
		for _, d := range spec.Devices {
			if len(d.ConsumesCounters) > 0 || len(d.Taints) > 0 {
				advanced = true
			}
			for _, a := range d.Attributes {
				if _, _, list := attributeFields(a); list {
					advanced = true
				}
			}
		}
		limit := resourceapi.ResourceSliceMaxDevices
		if advanced {
			limit = maxDevicesWithAdvancedFeatures
		}
		if len(spec.Devices) > limit {
			bad("%s: %d devices, at most %d here", where, len(spec.Devices), limit)
		}
		for _, d := range spec.Devices {
			dw := fmt.Sprintf("%s: device %q", where, d.Name)
			if msgs := labelProblems(d.Name); len(msgs) > 0 {
				bad("%s: name: %s", dw, strings.Join(msgs, "; "))
			}
			if p.devices[d.Name] {
				bad("%s: name used twice in pool %q", dw, spec.Pool.Name)
			}
			p.devices[d.Name] = true
			if n := len(d.Attributes) + len(d.Capacity); n > resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
				bad("%s: %d attributes and capacities, at most %d", dw, n, resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
			}
			values := 0
			for name, a := range d.Attributes {
				if err := qualifiedName(string(name)); err != "" {
					bad("%s: attribute %q: %s", dw, name, err)
				}
				if _, ok := d.Capacity[name]; ok {
					bad("%s: %q is both an attribute and a capacity", dw, name)
				}
				set, n, _ := attributeFields(a)
				if set != 1 {
					bad("%s: attribute %q must have exactly one value field set (%d are)", dw, name, set)
				}
				if a.StringValue != nil && len(*a.StringValue) > resourceapi.DeviceAttributeMaxValueLength {
					bad("%s: attribute %q is longer than %d bytes", dw, name, resourceapi.DeviceAttributeMaxValueLength)
				}
				values += n
			}
			if values > maxAttributeValuesPerDevice {
				bad("%s: %d attribute values, at most %d", dw, values, maxAttributeValuesPerDevice)
			}
			for name, c := range d.Capacity {
				if err := qualifiedName(string(name)); err != "" {
					bad("%s: capacity %q: %s", dw, name, err)
				}
				if c.Value.Sign() < 0 {
					bad("%s: capacity %q is negative", dw, name)
				}
				if c.RequestPolicy != nil {
					if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations {
						bad("%s: capacity %q has a request policy but the device does not allow multiple allocations", dw, name)
					}
					if msg := checkPolicy(c); msg != "" {
						bad("%s: capacity %q: %s", dw, name, msg)
					}
				}
			}
			if len(d.Taints) > maxTaintsPerDevice {
				bad("%s: %d taints, at most %d", dw, len(d.Taints), maxTaintsPerDevice)
			}
			for _, tn := range d.Taints {
				if msgs := validation.IsQualifiedName(tn.Key); len(msgs) > 0 {
					bad("%s: taint key %q: %s", dw, tn.Key, strings.Join(msgs, "; "))
				}
				if msgs := validation.IsValidLabelValue(tn.Value); len(msgs) > 0 {
					bad("%s: taint %q value %q: %s", dw, tn.Key, tn.Value, strings.Join(msgs, "; "))
				}
				if tn.Effect != resourceapi.DeviceTaintEffectNoSchedule && tn.Effect != resourceapi.DeviceTaintEffectNoExecute {
					bad("%s: taint %q: effect %q (NoSchedule or NoExecute)", dw, tn.Key, tn.Effect)
				}
			}
			if len(d.ConsumesCounters) > maxDeviceCounterConsumptionsPerDevice {
				bad("%s: %d counter consumptions, at most %d", dw, len(d.ConsumesCounters), maxDeviceCounterConsumptionsPerDevice)
			}
			seenSets := map[string]bool{}
			for _, c := range d.ConsumesCounters {
				if seenSets[c.CounterSet] {
					bad("%s: consumes from counter set %q twice", dw, c.CounterSet)
				}
				seenSets[c.CounterSet] = true
				if len(c.Counters) == 0 || len(c.Counters) > maxCountersPerDeviceCounterConsumption {
					bad("%s: consumes %d counters from %q, must be 1 to %d", dw, len(c.Counters), c.CounterSet, maxCountersPerDeviceCounterConsumption)
				}
			}
		}
	}
	// Cross-slice checks, once every counter set of each pool is known.
	for _, key := range order {
		p := pools[key]
		if int64(p.slices) != p.count {
			bad("pool %q of driver %q: resourceSliceCount is %d but %d slices were given", key.pool, key.driver, p.count, p.slices)
		}
	}
	for si, s := range slices {
		p := pools[poolKey{s.Spec.Driver, s.Spec.Pool.Name}]
		for _, d := range s.Spec.Devices {
			for _, c := range d.ConsumesCounters {
				set, ok := p.sets[c.CounterSet]
				if !ok {
					bad("slice %d: device %q: counter set %q is not in pool %q", si, d.Name, c.CounterSet, s.Spec.Pool.Name)
					continue
				}
				for name, v := range c.Counters {
					have, ok := set.Counters[name]
					switch {
					case !ok:
						bad("slice %d: device %q: counter set %q has no counter %q", si, d.Name, c.CounterSet, name)
					case v.Value.Sign() < 0:
						bad("slice %d: device %q: consumes a negative amount of %q", si, d.Name, name)
					case v.Value.Cmp(have.Value) > 0:
						bad("slice %d: device %q: consumes %s of %q, more than the %s available", si, d.Name, v.Value.String(), name, have.Value.String())
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// checkPolicy checks a capacity's request policy the way the API server
// does: at most one of validValues and validRange, a default that is one
// of the valid values or inside the range (on a step), values ascending,
// nothing above the capacity.
func checkPolicy(c resourceapi.DeviceCapacity) string {
	p := c.RequestPolicy
	if len(p.ValidValues) > 0 && p.ValidRange != nil {
		return "both validValues and validRange"
	}
	if (len(p.ValidValues) > 0 || p.ValidRange != nil) && p.Default == nil {
		return "valid values without a default"
	}
	if p.Default != nil && (p.Default.Sign() < 0 || p.Default.Cmp(c.Value) > 0) {
		return "default outside 0 to the capacity"
	}
	if len(p.ValidValues) > 10 {
		return "more than 10 valid values"
	}
	for i, v := range p.ValidValues {
		if i > 0 && v.Cmp(p.ValidValues[i-1]) <= 0 {
			return "valid values not ascending"
		}
		if v.Cmp(c.Value) > 0 {
			return "a valid value above the capacity"
		}
	}
	if len(p.ValidValues) > 0 && !slices.ContainsFunc(p.ValidValues, func(v resource.Quantity) bool { return v.Cmp(*p.Default) == 0 }) {
		return "default is not a valid value"
	}
	if r := p.ValidRange; r != nil {
		switch {
		case r.Min == nil:
			return "validRange without min"
		case r.Max != nil && (r.Max.Cmp(*r.Min) < 0 || r.Max.Cmp(c.Value) > 0):
			return "validRange max below min or above the capacity"
		case p.Default.Cmp(*r.Min) < 0 || r.Max != nil && p.Default.Cmp(*r.Max) > 0:
			return "default outside validRange"
		case r.Step != nil && r.Step.Sign() <= 0:
			return "step not positive"
		case r.Step != nil && !onStep(*p.Default, *r.Min, *r.Step):
			return "default is not min plus a whole number of steps"
		}
	}
	return ""
}

// onStep reports whether v = min + k×step for a whole k ≥ 0 (in milli-units).
func onStep(v, minQ, step resource.Quantity) bool {
	d, s := v.MilliValue()-minQ.MilliValue(), step.MilliValue()
	return d >= 0 && s > 0 && d%s == 0
}

// qualifiedName checks a device attribute or capacity name: a C
// identifier of at most 32 characters, optionally behind a DNS subdomain
// of at most 63 characters and a slash. It returns "" when valid.
func qualifiedName(name string) string {
	domain, id, hasDomain := strings.Cut(name, "/")
	if !hasDomain {
		id, domain = domain, ""
	} else {
		if msgs := subdomainProblems(domain); len(msgs) > 0 || len(domain) > resourceapi.DeviceMaxDomainLength {
			return fmt.Sprintf("domain %q must be a DNS subdomain of at most %d characters", domain, resourceapi.DeviceMaxDomainLength)
		}
	}
	if msgs := cIdentifierProblems(id); len(msgs) > 0 || len(id) > resourceapi.DeviceMaxIDLength {
		return fmt.Sprintf("%q must be a C identifier of at most %d characters", id, resourceapi.DeviceMaxIDLength)
	}
	return ""
}
