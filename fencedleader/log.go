package fencedleader

import (
	"github.com/go-logr/logr"
	"go.uber.org/zap"
)

// zapSink passes client-go's leader-election log to zap: its info lines at
// debug level (the Leader logs the transitions), its errors as warnings.
type zapSink struct {
	log *zap.Logger
}

func (s *zapSink) Init(logr.RuntimeInfo) {}
func (s *zapSink) Enabled(int) bool      { return s.log.Core().Enabled(zap.DebugLevel) }
func (s *zapSink) Info(_ int, msg string, kv ...any) {
	s.log.Debug(msg, zap.Any("client_go", kv))
}

func (s *zapSink) Error(err error, msg string, kv ...any) {
	s.log.Warn(msg, zap.Error(err), zap.Any("client_go", kv))
}
func (s *zapSink) WithValues(kv ...any) logr.LogSink {
	return &zapSink{log: s.log.With(zap.Any("client_go", kv))}
}
func (s *zapSink) WithName(string) logr.LogSink { return s }
