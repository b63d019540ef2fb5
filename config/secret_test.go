package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestSecretRedaction(t *testing.T) {
	const value = "s3cr3t-value"
	s := Secret(value)
	tests := []struct {
		name string
		got  func() string
		want string
	}{
		{"%v", func() string { return fmt.Sprintf("%v", s) }, "[redacted]"},
		{"%s", func() string { return fmt.Sprintf("%s", s) }, "[redacted]"},
		{"%q", func() string { return fmt.Sprintf("%q", s) }, `"[redacted]"`},
		{"%#v", func() string { return fmt.Sprintf("%#v", s) }, `config.Secret("[redacted]")`},
		{"%x", func() string { return fmt.Sprintf("%x", s) }, "[redacted]"},
		{"%d", func() string { return fmt.Sprintf("%d", s) }, "[redacted]"},
		{"%10s", func() string { return fmt.Sprintf("%10s", s) }, "[redacted]"},
		{"String", s.String, "[redacted]"},
		{"json.Marshal", func() string { b, _ := json.Marshal(s); return string(b) }, `"[redacted]"`},
		{"MarshalText", func() string { b, _ := s.MarshalText(); return string(b) }, "[redacted]"},
		{"slog", func() string { return s.LogValue().String() }, "[redacted]"},
		{"empty stays visibly empty", func() string { return fmt.Sprintf("%v|%q", Secret(""), Secret("")) }, `|""`},
		{"Reveal", s.Reveal, value},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.got(); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

// TestConfigOutputHidesSecrets prints and logs a loaded Config in every way
// a caller might and checks that neither the token nor cloud-init leaks.
func TestConfigOutputHidesSecrets(t *testing.T) {
	const (
		token     = "tok3n-do-not-print"
		cloudInit = "#cloud-config\nruncmd: [kubeadm join --token join-s3cret]"
	)
	cc := `{"nodeConfigs":{"pool1":{"cloudInit":` + jsonString(cloudInit) + `}}}`
	cfg, err := Load(MapEnv(map[string]string{
		EnvToken:         token,
		EnvClusterConfig: b64(cc),
	}, nil), []string{"1:2:cx22:fsn1:pool1"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := cfg.Pools[0].CloudInit.Reveal(); got != cloudInit {
		t.Fatalf("cloud-init = %q; want %q", got, cloudInit)
	}

	var zapJSON, zapConsole, slogBuf bytes.Buffer
	for _, enc := range []struct {
		buf *bytes.Buffer
		enc zapcore.Encoder
	}{
		{&zapJSON, zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())},
		{&zapConsole, zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())},
	} {
		log := zap.New(zapcore.NewCore(enc.enc, zapcore.AddSync(enc.buf), zap.DebugLevel))
		log.Info("config", zap.Any("config", cfg), zap.Any("pool", cfg.Pools[0]), zap.Stringer("token", cfg.Token),
			zap.Reflect("reflected", cfg), zap.Any("cloud_init", cfg.Pools[0].CloudInit))
	}
	slog.New(slog.NewJSONHandler(&slogBuf, nil)).Info("config", "config", cfg, "token", cfg.Token)
	jsonOut, err := json.Marshal(cfg)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}

	outputs := map[string]string{
		"%v":           fmt.Sprintf("%v", cfg),
		"%+v":          fmt.Sprintf("%+v", cfg),
		"%#v":          fmt.Sprintf("%#v", cfg),
		"%+v of *cfg":  fmt.Sprintf("%+v", *cfg),
		"%v of pool":   fmt.Sprintf("%v", cfg.Pools[0]),
		"json.Marshal": string(jsonOut),
		"zap JSON":     zapJSON.String(),
		"zap console":  zapConsole.String(),
		"slog JSON":    slogBuf.String(),
	}
	for name, out := range outputs {
		for _, secret := range []string{token, "join-s3cret", "cloud-config"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s output contains %q:\n%s", name, secret, out)
			}
		}
		if !strings.Contains(out, "[redacted]") {
			t.Errorf("%s output lacks the [redacted] marker, so the test proves nothing:\n%s", name, out)
		}
	}
}
