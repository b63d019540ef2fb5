package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The environment variables Load reads. All but HCLOUD_TOKEN_FILE and
// HCLOUD_CLUSTER_NAME are those of the upstream Hetzner provider.
const (
	EnvToken                 = "HCLOUD_TOKEN"
	EnvTokenFile             = "HCLOUD_TOKEN_FILE"
	EnvEndpoint              = "HCLOUD_ENDPOINT"
	EnvClusterConfig         = "HCLOUD_CLUSTER_CONFIG"
	EnvClusterConfigFile     = "HCLOUD_CLUSTER_CONFIG_FILE"
	EnvCloudInit             = "HCLOUD_CLOUD_INIT"
	EnvImage                 = "HCLOUD_IMAGE"
	EnvNetwork               = "HCLOUD_NETWORK"
	EnvFirewall              = "HCLOUD_FIREWALL"
	EnvSSHKey                = "HCLOUD_SSH_KEY"
	EnvPublicIPv4            = "HCLOUD_PUBLIC_IPV4"
	EnvPublicIPv6            = "HCLOUD_PUBLIC_IPV6"
	EnvServerCreationTimeout = "HCLOUD_SERVER_CREATION_TIMEOUT"
	EnvClusterName           = "HCLOUD_CLUSTER_NAME"
	// EnvEndpointInsecure=true allows an http:// HCLOUD_ENDPOINT on a host
	// that is not loopback. Upstream accepted any URL.
	EnvEndpointInsecure = "HCLOUD_ENDPOINT_INSECURE"
)

// EnvNames returns the names of every environment variable Load reads, so
// that a program that points another at a configuration of its own can
// clear the others a shell may hold.
func EnvNames() []string {
	return []string{
		EnvToken, EnvTokenFile, EnvEndpoint, EnvEndpointInsecure, EnvClusterConfig, EnvClusterConfigFile,
		EnvCloudInit, EnvImage, EnvNetwork, EnvFirewall, EnvSSHKey, EnvPublicIPv4, EnvPublicIPv6,
		EnvServerCreationTimeout, EnvClusterName,
	}
}

// Env is where Load reads the environment and files from.
//
// A nil Lookup is an empty environment. A nil ReadFile makes every file
// setting (HCLOUD_TOKEN_FILE, HCLOUD_CLUSTER_CONFIG_FILE) an error, so that
// a caller that meant to forbid file access gets a clear message.
type Env struct {
	Lookup   func(name string) (string, bool)
	ReadFile func(path string) ([]byte, error)
}

// OSEnv is the process environment and file system. It reads at most
// [MaxFileBytes] (and one byte more, to tell that a file is larger) of a
// file.
func OSEnv() Env {
	return Env{Lookup: os.LookupEnv, ReadFile: readFileCapped}
}

func readFileCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
}

// MapEnv is an environment made of vars and files (path to content), for
// tests and for programs that take settings from elsewhere.
func MapEnv(vars map[string]string, files map[string]string) Env {
	return Env{
		Lookup: func(name string) (string, bool) {
			v, ok := vars[name]
			return v, ok
		},
		ReadFile: func(path string) ([]byte, error) {
			c, ok := files[path]
			if !ok {
				return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
			}
			return []byte(c), nil
		},
	}
}

// WithFile returns e with the file at path reading as data, whatever the
// file system holds: to load a configuration file whose content was read
// already, as a reload does.
func (e Env) WithFile(path string, data []byte) Env {
	read := e.ReadFile
	e.ReadFile = func(p string) ([]byte, error) {
		if p == path {
			return data, nil
		}
		if read == nil {
			return nil, errors.New("reading files is not enabled (Env.ReadFile is nil)")
		}
		return read(p)
	}
	return e
}

// Get returns the variable name as Load reads it: surrounding whitespace
// removed, "" when unset.
func (e Env) Get(name string) string { return e.get(name) }

// get returns a variable with surrounding whitespace removed; empty counts
// as unset, as upstream.
func (e Env) get(name string) string {
	if e.Lookup == nil {
		return ""
	}
	v, _ := e.Lookup(name)
	return strings.TrimSpace(v)
}

func (e Env) readFile(path string) ([]byte, error) {
	if e.ReadFile == nil {
		return nil, errors.New("reading files is not enabled (Env.ReadFile is nil)")
	}
	data, err := e.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("file %q is larger than %d MiB, far more than a cluster config or a token needs: check the path", path, MaxFileBytes>>20)
	}
	return data, nil
}

// LoadFromOS is [Load] with the process environment and file system.
func LoadFromOS(nodeSpecs []string) (*Config, error) {
	return Load(OSEnv(), nodeSpecs)
}

