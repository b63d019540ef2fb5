package adapter

import (
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// Verbosity of hcloudscale's log levels in klog, which obeys the
// autoscaler's --v flag.
const (
	// DebugVerbosity is where zap's debug level goes: the API traffic
	// (with the token, user data and passwords redacted), listings and
	// image lookups; the built-in provider dumps requests at the same
	// level.
	DebugVerbosity klog.Level = 5
	// InfoVerbosity is where zap's info level goes: scale-ups, servers
	// running, deletes; a handful of lines per scaling event, shown at
	// every verbosity like the autoscaler's own scale-up lines.
	InfoVerbosity klog.Level = 0
)

// NewKlogLogger returns a zap logger that writes through klog: debug at
// V([DebugVerbosity]), info at V([InfoVerbosity]), warn as a warning,
// error and above as an error. Each line carries the logger name, the
// message and the fields as klog key/value pairs, and klog's file:line
// points at the code that logged. Whether a level is enabled is asked of
// klog at each call, so a --v set after start applies.
func NewKlogLogger() *zap.Logger {
	return zap.New(&klogCore{})
}

// klogCore is a zapcore.Core that writes entries through klog. It keeps
// no state besides the fields added With; klog does the buffering.
type klogCore struct {
	fields []zapcore.Field
}

var _ zapcore.Core = (*klogCore)(nil)

func (c *klogCore) Enabled(l zapcore.Level) bool {
	switch {
	case l < zapcore.InfoLevel:
		return klog.V(DebugVerbosity).Enabled()
	case l == zapcore.InfoLevel:
		return klog.V(InfoVerbosity).Enabled()
	default:
		return true
	}
}

func (c *klogCore) With(fields []zapcore.Field) zapcore.Core {
	return &klogCore{fields: append(c.fields[:len(c.fields):len(c.fields)], fields...)}
}

func (c *klogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *klogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	msg := e.Message
	if e.LoggerName != "" {
		msg = e.LoggerName + ": " + msg
	}
	var errField error
	kv := keysAndValues(append(c.fields[:len(c.fields):len(c.fields)], fields...), &errField)
	depth := callerDepth()
	switch {
	case e.Level < zapcore.InfoLevel:
		klog.V(DebugVerbosity).InfoSDepth(depth, msg, kv...)
	case e.Level == zapcore.InfoLevel:
		klog.V(InfoVerbosity).InfoSDepth(depth, msg, kv...)
	case e.Level == zapcore.WarnLevel:
		// klog has no structured warning; format the pairs as InfoS does.
		klog.WarningDepth(depth, formatKV(msg, kv, errField))
	default:
		klog.ErrorSDepth(depth, errField, msg, kv...)
	}
	return nil
}

func (c *klogCore) Sync() error {
	klog.Flush()
	return nil
}

// keysAndValues encodes zap fields as klog's alternating keys and values,
// sorted by key. A field named "error" is taken out into *errField, for
// klog's err argument.
func keysAndValues(fields []zapcore.Field, errField *error) []any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		if f.Type == zapcore.ErrorType && f.Key == "error" {
			if err, ok := f.Interface.(error); ok {
				*errField = err
				continue
			}
		}
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kv := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		kv = append(kv, k, enc.Fields[k])
	}
	return kv
}

// formatKV renders a message and pairs the way klog's text format renders
// InfoS: "msg" key="value" key=1 err="..."; strings, errors and Stringers
// (durations, times) are quoted.
func formatKV(msg string, kv []any, err error) string {
	var b strings.Builder
	b.WriteString(strconv.Quote(msg))
	if err != nil {
		kv = append(kv, "err", err.Error())
	}
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %s=", kv[i])
		switch v := kv[i+1].(type) {
		case string:
			b.WriteString(strconv.Quote(v))
		case error:
			b.WriteString(strconv.Quote(v.Error()))
		case fmt.Stringer:
			b.WriteString(strconv.Quote(v.String()))
		default:
			fmt.Fprintf(&b, "%+v", v)
		}
	}
	return b.String()
}

// callerDepth returns klog's depth argument for a call from Write: the
// frames between Write and the first caller outside zap, so that klog's
// file:line names the code that logged rather than this bridge.
func callerDepth() int {
	var pcs [32]uintptr
	// Skip runtime.Callers, callerDepth and Write.
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	depth := 1
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "go.uber.org/zap.") && !strings.HasPrefix(f.Function, "go.uber.org/zap/") {
			return depth
		}
		if !more {
			return 0
		}
		depth++
	}
}
