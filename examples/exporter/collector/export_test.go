package collector

import "time"

// SetClock makes c read the time from now (tests only).
func SetClock(c *Collector, now func() time.Time) { c.now = now }