// Load reads the environment and the --nodes specs, and returns a validated
// Config with Warnings filled in, or an error that joins every problem
// found, each a [*FieldError] naming its variable, flag or JSON path.
func Load(env Env, nodeSpecs []string) (*Config, error) {
	var p problems
	defaults := Defaults()
	cfg := &defaults
	cfg.Token = p.token(env)
	cfg.EndpointInsecure = p.boolVar(env, EnvEndpointInsecure, false)
	if v := env.get(EnvEndpoint); v != "" {
		u, err := parseEndpoint(v, cfg.EndpointInsecure)
		p.add(EnvEndpoint, err)
		cfg.Endpoint = u
		if err == nil && cfg.EndpointInsecure && strings.HasPrefix(u, "http:") && !isLoopback(hostOf(u)) {
			p.warnf(EnvEndpoint, "%s uses http and %s=true: the API token travels in clear to %s; use it only inside a trusted network", u, EnvEndpointInsecure, hostOf(u))
		}
	}
	if v := env.get(EnvNetwork); v != "" {
		p.add(EnvNetwork, checkReference(v))
		cfg.Network = v
	}
	cfg.Firewalls = p.list(EnvFirewall, env.get(EnvFirewall))
	cfg.SSHKeys = p.list(EnvSSHKey, env.get(EnvSSHKey))
	cfg.PublicIPv4 = p.boolVar(env, EnvPublicIPv4, DefaultPublicIPv4)
	cfg.PublicIPv6 = p.boolVar(env, EnvPublicIPv6, DefaultPublicIPv6)
	if v := env.get(EnvServerCreationTimeout); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n == 0 {
			// Upstream's meaning of 0; a negative value stays an error.
			p.warnf(EnvServerCreationTimeout, "0 means the default, %v, as upstream", DefaultCreationTimeout)
		} else {
			d, err := ParseCreationTimeout(v)
			p.add(EnvServerCreationTimeout, err)
			cfg.CreationTimeout = d
		}
	}
	if v := env.get(EnvImage); v != "" {
		p.add(EnvImage, CheckImageSpec(ImageSpec(v)))
		cfg.DefaultImage = ImageSpec(v)
	}
	envClusterName := env.get(EnvClusterName)
	if envClusterName != "" {
		p.add(EnvClusterName, CheckClusterName(envClusterName))
	}
	cfg.ClusterName = envClusterName

	specs, origins := p.nodeSpecs(nodeSpecs)

	cc, legacyCloudInit := p.source(env, cfg)
	if cc != nil {
		p.clusterWide(cfg, cc, envClusterName)
	}
	cfg.Pools = p.pools(cfg, cc, legacyCloudInit, specs, origins)
	p.reachable(cfg, cc)
	jsonMode := cfg.Source == SourceClusterConfig || cfg.Source == SourceClusterConfigFile
	if len(nodeSpecs) == 0 && len(cfg.Pools) == 0 && (!jsonMode || cc != nil && !cc.declaresPools()) {
		p.addf("--nodes", "no pools: give at least one --nodes=%s, or declare pools in the cluster config (nodeConfigs.<pool> with serverType, location and maxSize)", NodeSpecFormat)
	}
	p.upstreamImages(cfg, cc, env.get(EnvImage) != "")

	if len(p.errs) > 0 {
		return nil, p.err()
	}
	cfg.Warnings = p.warnings
	// Every check above names the input at fault; Validate runs on the
	// result as well so that Load can never return what Validate rejects.
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// clusterWide takes the cluster config's cluster-wide settings into cfg:
// its cluster name (which must agree with HCLOUD_CLUSTER_NAME), images,
// default subnet range and replace object.
func (p *problems) clusterWide(cfg *Config, cc *ClusterConfig, envClusterName string) {
	if cc.ClusterName != "" {
		if envClusterName != "" && envClusterName != cc.ClusterName {
			p.addf("clusterName", "%q differs from %s=%q", cc.ClusterName, EnvClusterName, envClusterName)
		}
		cfg.ClusterName = cc.ClusterName
	}
	if cc.ImagesForArch != nil {
		cfg.Images = *cc.ImagesForArch
	}
	cfg.DefaultSubnetIPRange = cc.DefaultSubnetIPRange
	if cc.Replace != nil {
		cfg.Replace = *cc.Replace
		cfg.Replace.Windows = slices.Clone(cc.Replace.Windows)
	}
}

