package detecterr

import "errors"

// ErrNotDetected says a hardware provider found nothing to describe here:
// no driver, no sysfs tree, no devices of its kind.
var ErrNotDetected = errors.New("provider: no devices detected")
