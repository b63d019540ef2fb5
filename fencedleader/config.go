package fencedleader

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"k8s.io/client-go/tools/leaderelection"
)

// The defaults are those of the Cluster Autoscaler's own leader election,
// with a write grace for the Hetzner API.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	DefaultWriteGrace    = 5 * time.Second
)

// leaseResolution is the resolution of a Lease's duration and of the
// renew time a standby compares: whole seconds (see the package doc).
const leaseResolution = time.Second

// Config is what a Leader needs to know about its Lease. The field
// comments say how each bound is used; see the package doc for why.
type Config struct {
	// Namespace and Name locate the Lease (coordination.k8s.io).
	Namespace, Name string
	// Identity is this replica's name in the Lease. Two replicas must
	// never share one: a Leader that sees a renewal it did not make
	// refuses to lead.
	Identity string
	// LeaseDuration is how long after the leader's last renewal a
	// standby may take the Lease over: whole seconds, 2 s or more,
	// because the Lease stores it as whole seconds.
	LeaseDuration time.Duration
	// RenewDeadline is how long after its last successful renewal the
	// leader lets writes through. Below LeaseDuration, above 1.2 ×
	// RetryPeriod, and at least one RetryPeriod short of the write
	// window (LeaseDuration less one second less a tenth).
	RenewDeadline time.Duration
	// RetryPeriod is how often replicas try to acquire or renew.
	RetryPeriod time.Duration
	// WriteGrace is the longest the API may take to carry out a request
	// it has received. Positive: zero would let a new leader list before
	// the old leader's last writes are carried out.
	WriteGrace time.Duration
}

// DefaultConfig returns a Config with the default timings and the given
// Lease and identity.
func DefaultConfig(namespace, name, identity string) Config {
	return Config{
		Namespace: namespace, Name: name, Identity: identity,
		LeaseDuration: DefaultLeaseDuration, RenewDeadline: DefaultRenewDeadline,
		RetryPeriod: DefaultRetryPeriod, WriteGrace: DefaultWriteGrace,
	}
}

// A SettingError is one problem of a Config. Setting is the Config field,
// which a caller may rename (a command-line flag, say) with Rename.
type SettingError struct {
	Setting string
	Value   string // as given; empty for a string setting
	Reason  string
}

func (e *SettingError) Error() string {
	if e.Value == "" {
		return e.Setting + ": " + e.Reason
	}
	return e.Setting + " " + e.Value + ": " + e.Reason
}

// Rename returns err (as Validate returns it) with each setting named by
// name(setting): the settings named in reasons too. A name of "" keeps
// the field's.
func Rename(err error, name func(setting string) string) []error {
	var errs []error
	var joined interface{ Unwrap() []error }
	list := []error{err}
	if errors.As(err, &joined) {
		list = joined.Unwrap()
	}
	for _, e := range list {
		var se *SettingError
		if !errors.As(e, &se) {
			errs = append(errs, e)
			continue
		}
		c := *se
		c.Setting = renamed(c.Setting, name)
		for _, f := range settingFields {
			c.Reason = replaceWord(c.Reason, f, renamed(f, name))
		}
		errs = append(errs, &c)
	}
	return errs
}

func renamed(s string, name func(string) string) string {
	if n := name(s); n != "" {
		return n
	}
	return s
}

var settingFields = []string{"Namespace", "Name", "Identity", "LeaseDuration", "RenewDeadline", "RetryPeriod", "WriteGrace"}

// writeWindow is how long after the send of its last successful renewal
// a write of the leader may still be on the wire: the lease duration as
// the Lease stores it, less the resolution of a standby's comparison,
// less a tenth for a standby's clock running up to 10% fast. A standby
// cannot take the Lease over before.
func (c Config) writeWindow() time.Duration {
	stored := c.LeaseDuration.Truncate(leaseResolution)
	return stored - leaseResolution - c.LeaseDuration/10
}

// Validate reports every problem of c at once (joined *SettingError).
func (c Config) Validate() error {
	var errs []error
	bad := func(setting string, v time.Duration, format string, args ...any) {
		errs = append(errs, &SettingError{Setting: setting, Value: v.String(), Reason: fmt.Sprintf(format, args...)})
	}
	for _, s := range []struct {
		name string
		v    string
	}{{"Namespace", c.Namespace}, {"Name", c.Name}, {"Identity", c.Identity}} {
		if s.v == "" {
			errs = append(errs, &SettingError{Setting: s.name, Reason: "must not be empty"})
		}
	}
	durations := []struct {
		name string
		v    time.Duration
	}{{"LeaseDuration", c.LeaseDuration}, {"RenewDeadline", c.RenewDeadline}, {"RetryPeriod", c.RetryPeriod}, {"WriteGrace", c.WriteGrace}}
	for _, d := range durations {
		if d.v <= 0 {
			bad(d.name, d.v, "must be positive")
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	switch {
	case c.LeaseDuration < 2*leaseResolution:
		bad("LeaseDuration", c.LeaseDuration, "must be 2s or more: the Lease stores whole seconds and a standby compares renewals to the second")
	case c.LeaseDuration%leaseResolution != 0:
		bad("LeaseDuration", c.LeaseDuration, "must be whole seconds: the Lease stores %s, and a standby would take over that early",
			c.LeaseDuration.Truncate(leaseResolution))
	}
	if c.RenewDeadline >= c.LeaseDuration {
		bad("RenewDeadline", c.RenewDeadline, "must be below LeaseDuration %s, so that a leader that cannot renew stops before a standby takes over", c.LeaseDuration)
	} else if w := c.writeWindow(); c.RenewDeadline+c.RetryPeriod > w {
		bad("RenewDeadline", c.RenewDeadline, "with RetryPeriod %s must fit in the write window %s (LeaseDuration %s less 1s of Lease resolution less a tenth for clock rates): "+
			"at most %s, so that the writes let through last have a retry period to be written", c.RetryPeriod, w, c.LeaseDuration, max(w-c.RetryPeriod, 0))
	}
	if float64(c.RenewDeadline) <= leaderelection.JitterFactor*float64(c.RetryPeriod) {
		bad("RenewDeadline", c.RenewDeadline, "must exceed %.1f × RetryPeriod %s", leaderelection.JitterFactor, c.RetryPeriod)
	}
	return errors.Join(errs...)
}

// replaceWord replaces the whole words old in s by repl.
func replaceWord(s, old, repl string) string {
	if old == repl {
		return s
	}
	return regexp.MustCompile(`\b`+regexp.QuoteMeta(old)+`\b`).ReplaceAllLiteralString(s, repl)
}
