package hcloudscale

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/config"
)

// DefaultReloadInterval is the shortest time between two reads of the
// configuration file ([WithReload]).
const DefaultReloadInterval = 5 * time.Second

// reloadRetry is how long a valid configuration that the API checks
// refused (a firewall that does not exist yet, the API unreachable) waits
// before Refresh tries it again; a change of the file is tried at once.
const reloadRetry = time.Minute

// LoadFunc turns the content of a configuration file into a validated
// configuration, reporting every problem at once: for the environment
// variables and --nodes specs of [config.Load], read it with an
// [config.Env] whose ReadFile returns data for the file's path.
type LoadFunc func(data []byte) (*config.Config, error)

// WithReload makes [Cluster.Refresh] re-read the configuration file at
// path (at most every [DefaultReloadInterval], see [WithReloadInterval])
// and apply it with [Cluster.Reconfigure] when its content changed.
//
// The file is read by its path each time and compared by the SHA-256 of
// its content, not by its modification time or inode: a Kubernetes
// ConfigMap volume replaces its files by swapping the ..data symlink of
// the directory, which this follows, and a file seen half-written fails to
// load and is tried again once its content changes. Content that does not
// load, or that Reconfigure refuses, changes nothing: the running
// configuration stays, the problems are logged once per content (all of
// them), and [Cluster.ReloadStatus] and the metrics
// hcloudscale_config_reload_success and hcloudscale_config_info say that
// the running configuration is not the file's.
func WithReload(path string, load LoadFunc) Option {
	return func(o *options) { o.reloadPath, o.reloadLoad = path, load }
}

// WithConfigFileReload is [WithReload] for a configuration that
// config.Load(env, nodeSpecs) returned: when it was read from
// HCLOUD_CLUSTER_CONFIG_FILE, that file is reloaded with the same
// environment variables and --nodes specs. For a configuration of another
// source it returns nil, which New ignores.
func WithConfigFileReload(env config.Env, nodeSpecs []string, cfg *config.Config) Option {
	if cfg == nil || cfg.Source != config.SourceClusterConfigFile {
		return nil
	}
	path := env.Get(config.EnvClusterConfigFile)
	specs := slices.Clone(nodeSpecs)
	return WithReload(path, func(data []byte) (*config.Config, error) {
		return config.Load(env.WithFile(path, data), specs)
	})
}

// WithReloadInterval sets the shortest time between two reads of the file
// of [WithReload] ([DefaultReloadInterval]).
func WithReloadInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.reloadInterval = d
		}
	}
}

// ReloadStatus says whether the configuration a Cluster runs is the
// content of its configuration file ([WithReload]).
type ReloadStatus struct {
	// Path is the file; empty without WithReload.
	Path string
	// FileSHA256 is the hash of the file's content as last read, and
	// RunningSHA256 of the content the running configuration was loaded
	// from; empty until known. The configuration given to New counts as
	// the file's content read at the first Refresh if it is equal to it.
	FileSHA256, RunningSHA256 string
	// Current is true when the running configuration is the file's.
	Current bool
	// Err is why it is not: the file could not be read, did not load, or
	// Reconfigure refused it.
	Err error
	// Checked is when the file was last read; Applied when a content of
	// it was last applied (zero: never since New).
	Checked, Applied time.Time
}

// reloader is the state of WithReload.
type reloader struct {
	path     string
	load     LoadFunc
	interval time.Duration

	mu sync.Mutex // serialises reloads; guards seen, pending, retryAfter, refusedLogged
	// seen is the hash of the content last read; pending the valid
	// configuration read from it and not yet applied.
	seen       string
	pending    *config.Config
	retryAfter time.Time
	// refusedLogged is the hash of the last content whose refusal by
	// Reconfigure was logged: each refused content is logged once, also
	// when its error reads as the one before.
	refusedLogged string

	// statusMu guards status, which readers (metrics scrapes) get
	// without waiting for a reload's API checks.
	statusMu sync.Mutex
	status   ReloadStatus
}

// update changes the status under statusMu.
func (r *reloader) update(f func(st *ReloadStatus)) {
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	f(&r.status)
}

// current returns a copy of the status.
func (r *reloader) current() ReloadStatus {
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	return r.status
}

// registerReload sets up WithReload and its metrics.
func (c *Cluster) registerReload(o *options) error {
	if o.reloadPath == "" {
		return nil
	}
	if o.reloadLoad == nil {
		return errors.New("WithReload: load function is nil")
	}
	c.reload = &reloader{path: o.reloadPath, load: o.reloadLoad, interval: o.reloadInterval, status: ReloadStatus{Path: o.reloadPath}}
	unregister, err := registerReloadMetrics(o.registerer, c)
	if err != nil {
		return err
	}
	prev := c.unregister
	c.unregister = func() { prev(); unregister() }
	return nil
}

// ReloadStatus returns the state of the configuration file of
// [WithReload]; the zero ReloadStatus without it.
func (c *Cluster) ReloadStatus() ReloadStatus {
	r := c.reload
	if r == nil {
		return ReloadStatus{}
	}
	return r.current()
}

