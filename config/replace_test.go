package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseReplaceErrors(t *testing.T) {
	const reasons = "want one of server_type, location, image, placement_group, network, firewalls, labels, user_data, offering, node_taints"
	pool := func(replace string) string { return `{"nodeConfigs": {"workers": {"replace": ` + replace + `}}}` }
	tests := []struct {
		name string
		doc  string
		want []problem
	}{
		{"not an object", pool(`true`), []problem{{"nodeConfigs.workers.replace", "want an object, got a boolean"}}},
		{"unknown key", pool(`{"drift": ["image"], "maxSurg": 1}`), []problem{{"nodeConfigs.workers.replace.maxSurg", `unknown key, did you mean "maxSurge"`}}},
		{"drift not an array", pool(`{"drift": "image"}`), []problem{{"nodeConfigs.workers.replace.drift", "want an array, got a string"}}},
		{"drift entry not a string", pool(`{"drift": [1]}`), []problem{{"nodeConfigs.workers.replace.drift[0]", "want a string, got a number"}}},
		{"drift reason unknown", pool(`{"drift": ["image", "kernel"]}`), []problem{{"nodeConfigs.workers.replace.drift[1]", `"kernel" is not a drift reason; ` + reasons}}},
		{"drift reason misspelt", pool(`{"drift": ["imag"]}`), []problem{{"nodeConfigs.workers.replace.drift[0]", `"imag" is not a drift reason, did you mean "image"; ` + reasons}}},
		{"drift reason as written elsewhere", pool(`{"drift": ["cloud-init"]}`), []problem{{"nodeConfigs.workers.replace.drift[0]", `did you mean "user_data"`}}},
		{"drift reason offering as its key is spelt", pool(`{"drift": ["offerings"]}`), []problem{{"nodeConfigs.workers.replace.drift[0]", `"offerings" is not a drift reason, did you mean "offering"`}}},
		{"drift reason twice", pool(`{"drift": ["image", "labels", "image"]}`), []problem{{"nodeConfigs.workers.replace.drift[2]", `"image" is listed twice`}}},
		{"expireAfter not a duration", pool(`{"expireAfter": "30d"}`), []problem{{"nodeConfigs.workers.replace.expireAfter", `"30d" is not a duration such as 720h, 10m or 1h30m (there is no unit d: write 720h for 30 days)`}}},
		{"expireAfter a number", pool(`{"expireAfter": 3600}`), []problem{{"nodeConfigs.workers.replace.expireAfter", "want a string, got a number"}}},
		{"expireAfter zero", pool(`{"expireAfter": "0s"}`), []problem{{"nodeConfigs.workers.replace.expireAfter", "0s is not positive"}}},
		{"expireAfter negative", pool(`{"expireAfter": "-1h"}`), []problem{{"nodeConfigs.workers.replace.expireAfter", "-1h is not positive"}}},
		{"expireAfter too short", pool(`{"expireAfter": "5m"}`), []problem{{"nodeConfigs.workers.replace.expireAfter", "5m is shorter than the minimum 10m"}}},
		{"expireJitter negative", pool(`{"expireAfter": "24h", "expireJitter": "-1m"}`), []problem{{"nodeConfigs.workers.replace.expireJitter", "-1m is negative"}}},
		{"expireJitter above expireAfter", pool(`{"expireAfter": "1h", "expireJitter": "90m"}`), []problem{{"nodeConfigs.workers.replace.expireJitter", "1h30m is above expireAfter 1h"}}},
		{"expireJitter without expireAfter", pool(`{"drift": ["image"], "expireJitter": "1h"}`), []problem{{"nodeConfigs.workers.replace.expireJitter", "set, but expireAfter is not"}}},
		{"maxSurge negative", pool(`{"drift": ["image"], "maxSurge": -1}`), []problem{{"nodeConfigs.workers.replace.maxSurge", "-1 is out of range 0..1000"}}},
		{"maxSurge too large", pool(`{"drift": ["image"], "maxSurge": 1001}`), []problem{{"nodeConfigs.workers.replace.maxSurge", "1001 is out of range 0..1000"}}},
		{"maxSurge fraction", pool(`{"drift": ["image"], "maxSurge": 0.5}`), []problem{{"nodeConfigs.workers.replace.maxSurge", "want an integer, got 0.5"}}},
		{"maxInFlight zero", pool(`{"drift": ["image"], "maxInFlight": 0}`), []problem{{"nodeConfigs.workers.replace.maxInFlight", "0 is out of range 1..1000"}}},
		{"joinTimeout zero", pool(`{"drift": ["image"], "joinTimeout": "0s"}`), []problem{{"nodeConfigs.workers.replace.joinTimeout", "0s is not positive"}}},
		{"drainTimeout negative", pool(`{"drift": ["image"], "drainTimeout": "-5m"}`), []problem{{"nodeConfigs.workers.replace.drainTimeout", "-5m is not positive"}}},
		{"retryAfter unparsable", pool(`{"drift": ["image"], "retryAfter": "soon"}`), []problem{{"nodeConfigs.workers.replace.retryAfter", `"soon" is not a duration`}}},
		{"paused not a boolean", pool(`{"drift": ["image"], "paused": "yes"}`), []problem{{"nodeConfigs.workers.replace.paused", "want true or false, got a string"}}},
		{"windows not an array", pool(`{"drift": ["image"], "windows": {"schedule": "0 2 * * *", "duration": "1h"}}`), []problem{{"nodeConfigs.workers.replace.windows", "want an array, got an object"}}},
		{"window not an object", pool(`{"drift": ["image"], "windows": ["0 2 * * *"]}`), []problem{{"nodeConfigs.workers.replace.windows[0]", "want an object such as"}}},
		{"window without schedule and duration", pool(`{"drift": ["image"], "windows": [{"timeZone": "UTC"}]}`), []problem{
			{"nodeConfigs.workers.replace.windows[0].schedule", "required"}, {"nodeConfigs.workers.replace.windows[0].duration", "required"},
		}},
		{"window schedule malformed", pool(`{"drift": ["image"], "windows": [{"schedule": "0 2 * *", "duration": "1h"}]}`), []problem{{"nodeConfigs.workers.replace.windows[0].schedule", `"0 2 * *": expected exactly 5 fields`}}},
		{"window schedule @every", pool(`{"drift": ["image"], "windows": [{"schedule": "@every 1h", "duration": "1h"}]}`), []problem{{"nodeConfigs.workers.replace.windows[0].schedule", "@every has no fixed start"}}},
		{"window schedule with its own time zone", pool(`{"drift": ["image"], "windows": [{"schedule": "TZ=Europe/Berlin 0 2 * * *", "duration": "1h"}]}`), []problem{{"nodeConfigs.workers.replace.windows[0].schedule", "set the time zone with timeZone"}}},
		{"window schedule of a time zone alone", pool(`{"drift": ["image"], "windows": [{"schedule": "TZ=", "duration": "1h"}, {"schedule": "CRON_TZ=UTC", "duration": "1h"}]}`), []problem{{"nodeConfigs.workers.replace.windows[0].schedule", "set the time zone with timeZone"}, {"nodeConfigs.workers.replace.windows[1].schedule", "set the time zone with timeZone"}}},
		{"window schedule never fires", pool(`{"drift": ["image"], "windows": [{"schedule": "0 0 30 2 *", "duration": "1h"}]}`), []problem{{"nodeConfigs.workers.replace.windows[0].schedule", "never fires"}}},
		{"window schedule not a string", pool(`{"drift": ["image"], "windows": [{"schedule": 2, "duration": "1h"}]}`), []problem{{"nodeConfigs.workers.replace.windows[0].schedule", "want a string, got a number"}}},
		{"window duration zero", pool(`{"drift": ["image"], "windows": [{"schedule": "0 2 * * *", "duration": "0s"}]}`), []problem{{"nodeConfigs.workers.replace.windows[0].duration", "0s is not positive"}}},
		{"window duration unparsable", pool(`{"drift": ["image"], "windows": [{"schedule": "0 2 * * *", "duration": "3 hours"}]}`), []problem{{"nodeConfigs.workers.replace.windows[0].duration", `"3 hours" is not a duration`}}},
		{"window time zone unknown", pool(`{"drift": ["image"], "windows": [{"schedule": "0 2 * * *", "duration": "1h", "timeZone": "Europe/Bielefeld"}]}`), []problem{{"nodeConfigs.workers.replace.windows[0].timeZone", `"Europe/Bielefeld" cannot be used: unknown time zone Europe/Bielefeld; want an IANA time zone name such as Europe/Berlin or UTC`}}},
		{"window time zone in other capitals", pool(`{"drift": ["image"], "windows": [{"schedule": "0 2 * * *", "duration": "1h", "timeZone": "america/new_york"}]}`), []problem{{"nodeConfigs.workers.replace.windows[0].timeZone", `unknown time zone america/new_york, did you mean "America/New_York"`}}},
		{"window faults all at once", pool(`{"drift": ["image"], "windows": [{"schedule": "0 25 * * *", "duration": "-1h", "timeZone": "Europe/Berln"}]}`), []problem{
			{"nodeConfigs.workers.replace.windows[0].schedule", `"0 25 * * *": `},
			{"nodeConfigs.workers.replace.windows[0].duration", "-1h is not positive"},
			{"nodeConfigs.workers.replace.windows[0].timeZone", `"Europe/Berln" cannot be used`},
		}},
		{"window without duration, other parts still checked", pool(`{"drift": ["image"], "windows": [{"schedule": "@every 1h", "timeZone": "Mars/Olympus"}]}`), []problem{
			{"nodeConfigs.workers.replace.windows[0].duration", "required"},
			{"nodeConfigs.workers.replace.windows[0].schedule", "@every has no fixed start"},
			{"nodeConfigs.workers.replace.windows[0].timeZone", `"Mars/Olympus" cannot be used`},
		}},
		{"window time zone of the machine", pool(`{"drift": ["image"], "windows": [{"schedule": "0 2 * * *", "duration": "1h", "timeZone": "Local"}]}`), []problem{{"nodeConfigs.workers.replace.windows[0].timeZone", `"Local" cannot be used: that is the machine's time zone, not one of the cluster`}}},
		{"window unknown key", pool(`{"drift": ["image"], "windows": [{"schedule": "0 2 * * *", "duration": "1h", "timezone": "UTC", "tz": "UTC"}]}`), []problem{
			{"nodeConfigs.workers.replace.windows[0].timezone", `unknown key, did you mean "timeZone" (keys new in hcloudscale are matched in their case only)`},
			{"nodeConfigs.workers.replace.windows[0].tz", "unknown key, want one of duration, schedule, timeZone"},
		}},
		{"key of hcloudscale in another case", pool(`{"drift": ["image"], "maxsurge": 2}`), []problem{{"nodeConfigs.workers.replace.maxsurge", `unknown key, did you mean "maxSurge"`}}},
		{"removedPools in a pool", pool(`{"drift": ["image"], "removedPools": true}`), []problem{{"nodeConfigs.workers.replace.removedPools", "the top-level replace.removedPools: true"}}},
		{"removedPool in a pool, as once documented", pool(`{"drift": ["image"], "removedPool": true}`), []problem{{"nodeConfigs.workers.replace.removedPool", "the top-level replace.removedPools: true"}}},
		{"repairMaxUnhealthy in a pool", pool(`{"repairAfter": "10m", "repairMaxUnhealthy": 2}`), []problem{{"nodeConfigs.workers.replace.repairMaxUnhealthy", "the top-level replace.repairMaxUnhealthy"}}},
		{"cluster key in another case", `{"replace": {"removedpools": true}}`, []problem{{"replace.removedpools", `did you mean "removedPools"`}}},
		{"second window at fault", pool(`{"drift": ["image"], "windows": [{"schedule": "0 2 * * *", "duration": "1h"}, {"schedule": "0 3 * * *", "duration": "-1h"}]}`), []problem{{"nodeConfigs.workers.replace.windows[1].duration", "-1h is not positive"}}},
		{"repairAfter too short", pool(`{"repairAfter": "2m"}`), []problem{{"nodeConfigs.workers.replace.repairAfter", "2m is shorter than the minimum 5m"}}},
		{"repairAfter not a duration", pool(`{"repairAfter": 900}`), []problem{{"nodeConfigs.workers.replace.repairAfter", "want a string, got a number"}}},
		{"cluster repairMaxUnhealthy zero", `{"replace": {"repairMaxUnhealthy": 0}}`, []problem{{"replace.repairMaxUnhealthy", "0 is out of range 1..1000"}}},
		{"cluster repairMaxUnhealthy above 100%", `{"replace": {"repairMaxUnhealthy": "120%"}}`, []problem{{"replace.repairMaxUnhealthy", "120% is out of range 1%..100%"}}},
		{"cluster repairMaxUnhealthy a string without %", `{"replace": {"repairMaxUnhealthy": "3"}}`, []problem{{"replace.repairMaxUnhealthy", `"3" is neither a count such as 3 nor a percentage such as "20%"`}}},
		{"cluster repairMaxUnhealthy a fraction", `{"replace": {"repairMaxUnhealthy": "2.5%"}}`, []problem{{"replace.repairMaxUnhealthy", `"2.5%" is neither a count`}}},
		{"cluster repairMaxUnhealthy a boolean", `{"replace": {"repairMaxUnhealthy": true}}`, []problem{{"replace.repairMaxUnhealthy", "want an integer, got a boolean"}}},
		{"evictUnreplicatedPods not a boolean", pool(`{"drift": ["image"], "evictUnreplicatedPods": "yes"}`), []problem{{"nodeConfigs.workers.replace.evictUnreplicatedPods", "want true or false, got a string"}}},
		{"evictLocalStoragePods misspelt", pool(`{"drift": ["image"], "evictLocalStoragePod": true}`), []problem{{"nodeConfigs.workers.replace.evictLocalStoragePod", `did you mean "evictLocalStoragePods"`}}},
		{"cluster evictKubeSystemPods not a boolean", `{"replace": {"evictKubeSystemPods": 1}}`, []problem{{"replace.evictKubeSystemPods", "want true or false, got a number"}}},
		{"cluster evict keys at fault together", `{"replace": {"evictUnreplicatedPods": 0, "evictLocalStoragePods": "true"}}`, []problem{
			{"replace.evictUnreplicatedPods", "want true or false, got a number"}, {"replace.evictLocalStoragePods", "want true or false, got a string"},
		}},
		{"cluster replace not an object", `{"replace": []}`, []problem{{"replace", "want an object, got an array"}}},
		{"cluster unknown key", `{"replace": {"removedPool": true}}`, []problem{{"replace.removedPool", `did you mean "removedPools"`}}},
		{"cluster maxInFlight zero", `{"replace": {"maxInFlight": 0}}`, []problem{{"replace.maxInFlight", "0 is out of range 1..1000"}}},
		{"cluster removedPools not a boolean", `{"replace": {"removedPools": 1}}`, []problem{{"replace.removedPools", "want true or false, got a number"}}},
		{"cluster paused not a boolean", `{"replace": {"paused": "false"}}`, []problem{{"replace.paused", "want true or false, got a string"}}},
		{"cluster window at fault", `{"replace": {"windows": [{"schedule": "0 2 * * *", "duration": "1h", "timeZone": "Mars/Olympus"}]}}`, []problem{{"replace.windows[0].timeZone", "unknown time zone Mars/Olympus"}}},
		{"all at once, in document order", `{"replace": {"maxInFlight": -1}, "nodeConfigs": {"a": {"replace": {"drift": ["nope"], "expireAfter": "1m", "maxSurge": -2}}, "b": {"replace": {"windows": [{"schedule": "x", "duration": "1h"}]}}}}`, []problem{
			{"replace.maxInFlight", "out of range"},
			{"nodeConfigs.a.replace.drift[0]", "not a drift reason"},
			{"nodeConfigs.a.replace.expireAfter", "shorter than the minimum"},
			{"nodeConfigs.a.replace.maxSurge", "out of range"},
			{"nodeConfigs.b.replace.windows[0].schedule", `"x"`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc, err := ParseClusterConfig([]byte(tt.doc))
			if err == nil {
				t.Fatalf("ParseClusterConfig(%s) = %+v, nil; want errors", tt.doc, cc)
			}
			checkProblems(t, err, tt.want)
		})
	}
}

func TestParseReplaceDefaults(t *testing.T) {
	tests := []struct {
		name         string
		replace      string
		want         *Replace
		wantWarnings []string
	}{
		{
			name:    "drift only: every default",
			replace: `{"drift": ["image"]}`,
			want: &Replace{Drift: []string{"image"}, MaxSurge: DefaultReplaceMaxSurge, MaxInFlight: DefaultReplaceMaxInFlight,
				JoinTimeout: DefaultReplaceJoinTimeout, DrainTimeout: DefaultReplaceDrainTimeout, RetryAfter: DefaultReplaceRetryAfter},
		},
		{
			name:    "expireAfter: jitter a tenth of it; maxSurge 0 kept",
			replace: `{"expireAfter": "720h", "maxSurge": 0}`,
			want: &Replace{ExpireAfter: 720 * time.Hour, ExpireJitter: 72 * time.Hour, MaxSurge: 0, MaxInFlight: DefaultReplaceMaxInFlight,
				JoinTimeout: DefaultReplaceJoinTimeout, DrainTimeout: DefaultReplaceDrainTimeout, RetryAfter: DefaultReplaceRetryAfter},
		},
		{
			name:    "explicit jitter 0 and jitter equal to expireAfter are kept",
			replace: `{"expireAfter": "10m", "expireJitter": "10m", "maxInFlight": 1000, "maxSurge": 1000}`,
			want: &Replace{ExpireAfter: 10 * time.Minute, ExpireJitter: 10 * time.Minute, MaxSurge: 1000, MaxInFlight: 1000,
				JoinTimeout: DefaultReplaceJoinTimeout, DrainTimeout: DefaultReplaceDrainTimeout, RetryAfter: DefaultReplaceRetryAfter},
		},
		{
			name:    "empty: kept, with a warning",
			replace: `{}`,
			want: &Replace{MaxSurge: DefaultReplaceMaxSurge, MaxInFlight: DefaultReplaceMaxInFlight,
				JoinTimeout: DefaultReplaceJoinTimeout, DrainTimeout: DefaultReplaceDrainTimeout, RetryAfter: DefaultReplaceRetryAfter},
			wantWarnings: []string{"nodeConfigs.workers.replace: none of drift, expireAfter and repairAfter is set: the pool replaces no node"},
		},
		{
			name:    "empty drift and a pause: kept, with a warning",
			replace: `{"drift": [], "paused": true}`,
			want: &Replace{MaxSurge: DefaultReplaceMaxSurge, MaxInFlight: DefaultReplaceMaxInFlight, Paused: true,
				JoinTimeout: DefaultReplaceJoinTimeout, DrainTimeout: DefaultReplaceDrainTimeout, RetryAfter: DefaultReplaceRetryAfter},
			wantWarnings: []string{"nodeConfigs.workers.replace: none of drift, expireAfter and repairAfter is set: the pool replaces no node"},
		},
		{name: "null: absent", replace: `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc, err := ParseClusterConfig([]byte(`{"nodeConfigs": {"workers": {"replace": ` + tt.replace + `}}}`))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, cc.NodeConfigs["workers"].Replace); diff != "" {
				t.Errorf("replace (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWarnings, cc.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
	cc, err := ParseClusterConfig([]byte(`{"replace": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&ClusterReplace{MaxInFlight: DefaultClusterReplaceMaxInFlight, RepairMaxUnhealthy: DefaultRepairMaxUnhealthy}, cc.Replace); diff != "" {
		t.Errorf("top-level replace (-want +got):\n%s", diff)
	}
}

// TestLoadDriftOffering checks that the drift reason offering is taken
// for a pool with offerings, and taken with a warning naming the pool for
// one without: none of its nodes can be on a later offering.
func TestLoadDriftOffering(t *testing.T) {
	doc := `{"imagesForArch": {"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"}, "nodeConfigs": {
	  "workers": {"offerings": [{"serverType": "cx22", "location": "fsn1"}, {"serverType": "cx32", "location": "nbg1"}], "replace": {"drift": ["offering"]}},
	  "plain": {"replace": {"drift": ["image", "offering"]}}
	}}`
	env := MapEnv(map[string]string{EnvToken: testToken, EnvClusterConfig: b64(doc)}, nil)
	cfg, err := Load(env, []string{"0:3:cx22:fsn1:workers", "0:3:cx22:fsn1:plain"})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range cfg.NodeGroups() {
		if g.FamilyName() == "workers" && !slices.Equal(g.Replace.Drift, []string{DriftOffering}) {
			t.Errorf("node group %s: drift %q; want [offering]", g.Name, g.Replace.Drift)
		}
	}
	want := []string{`nodeConfigs.plain.replace.drift[1]: "offering", but the pool plain has one offering: none of its nodes is drift for it (list offerings to use it)`}
	if diff := cmp.Diff(want, cfg.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

func TestLoadReplace(t *testing.T) {
	doc := `{
	  "replace": {"maxInFlight": 4, "removedPools": true, "windows": [{"schedule": "0 2 * * *", "duration": "3h", "timeZone": "Europe/Berlin"}], "repairMaxUnhealthy": 2},
	  "nodeConfigs": {
	    "workers": {"replace": {"drift": ["image", "user_data"], "expireAfter": "720h", "repairAfter": "15m", "windows": [{"schedule": "0 23 * * *", "duration": "2h"}]}},
	    "plain": {},
	    "idle": {"serverType": "cx22", "location": "fsn1", "maxSize": 2, "replace": {"paused": true}}
	  }
	}`
	env := MapEnv(map[string]string{EnvToken: testToken, EnvClusterConfig: b64(doc)}, nil)
	cfg, err := Load(env, []string{"0:3:cx22:fsn1:workers", "0:3:cx22:fsn1:plain"})
	if err != nil {
		t.Fatal(err)
	}
	wantCluster := ClusterReplace{MaxInFlight: 4, RemovedPools: true,
		Windows:            []Window{{Schedule: "0 2 * * *", Duration: 3 * time.Hour, TimeZone: "Europe/Berlin"}},
		RepairMaxUnhealthy: Limit{Value: 2}}
	if diff := cmp.Diff(wantCluster, cfg.Replace); diff != "" {
		t.Errorf("Config.Replace (-want +got):\n%s", diff)
	}
	wantWorkers := &Replace{Drift: []string{"image", "user_data"}, ExpireAfter: 720 * time.Hour, ExpireJitter: 72 * time.Hour,
		MaxSurge: 1, MaxInFlight: 1, JoinTimeout: 10 * time.Minute, DrainTimeout: 15 * time.Minute, RetryAfter: time.Hour,
		Windows: []Window{{Schedule: "0 23 * * *", Duration: 2 * time.Hour}}, RepairAfter: 15 * time.Minute}
	if diff := cmp.Diff(wantWorkers, cfg.Pool("workers").Replace); diff != "" {
		t.Errorf("workers' Replace (-want +got):\n%s", diff)
	}
	if r := cfg.Pool("plain").Replace; r != nil {
		t.Errorf("plain's Replace = %+v; want nil (no replace key)", r)
	}
	idle := cfg.Pool("idle").Replace
	if idle == nil || idle.Enabled() || !idle.Paused {
		t.Errorf("idle's Replace = %+v; want a paused Replace that replaces nothing", idle)
	}
	want := "nodeConfigs.idle.replace: none of drift, expireAfter and repairAfter is set: the pool replaces no node"
	found := false
	for _, w := range cfg.Warnings {
		found = found || w == want
	}
	if !found {
		t.Errorf("warnings %q; want %q among them", cfg.Warnings, want)
	}
	// The windows are compiled: a Window's zero value is not.
	if open, _ := cfg.Pool("workers").Replace.Windows[0].Open(time.Date(2024, 1, 15, 23, 30, 0, 0, time.UTC)); !open {
		t.Error("workers' window 0 23 * * * for 2h is closed at 23:30 UTC")
	}
	if cfg.Pool("workers").Replace.Windows[0].spec == nil {
		t.Error("Load left the window uncompiled")
	}
}

// TestLoadEvictPods: the top-level replace object's evict keys are the
// default of every pool; a pool's own key wins, true or false.
func TestLoadEvictPods(t *testing.T) {
	doc := `{
	  "replace": {"evictUnreplicatedPods": true, "evictKubeSystemPods": true},
	  "nodeConfigs": {
	    "workers": {"replace": {"drift": ["image"], "evictUnreplicatedPods": false, "evictLocalStoragePods": true}},
	    "plain": {"replace": {"drift": ["image"]}}
	  }
	}`
	env := MapEnv(map[string]string{EnvToken: testToken, EnvClusterConfig: b64(doc)}, nil)
	cfg, err := Load(env, []string{"0:3:cx22:fsn1:workers", "0:3:cx22:fsn1:plain"})
	if err != nil {
		t.Fatal(err)
	}
	cluster := EvictPods{Unreplicated: true, KubeSystem: true}
	if diff := cmp.Diff(cluster, cfg.Replace.EvictPods); diff != "" {
		t.Errorf("Config.Replace.EvictPods (-want +got):\n%s", diff)
	}
	for pool, want := range map[string]EvictPods{
		"workers": {Unreplicated: false, LocalStorage: true, KubeSystem: true},
		"plain":   cluster,
	} {
		if diff := cmp.Diff(want, cfg.Pool(pool).Replace.EvictPods.Over(cfg.Replace.EvictPods)); diff != "" {
			t.Errorf("%s's EvictPods over the cluster's (-want +got):\n%s", pool, diff)
		}
	}
	// Pools share nothing with each other or the document.
	a, _ := Load(env, []string{"0:3:cx22:fsn1:workers", "0:3:cx22:fsn1:plain"})
	*a.Pool("workers").Replace.EvictPods.LocalStorage = false
	if !*cfg.Pool("workers").Replace.EvictPods.LocalStorage {
		t.Error("two loads share a pool's evictLocalStoragePods")
	}
}

func TestLoadReplaceDefaults(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"cluster config without replace": {EnvToken: testToken, EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {}}}`)},
		"legacy format":                  {EnvToken: testToken, EnvCloudInit: b64("#cloud-config\n")},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := Load(MapEnv(env, nil), baseSpecs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(ClusterReplace{MaxInFlight: DefaultClusterReplaceMaxInFlight, RepairMaxUnhealthy: DefaultRepairMaxUnhealthy}, cfg.Replace); diff != "" {
				t.Errorf("Config.Replace (-want +got):\n%s", diff)
			}
			if r := cfg.Pools[0].Replace; r != nil {
				t.Errorf("Pool.Replace = %+v; want nil", r)
			}
		})
	}
}

func TestValidateReplace(t *testing.T) {
	valid := func() *Replace {
		return &Replace{Drift: []string{"image"}, ExpireAfter: 24 * time.Hour, ExpireJitter: time.Hour, MaxSurge: 0, MaxInFlight: 1,
			JoinTimeout: time.Minute, DrainTimeout: time.Minute, RetryAfter: time.Minute,
			Windows: []Window{{Schedule: "0 2 * * *", Duration: time.Hour, TimeZone: "Europe/Berlin"}}}
	}
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []problem
	}{
		{"valid", func(c *Config) { c.Pools[0].Replace = valid() }, nil},
		{"zero ClusterReplace means the defaults", func(c *Config) { c.Replace = ClusterReplace{} }, nil},
		{"cluster maxInFlight negative", func(c *Config) { c.Replace.MaxInFlight = -1 }, []problem{{"replace.maxInFlight", "-1 is out of range 1..1000"}}},
		{"cluster repairMaxUnhealthy out of range", func(c *Config) { c.Replace.RepairMaxUnhealthy = Limit{Value: 0, Percent: true} }, []problem{{"replace.repairMaxUnhealthy", "0% is out of range 1%..100%"}}},
		{"repairAfter too short", func(c *Config) {
			r := valid()
			r.RepairAfter = time.Minute
			c.Pools[0].Replace = r
		}, []problem{{"pools[0].replace.repairAfter", "1m is shorter than the minimum 5m"}}},
		{"cluster window uncompilable", func(c *Config) {
			c.Replace.Windows = []Window{{Schedule: "0 2 * * *", Duration: time.Hour}, {Schedule: "61 * * * *", Duration: time.Hour}}
		}, []problem{{"replace.windows[1].schedule", `"61 * * * *"`}}},
		{"drift unknown and twice", func(c *Config) {
			r := valid()
			r.Drift = []string{"image", "Image", "image"}
			c.Pools[0].Replace = r
		}, []problem{{"pools[0].replace.drift[1]", `did you mean "image"`}, {"pools[0].replace.drift[2]", "listed twice"}}},
		{"expiry out of range", func(c *Config) {
			r := valid()
			r.ExpireAfter, r.ExpireJitter = time.Minute, -time.Second
			c.Pools[0].Replace = r
		}, []problem{{"pools[0].replace.expireAfter", "1m is shorter than the minimum 10m"}, {"pools[0].replace.expireJitter", "-1s is negative"}}},
		{"jitter above expireAfter", func(c *Config) {
			r := valid()
			r.ExpireJitter = 25 * time.Hour
			c.Pools[0].Replace = r
		}, []problem{{"pools[0].replace.expireJitter", "25h is above expireAfter 24h"}}},
		{"jitter without expireAfter", func(c *Config) {
			r := valid()
			r.ExpireAfter = 0
			c.Pools[0].Replace = r
		}, []problem{{"pools[0].replace.expireJitter", "set without expireAfter"}}},
		{"zero values are not the defaults in a pool", func(c *Config) { c.Pools[0].Replace = &Replace{Drift: []string{"image"}} }, []problem{
			{"pools[0].replace.maxInFlight", "0 is out of range 1..1000"},
			{"pools[0].replace.joinTimeout", "0s is not positive"},
			{"pools[0].replace.drainTimeout", "0s is not positive"},
			{"pools[0].replace.retryAfter", "0s is not positive"},
		}},
		{"maxSurge negative", func(c *Config) {
			r := valid()
			r.MaxSurge = -1
			c.Pools[0].Replace = r
		}, []problem{{"pools[0].replace.maxSurge", "-1 is out of range 0..1000"}}},
		{"windows uncompilable", func(c *Config) {
			r := valid()
			r.Windows = []Window{{Schedule: "0 2 * * *"}, {Schedule: "0 2 * * *", Duration: time.Hour, TimeZone: "Nowhere"}}
			c.Pools[0].Replace = r
		}, []problem{{"pools[0].replace.windows[0].duration", "0s is not positive"}, {"pools[0].replace.windows[1].timeZone", `"Nowhere" cannot be used`}}},
		{"every fault of a window", func(c *Config) {
			r := valid()
			r.Windows = []Window{{Schedule: "x", TimeZone: "Nowhere"}}
			c.Pools[0].Replace = r
		}, []problem{{"pools[0].replace.windows[0].schedule", `"x"`}, {"pools[0].replace.windows[0].duration", "0s is not positive"}, {"pools[0].replace.windows[0].timeZone", `"Nowhere" cannot be used`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil", err)
				}
				return
			}
			checkProblems(t, err, tt.want)
		})
	}
}

func TestLimitOf(t *testing.T) {
	for _, tt := range []struct {
		l     Limit
		total int
		want  int
	}{
		{Limit{Value: 20, Percent: true}, 3, 1},
		{Limit{Value: 20, Percent: true}, 10, 2},
		{Limit{Value: 20, Percent: true}, 11, 3},
		{Limit{Value: 20, Percent: true}, 0, 0},
		{Limit{Value: 100, Percent: true}, 7, 7},
		{Limit{Value: 3}, 100, 3},
	} {
		if got := tt.l.Of(tt.total); got != tt.want {
			t.Errorf("%s of %d = %d; want %d", tt.l, tt.total, got, tt.want)
		}
	}
}

func TestParseWindowErrors(t *testing.T) {
	for _, tt := range []struct {
		schedule, timeZone string
		duration           time.Duration
		want               string
	}{
		{"0 2 * * *", "", 0, "duration 0s is not positive"},
		{"0 2 * * *", "Nowhere", time.Hour, `timeZone "Nowhere" cannot be used: unknown time zone Nowhere`},
		{"0 2 * * *", "Europe/Berlin", 0, "duration 0s is not positive"},
		{"0 2 * *", "Nowhere", 0, "schedule \"0 2 * *\": expected exactly 5 fields, found 4: [0 2 * *] (want five fields: minute hour day-of-month month day-of-week, such as \"0 2 * * 1-5\")\nduration 0s is not positive\ntimeZone \"Nowhere\" cannot be used"},
		{"", "", time.Hour, `schedule "": `},
		{"@every 2h", "", time.Hour, "@every has no fixed start"},
	} {
		_, err := ParseWindow(tt.schedule, tt.duration, tt.timeZone)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseWindow(%q, %v, %q) = %v; want %q", tt.schedule, tt.duration, tt.timeZone, err, tt.want)
		}
	}
	for _, s := range []string{"0 2 * * 1-5", "@daily", "*/15 22-23,0-5 * * *", "0 0 29 2 *"} {
		if _, err := ParseWindow(s, time.Hour, "UTC"); err != nil {
			t.Errorf("ParseWindow(%q) = %v; want nil", s, err)
		}
	}
}

func TestWindowOpen(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	tests := []struct {
		name               string
		schedule, timeZone string
		duration           time.Duration
		now                string
		open               bool
		next               string // when closed
	}{
		// Berlin is UTC+1 in winter: 02:00-05:00 there is 01:00-04:00 UTC.
		{"winter, inside", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-01-15T01:30:00Z", true, ""},
		{"winter, at the start", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-01-15T01:00:00Z", true, ""},
		{"winter, at the end", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-01-15T04:00:00Z", false, "2024-01-16T01:00:00Z"},
		{"winter, after", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-01-15T04:30:00Z", false, "2024-01-16T01:00:00Z"},
		{"winter, before", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-01-15T00:59:59Z", false, "2024-01-15T01:00:00Z"},
		// UTC+2 in summer.
		{"summer, inside", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-07-01T00:30:00Z", true, ""},
		{"summer, after", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-07-01T03:30:00Z", false, "2024-07-02T00:00:00Z"},
		{"no time zone is UTC", "0 2 * * *", "", 3 * time.Hour, "2024-01-15T01:30:00Z", false, "2024-01-15T02:00:00Z"},
		// 23:00-01:00 Berlin spans midnight: 00:30 there is 23:30 UTC.
		{"over midnight, after it", "0 23 * * *", "Europe/Berlin", 2 * time.Hour, "2024-01-15T23:30:00Z", true, ""},
		{"over midnight, before it", "0 23 * * *", "Europe/Berlin", 2 * time.Hour, "2024-01-15T22:30:00Z", true, ""},
		{"over midnight, closed", "0 23 * * *", "Europe/Berlin", 2 * time.Hour, "2024-01-16T00:30:00Z", false, "2024-01-16T22:00:00Z"},
		{"over midnight into a weekday", "0 23 * * 5", "", 2 * time.Hour, "2024-01-13T00:30:00Z", true, ""}, // Friday 23:00 to Saturday 01:00
		// On 2024-03-31 Berlin's clocks go from 02:00 CET to 03:00 CEST
		// (01:00 UTC): the 02:00 start does not exist, and the window
		// opens when the gap ends, for its 3 hours.
		{"spring forward, before", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-03-31T00:30:00Z", false, "2024-03-31T01:00:00Z"},
		{"spring forward, inside", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-03-31T01:00:00Z", true, ""},
		{"spring forward, still inside", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-03-31T03:59:00Z", true, ""},
		{"spring forward, after", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-03-31T04:00:00Z", false, "2024-04-01T00:00:00Z"},
		{"spring forward, a weekly Sunday window", "30 2 * * 0", "Europe/Berlin", time.Hour, "2024-03-31T01:30:00Z", true, ""},
		// On 2024-10-27 02:00-03:00 occurs twice (00:00-01:00 and
		// 01:00-02:00 UTC): the window opens once.
		{"fall back, inside", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-10-27T03:30:00Z", true, ""},
		{"fall back, after", "0 2 * * *", "Europe/Berlin", 3 * time.Hour, "2024-10-27T04:30:00Z", false, "2024-10-28T01:00:00Z"},
		{"never within a year", "0 0 29 2 *", "", time.Hour, "2024-03-01T00:00:00Z", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := ParseWindow(tt.schedule, tt.duration, tt.timeZone)
			if err != nil {
				t.Fatal(err)
			}
			var want time.Time
			if tt.next != "" {
				want = at(tt.next)
			}
			open, next := w.Open(at(tt.now))
			if open != tt.open || !next.Equal(want) {
				t.Errorf("Open(%s) = %v, %v; want %v, %v", tt.now, open, next, tt.open, want)
			}
			// A window built in code compiles itself.
			raw := Window{Schedule: tt.schedule, Duration: tt.duration, TimeZone: tt.timeZone}
			if o, n := raw.Open(at(tt.now)); o != open || !n.Equal(next) {
				t.Errorf("uncompiled Open(%s) = %v, %v; want %v, %v", tt.now, o, n, open, next)
			}
		})
	}
}

func TestOpenAny(t *testing.T) {
	now := time.Date(2024, 1, 15, 12, 0, 0, 0, time.UTC)
	if open, next := OpenAny(nil, now); !open || !next.IsZero() {
		t.Errorf("OpenAny(none) = %v, %v; want open", open, next)
	}
	a, _ := ParseWindow("0 20 * * *", time.Hour, "")
	b, _ := ParseWindow("0 14 * * *", time.Hour, "")
	if open, next := OpenAny([]Window{a, b}, now); open || !next.Equal(now.Add(2*time.Hour)) {
		t.Errorf("OpenAny = %v, %v; want closed until 14:00", open, next)
	}
	c, _ := ParseWindow("0 11 * * *", 2*time.Hour, "")
	if open, _ := OpenAny([]Window{a, c}, now); !open {
		t.Error("OpenAny = closed; want open (11:00 for 2h)")
	}
	if open, next := OpenAny([]Window{{Schedule: "bad", Duration: time.Hour}}, now); open || !next.IsZero() {
		t.Errorf("OpenAny(invalid) = %v, %v; want closed, never", open, next)
	}
}

// TestAlwaysOpenWindowWarns checks the warning for a window that opens
// again before it closes, which makes it no window at all.
func TestAlwaysOpenWindowWarns(t *testing.T) {
	tests := []struct {
		name, window string
		warn         bool
	}{
		{"nightly 3h", `{"schedule": "0 2 * * *", "duration": "3h"}`, false},
		{"hourly 2h", `{"schedule": "0 * * * *", "duration": "2h"}`, true},
		{"daily exactly 24h in UTC", `{"schedule": "0 2 * * *", "duration": "24h"}`, true},
		{"daily 24h in Berlin: the autumn day has 25 hours", `{"schedule": "0 2 * * *", "duration": "24h", "timeZone": "Europe/Berlin"}`, false},
		{"weekdays 24h: the weekend is closed", `{"schedule": "0 2 * * 1-5", "duration": "24h"}`, false},
		{"weekdays 73h: Friday's covers the weekend", `{"schedule": "0 2 * * 1-5", "duration": "73h"}`, true},
		{"every minute for an hour", `{"schedule": "* * * * *", "duration": "1h"}`, true},
		{"monthly 31 days", `{"schedule": "0 0 1 * *", "duration": "744h"}`, true},
		{"monthly 30 days: 31-day months close", `{"schedule": "0 0 1 * *", "duration": "720h"}`, false},
		{"every 15 minutes for 30m", `{"schedule": "*/15 * * * *", "duration": "30m"}`, true},
		{"every 5 minutes for 10m", `{"schedule": "*/5 * * * *", "duration": "10m"}`, true},
		{"twice an hour for 45m", `{"schedule": "0,30 * * * *", "duration": "45m"}`, true},
		{"every minute for a minute", `{"schedule": "* * * * *", "duration": "1m"}`, true},
		{"every 15 minutes for 14m", `{"schedule": "*/15 * * * *", "duration": "14m"}`, false},
		{"hourly 1h on weekdays", `{"schedule": "0 * * * 1-5", "duration": "1h"}`, false},
		{"hourly 1h but not at 3", `{"schedule": "0 0-2,4-23 * * *", "duration": "1h"}`, false},
		{"hourly 1h except on the 31st", `{"schedule": "0 * 1-30 * *", "duration": "1h"}`, false},
		{"hourly 2h in Berlin: the repeated autumn hour is covered", `{"schedule": "0 * * * *", "duration": "2h", "timeZone": "Europe/Berlin"}`, true},
		{"hourly 1h in Berlin: the repeated autumn hour opens once", `{"schedule": "0 * * * *", "duration": "1h", "timeZone": "Europe/Berlin"}`, false},
		{"hourly 1h in New York", `{"schedule": "0 * * * *", "duration": "1h", "timeZone": "America/New_York"}`, false},
		{"every 30 minutes for 90m in New York", `{"schedule": "*/30 * * * *", "duration": "90m", "timeZone": "America/New_York"}`, true},
		{"weekend 48h from Saturday", `{"schedule": "0 0 * * 6", "duration": "48h"}`, false},
	}
	for _, tt := range tests {
		cc, err := ParseClusterConfig([]byte(`{"replace": {"windows": [` + tt.window + `]}}`))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		warned := len(cc.Warnings) == 1 && strings.HasPrefix(cc.Warnings[0], "replace.windows[0]: ") && strings.Contains(cc.Warnings[0], "never closes")
		if warned != tt.warn || len(cc.Warnings) > 1 {
			t.Errorf("%s: warnings %q; want an always-open warning: %t", tt.name, cc.Warnings, tt.warn)
		}
	}
}
