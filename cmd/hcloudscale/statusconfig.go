package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hcloudscale/hcloudscale/config"
)

// configStatus says whether a running serve runs the configuration file
// status reads: serve reloads HCLOUD_CLUSTER_CONFIG_FILE when it changes,
// and a file that does not load or is refused leaves it on the last good
// one.
type configStatus struct {
	File       string `json:"file"`
	FileSHA256 string `json:"fileSHA256"`
	// RunningSHA256 is the hash of the content serve runs and
	// ServeFileSHA256 of the file as serve last read it, from its metrics.
	RunningSHA256   string `json:"runningSHA256,omitempty"`
	ServeFileSHA256 string `json:"serveFileSHA256,omitempty"`
	// ReloadSuccess is serve's hcloudscale_config_reload_success.
	ReloadSuccess *bool `json:"reloadSuccess,omitempty"`
	// Standby is true when that serve does not lead (hcloudscale_leader
	// 0): a standby neither reloads the file nor runs the configuration
	// that scales, so it says nothing about the leader's.
	Standby bool `json:"standby,omitempty"`
	// Current is true when serve runs this file's content.
	Current bool   `json:"current"`
	Error   string `json:"error,omitempty"`
}

var configInfoLine = regexp.MustCompile(`^hcloudscale_config_info\{(.*)\} `)
var labelPair = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// readConfigStatus hashes the configuration file of env and compares it
// with what the serve whose /metrics is at metricsURL runs.
func readConfigStatus(ctx context.Context, env config.Env, metricsURL string) *configStatus {
	path := env.Get(config.EnvClusterConfigFile)
	st := &configStatus{File: path}
	if path == "" || env.ReadFile == nil {
		st.Error = config.EnvClusterConfigFile + " is not set: serve reloads only a configuration file"
		return st
	}
	data, err := env.ReadFile(path)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	sum := sha256.Sum256(data)
	st.FileSHA256 = hex.EncodeToString(sum[:])

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		st.Error = "reading serve's metrics: " + err.Error()
		return st
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		st.Error = fmt.Sprintf("reading serve's metrics: status %d, %v", resp.StatusCode, err)
		return st
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "hcloudscale_config_reload_success "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				ok := f == 1
				st.ReloadSuccess = &ok
			}
		}
		if v, ok := strings.CutPrefix(line, "hcloudscale_leader "); ok && strings.TrimSpace(v) == "0" {
			st.Standby = true
		}
		if m := configInfoLine.FindStringSubmatch(line); m != nil {
			for _, kv := range labelPair.FindAllStringSubmatch(m[1], -1) {
				switch kv[1] {
				case "running_sha256":
					st.RunningSHA256 = kv[2]
				case "file_sha256":
					st.ServeFileSHA256 = kv[2]
				}
			}
		}
	}
	if st.ReloadSuccess == nil {
		st.Error = "serve's metrics have no hcloudscale_config_reload_success: it does not reload a configuration file"
		return st
	}
	st.Current = st.RunningSHA256 != "" && st.RunningSHA256 == st.FileSHA256
	return st
}

func printConfigStatus(w io.Writer, st *configStatus) {
	if st == nil {
		return
	}
	fmt.Fprintf(w, "\nConfiguration file %s\n", st.File)
	switch {
	case st.Error != "":
		fmt.Fprintf(w, "  unknown whether serve runs it: %s\n", st.Error)
	case st.Standby:
		fmt.Fprintf(w, "  unknown: this serve is a standby (hcloudscale_leader 0), which does not reload the file; ask the leader's /metrics (port-forward to the pod that holds the Lease)\n")
	case st.Current:
		fmt.Fprintf(w, "  serve runs it (sha256 %s)\n", short(st.FileSHA256))
	default:
		fmt.Fprintf(w, "  NOT RUNNING: serve runs sha256 %s, the file is %s", short(st.RunningSHA256), short(st.FileSHA256))
		if st.ReloadSuccess != nil && !*st.ReloadSuccess {
			fmt.Fprint(w, "; its last reload failed, see serve's log for every problem")
		} else if st.ServeFileSHA256 != st.FileSHA256 {
			fmt.Fprint(w, "; serve has not read this content yet (it does at the autoscaler's next Refresh)")
		}
		fmt.Fprintln(w)
	}
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	if hash == "" {
		return "-"
	}
	return hash
}