// token reads HCLOUD_TOKEN or HCLOUD_TOKEN_FILE. Both may be set when they
// agree, which eases moving from one to the other.
func (p *problems) token(env Env) Secret {
	tok := env.get(EnvToken)
	if path := env.get(EnvTokenFile); path != "" {
		data, err := env.readFile(path)
		if err != nil {
			p.add(EnvTokenFile, err)
			return ""
		}
		fromFile := strings.TrimSpace(string(data))
		switch {
		case fromFile == "":
			p.addf(EnvTokenFile, "file %q is empty", path)
			return ""
		case tok != "" && tok != fromFile:
			p.addf(EnvToken+", "+EnvTokenFile, "both set to different tokens; set one")
			return ""
		}
		tok = fromFile
		if err := checkNoSpace(tok); err != nil {
			p.addf(EnvTokenFile, "token in %q %w", path, err)
			return ""
		}
		return Secret(tok)
	}
	if tok == "" {
		p.addf(EnvToken, "required (or %s)", EnvTokenFile)
		return ""
	}
	if err := checkNoSpace(tok); err != nil {
		p.addf(EnvToken, "token %w", err)
		return ""
	}
	return Secret(tok)
}

// ParseEndpoint checks an API base URL: https, or http for a loopback host
// (a local fake API); no user info, query or fragment. A trailing "/" is
// removed.
func ParseEndpoint(s string) (string, error) {
	return parseEndpoint(s, false)
}

// hostOf returns the host name of a URL that parsed before.
func hostOf(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// parseEndpoint is ParseEndpoint; insecure also allows http for any host.
func parseEndpoint(s string, insecure bool) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL", s)
	}
	if u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("%q is not an absolute URL such as %s", s, DefaultEndpoint)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("%q may not have user info, a query or a fragment", u.Redacted())
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !insecure && !isLoopback(u.Hostname()) {
			return "", fmt.Errorf("%q uses http: the token would travel unencrypted; use https, or set %s=true if this endpoint is a proxy inside a trusted network", s, EnvEndpointInsecure)
		}
	default:
		return "", fmt.Errorf("%q: scheme must be https", s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// list splits a comma-separated variable: entries trimmed, empty ones
// dropped, repeats removed, order kept.
func (p *problems) list(name, v string) []string {
	var out []string
	seen := map[string]bool{}
	for i, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" || seen[e] {
			continue
		}
		if err := checkReference(e); err != nil {
			p.add(indexPath(name, i), err)
			continue
		}
		seen[e] = true
		out = append(out, e)
	}
	return out
}

func (p *problems) boolVar(env Env, name string, def bool) bool {
	v := env.get(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.addf(name, "%q is not a boolean (true, false, 1, 0, ...)", v)
		return def
	}
	return b
}

// ParseCreationTimeout parses HCLOUD_SERVER_CREATION_TIMEOUT: whole minutes
// as upstream ("10"), or a Go duration ("90s", "1h30m"); it must be
// positive and at most 24 hours. Upstream silently used 5 minutes for
// anything it could not parse and accepted negative values.
func ParseCreationTimeout(s string) (time.Duration, error) {
	var d time.Duration
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 {
			return 0, fmt.Errorf("%d minutes is not positive", n)
		}
		if n > int(maxCreationTimeout/time.Minute) {
			return 0, fmt.Errorf("%d minutes is more than %v", n, maxCreationTimeout)
		}
		d = time.Duration(n) * time.Minute
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, fmt.Errorf("%q is neither whole minutes (5) nor a duration (90s, 10m)", s)
	}
	switch {
	case d <= 0:
		return 0, fmt.Errorf("%q is not positive", s)
	case d > maxCreationTimeout:
		return 0, fmt.Errorf("%q is more than %v", s, maxCreationTimeout)
	}
	return d, nil
}

// maxCreationTimeout bounds the create flow of one server: even images
// copied between locations take minutes, so a longer value is a unit
// mistake, such as seconds written where minutes are meant.
const maxCreationTimeout = 24 * time.Hour

// nodeSpecs parses the --nodes values and rejects repeated pool names,
// which upstream resolved by silently dropping the earlier pool. It
// returns the specs that parsed and the setting each comes from.
func (p *problems) nodeSpecs(values []string) ([]NodeSpec, []string) {
	var specs []NodeSpec
	var origins []string
	first := map[string]int{}
	for i, v := range values {
		path := nodeSpecPath(i, v)
		spec, err := ParseNodeSpec(v)
		if err != nil {
			p.add(path, err)
			continue
		}
		if j, dup := first[spec.Name]; dup {
			p.addf(path, "pool name %q is already used by --nodes[%d]", spec.Name, j)
			continue
		}
		first[spec.Name] = i
		if spec.MaxSize == 0 {
			p.warnf(path, "max size 0: the pool is parked and never scaled up")
		}
		specs = append(specs, spec)
		origins = append(origins, path)
	}
	return specs, origins
}