// reloadIfChanged reads the file when the interval has passed and applies
// a new valid content. Calls that find another one at work return at
// once: the next Refresh comes soon.
func (c *Cluster) reloadIfChanged(ctx context.Context) {
	r := c.reload
	if r == nil || !r.mu.TryLock() {
		return
	}
	defer r.mu.Unlock()
	now := c.opts.clock.Now()
	checked := r.current().Checked
	due := checked.IsZero() || now.Sub(checked) >= r.interval
	if !due && r.pending == nil {
		return
	}
	log := c.log.With(zap.String("file", r.path))
	if due {
		r.update(func(st *ReloadStatus) { st.Checked = now })
		r.read(log)
	}
	if r.pending == nil || now.Before(r.retryAfter) {
		return
	}
	cfg := r.pending
	if reflect.DeepEqual(cfg, c.Config()) {
		// Typically the first read: the file holds what New was given.
		r.applied(now)
		return
	}
	if err := c.Reconfigure(ctx, cfg); err != nil {
		r.retryAfter = now.Add(reloadRetry)
		r.update(func(st *ReloadStatus) { st.Current, st.Err = false, err })
		if r.refusedLogged != r.seen {
			r.refusedLogged = r.seen
			log.Error("configuration file not applied; the running configuration stays. "+restartRisk, zap.String("sha256", r.seen), zap.Error(err))
		}
		return
	}
	r.applied(now)
	if w := c.Warnings(); len(w) > 0 {
		log.Warn("configuration file applied with warnings: check that it does what was meant", zap.String("sha256", r.seen), zap.Strings("warnings", w))
		return
	}
	log.Info("configuration file applied", zap.String("sha256", r.seen))
}

// restartRisk ends the log line of a file that does not load or is
// refused: the next start reads the same file.
const restartRisk = "A restart (rollout, eviction, crash) would read this file and fail to start: fix or revert it"

// read reads the file and, when its content changed, loads it. r.mu must
// be held.
func (r *reloader) read(log *zap.Logger) {
	data, err := os.ReadFile(r.path)
	if err != nil {
		if prev := r.current().Err; prev == nil || prev.Error() != err.Error() {
			log.Error("reading the configuration file; the running configuration stays", zap.Error(err))
		}
		// Whatever the file holds when it can be read again is looked at
		// afresh.
		r.seen, r.pending = "", nil
		r.update(func(st *ReloadStatus) { st.Err, st.Current = err, false })
		return
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	if hash == r.seen {
		return
	}
	r.seen = hash
	r.pending, r.retryAfter = nil, time.Time{}
	running := false
	r.update(func(st *ReloadStatus) {
		st.FileSHA256 = hash
		if hash == st.RunningSHA256 {
			// Back to what runs, say after a broken edit was undone.
			st.Current, st.Err, running = true, nil, true
		}
	})
	if running {
		return
	}
	cfg, err := r.load(data)
	if err != nil {
		r.update(func(st *ReloadStatus) { st.Current, st.Err = false, err })
		log.Error("configuration file does not load; the running configuration stays. "+restartRisk, zap.String("sha256", hash), zap.Error(err))
		return
	}
	r.pending = cfg
}

// applied records that the pending content runs. r.mu must be held.
func (r *reloader) applied(now time.Time) {
	r.pending = nil
	r.update(func(st *ReloadStatus) {
		st.RunningSHA256, st.Current, st.Err, st.Applied = r.seen, true, nil, now
	})
}

// reloadCollector exports the reload state at scrape time.
type reloadCollector struct {
	success, last, info, refused *prometheus.Desc

	mu     sync.Mutex // guards source
	source *Cluster
}

func (c *reloadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.success
	ch <- c.last
	ch <- c.info
	ch <- c.refused
}

func (c *reloadCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	source := c.source
	c.mu.Unlock()
	if source == nil {
		return
	}
	st := source.ReloadStatus()
	ok, last := 0.0, 0.0
	if st.Current || (st.Err == nil && st.FileSHA256 == "") {
		ok = 1
	}
	if !st.Applied.IsZero() {
		last = float64(st.Applied.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(c.success, prometheus.GaugeValue, ok)
	ch <- prometheus.MustNewConstMetric(c.last, prometheus.GaugeValue, last)
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, st.Path, st.FileSHA256, st.RunningSHA256)
	refused := 0.0
	if st.Err != nil && st.FileSHA256 != "" && !st.Current {
		refused = 1
	}
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.GaugeValue, refused)
}

// registerReloadMetrics registers the reload metrics for source, or takes
// over the collector an earlier Cluster registered on reg.
func registerReloadMetrics(reg prometheus.Registerer, source *Cluster) (func(), error) {
	if reg == nil {
		return func() {}, nil
	}
	c := &reloadCollector{
		success: prometheus.NewDesc("hcloudscale_config_reload_success",
			"1 when the running configuration is the configuration file's content, 0 when the file's last content could not be read, did not load or was refused.", nil, nil),
		last: prometheus.NewDesc("hcloudscale_config_last_reload_timestamp_seconds",
			"Unix time the configuration file's content was last applied; 0: not since the start.", nil, nil),
		refused: prometheus.NewDesc("hcloudscale_config_file_refused",
			"1 when the configuration file's content does not load or was refused: the running configuration stays, but a restart would read the file and fail to start.", nil, nil),
		info: prometheus.NewDesc("hcloudscale_config_info",
			"The configuration file, the SHA-256 of its content as last read and of the content that runs.", []string{"file", "file_sha256", "running_sha256"}, nil),
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		existing, ok := (*reloadCollector)(nil), false
		if errors.As(err, &are) {
			existing, ok = are.ExistingCollector.(*reloadCollector)
		}
		if !ok {
			return nil, err
		}
		c = existing
	}
	c.mu.Lock()
	c.source = source
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.source == source {
			c.source = nil
		}
	}, nil
}
