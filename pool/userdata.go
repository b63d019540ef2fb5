package pool

import (
	"fmt"

	"github.com/hcloudscale/hcloudscale/cloudinit"
	"github.com/hcloudscale/hcloudscale/config"
)

// CodeCloudInit: the pool's cloud-init template did not render for the
// server, or its rendering exceeds the user-data limit. config.Load and
// config.Config.Validate find both before a pool starts.
const CodeCloudInit = "cloud-init"

// parseCloudInit parses the pool's cloud-init template, or returns nil
// when its cloudInit is not one.
func parseCloudInit(cfg *config.Pool) (*cloudinit.Template, error) {
	if !cfg.CloudInitTemplate {
		return nil, nil
	}
	t, err := cloudinit.Parse(cfg.CloudInit.Reveal())
	if err != nil {
		return nil, fmt.Errorf("cloudInit template: %w", err)
	}
	return t, nil
}

// userData is the user data of a new server: the pool's cloudInit as
// written, or its template rendered for the server. Neither ever reaches
// a log, an error or a metric.
func (p *Pool) userData(set *settings, server string, arch config.Arch) (string, error) {
	if set.cloudInit == nil {
		return set.cfg.CloudInit.Reveal(), nil
	}
	out, err := set.cloudInit.Render(config.CloudInitValues(&set.cfg, p.opts.clusterName, server, arch))
	if err != nil {
		return "", &infoError{ErrorInfo{Class: Other, Code: CodeCloudInit,
			Message: fmt.Sprintf("cloud-init template of pool %s: %v", p.cfg.Name, err)}}
	}
	if len(out) > config.MaxCloudInitBytes {
		return "", &infoError{ErrorInfo{Class: Other, Code: CodeCloudInit,
			Message: fmt.Sprintf("cloud-init of pool %s rendered for %s is %d bytes, Hetzner accepts at most %d", p.cfg.Name, server, len(out), config.MaxCloudInitBytes)}}
	}
	return out, nil
}