// nodeSpecPath names the i-th --nodes value and, when it has one, the pool
// it names.
func nodeSpecPath(i int, value string) string {
	if f := strings.SplitN(value, ":", 5); len(f) == 5 {
		return PoolSetting(i, f[4])
	}
	return PoolSetting(i, "")
}

// PoolSetting names the setting of the i-th pool, named name, as the
// --nodes flag that configures it: "--nodes[3] (workers)", so that a
// problem is found among many pools; "--nodes[3]" without a name.
func PoolSetting(i int, name string) string {
	path := indexPath("--nodes", i)
	if name != "" {
		path += " (" + name + ")"
	}
	return path
}

// CloudInitSetting names the setting a pool's cloud-init comes from, for
// messages: nodeConfigs.<pool>.cloudInit of a cluster config, or
// HCLOUD_CLOUD_INIT in the legacy format.
func CloudInitSetting(cfg *Config, pool string) string {
	if cfg.Source == SourceLegacyCloudInit {
		return EnvCloudInit
	}
	return childPath(childPath("nodeConfigs", pool), "cloudInit")
}

// source picks the configuration source with upstream's precedence. It
// returns the cluster config, or in the legacy format nil and the
// HCLOUD_CLOUD_INIT user data.
func (p *problems) source(env Env, cfg *Config) (*ClusterConfig, Secret) {
	ignored := func(used string, names ...string) {
		var set []string
		for _, n := range names {
			if env.get(n) != "" {
				set = append(set, n)
			}
		}
		if len(set) > 0 {
			p.warnf(used, "used; %s set but ignored", strings.Join(set, " and "))
		}
	}
	var (
		data []byte
		err  error
	)
	switch {
	case env.get(EnvClusterConfig) != "":
		cfg.Source = SourceClusterConfig
		ignored(EnvClusterConfig, EnvClusterConfigFile, EnvCloudInit)
		if data, err = decodeBase64(env.get(EnvClusterConfig)); err != nil {
			p.add(EnvClusterConfig, err)
			return nil, ""
		}
	case env.get(EnvClusterConfigFile) != "":
		cfg.Source = SourceClusterConfigFile
		ignored(EnvClusterConfigFile, EnvCloudInit)
		if data, err = env.readFile(env.get(EnvClusterConfigFile)); err != nil {
			p.add(EnvClusterConfigFile, err)
			return nil, ""
		}
		if looksBase64JSON(data) {
			p.addf(EnvClusterConfigFile, "file %q holds base64 text, not JSON: the file takes plain JSON, so decode it (base64 -d), or pass the base64 text in %s",
				env.get(EnvClusterConfigFile), EnvClusterConfig)
			return nil, ""
		}
	case env.get(EnvCloudInit) != "":
		cfg.Source = SourceLegacyCloudInit
		ci, err := decodeBase64(env.get(EnvCloudInit))
		if err != nil {
			p.add(EnvCloudInit, err)
			return nil, ""
		}
		p.add(EnvCloudInit, checkCloudInit(string(ci)))
		return nil, Secret(ci)
	default:
		p.addf(EnvClusterConfig, "none of %s, %s or %s is set", EnvClusterConfig, EnvClusterConfigFile, EnvCloudInit)
		return nil, ""
	}
	cc, err := p.clusterConfig(data)
	if err != nil {
		p.add(string(cfg.Source), err)
		return nil, ""
	}
	return cc, ""
}

// looksBase64JSON reports data that is base64 of a JSON object, the usual
// mistake of giving a file what HCLOUD_CLUSTER_CONFIG takes.
func looksBase64JSON(data []byte) bool {
	s := strings.TrimSpace(string(data))
	if s == "" || s[0] == '{' {
		return false
	}
	dec, err := base64.StdEncoding.DecodeString(s)
	return err == nil && strings.HasPrefix(strings.TrimSpace(string(dec)), "{")
}

// decodeBase64 decodes standard base64; line breaks are ignored, as
// upstream. Plain JSON gets a hint, since it is the usual mistake.
func decodeBase64(s string) ([]byte, error) {
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if strings.HasPrefix(s, "{") {
			return nil, fmt.Errorf("not base64 (it looks like plain JSON: encode it, or put it in a file and use %s)", EnvClusterConfigFile)
		}
		return nil, fmt.Errorf("not base64: %w", err)
	}
	return data, nil
}
