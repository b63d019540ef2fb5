package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// declaredEnv is an environment whose cluster config is doc, as a file.
func declaredEnv(doc string) Env {
	return MapEnv(map[string]string{EnvToken: testToken, EnvClusterConfigFile: "/cc.json"}, map[string]string{"/cc.json": doc})
}

type poolShape struct {
	Name, ServerType, Location, Origin string
	MinSize, MaxSize                   int
}

func shapes(pools []Pool) []poolShape {
	var out []poolShape
	for _, p := range pools {
		out = append(out, poolShape{p.Name, p.ServerType, p.Location, p.Origin, p.MinSize, p.MaxSize})
	}
	return out
}

func TestLoadDeclaredPools(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		specs []string
		want  []poolShape
	}{
		{
			name: "pool declared in the file only, minSize defaults to 0, type and location lower-cased as --nodes",
			doc:  `{"nodeConfigs": {"workers": {"serverType": "CX22", "location": "FSN1", "maxSize": 5}}}`,
			want: []poolShape{{"workers", "cx22", "fsn1", "nodeConfigs.workers", 0, 5}},
		},
		{
			name:  "--nodes pools first, then the file's by name",
			doc:   `{"nodeConfigs": {"zeta": {"serverType": "cx32", "location": "nbg1", "minSize": 1, "maxSize": 2}, "alpha": {"serverType": "cax11", "location": "hel1", "maxSize": 3}, "flag": {}}}`,
			specs: []string{"1:3:cx22:fsn1:flag"},
			want: []poolShape{
				{"flag", "cx22", "fsn1", "--nodes[0] (flag)", 1, 3},
				{"alpha", "cax11", "hel1", "nodeConfigs.alpha", 0, 3},
				{"zeta", "cx32", "nbg1", "nodeConfigs.zeta", 1, 2},
			},
		},
		{
			name:  "a pool in both that agrees, case of type and location aside",
			doc:   `{"nodeConfigs": {"flag": {"serverType": "CX22", "location": "fsn1", "minSize": 1, "maxSize": 3}}}`,
			specs: []string{"1:3:cx22:FSN1:flag"},
			want:  []poolShape{{"flag", "cx22", "fsn1", "--nodes[0] (flag)", 1, 3}},
		},
		{
			name:  "a pool in both may give some of the fields in the file",
			doc:   `{"nodeConfigs": {"flag": {"maxSize": 3}}}`,
			specs: []string{"1:3:cx22:fsn1:flag"},
			want:  []poolShape{{"flag", "cx22", "fsn1", "--nodes[0] (flag)", 1, 3}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(declaredEnv(tt.doc), tt.specs)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if diff := cmp.Diff(tt.want, shapes(cfg.Pools)); diff != "" {
				t.Errorf("pools (-want +got):\n%s", diff)
			}
			for _, w := range cfg.Warnings {
				if contains(w, "no --nodes pool has this name") {
					t.Errorf("warning %q for a pool the file declares", w)
				}
			}
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestLoadDeclaredPoolErrors(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		specs []string
		want  []problem
	}{
		{
			name:  "a pool in both that disagrees: every field, each naming both sources",
			doc:   `{"nodeConfigs": {"flag": {"serverType": "cx32", "location": "nbg1", "minSize": 0, "maxSize": 5}}}`,
			specs: []string{"1:3:cx22:fsn1:flag"},
			want: []problem{
				{"nodeConfigs.flag.minSize, --nodes[0] (flag)", "0 in the cluster config differs from 1 in --nodes[0] (flag)"},
				{"nodeConfigs.flag.maxSize, --nodes[0] (flag)", "5 in the cluster config differs from 3"},
				{"nodeConfigs.flag.serverType, --nodes[0] (flag)", `"cx32" in the cluster config differs from "cx22"`},
				{"nodeConfigs.flag.location, --nodes[0] (flag)", `"nbg1" in the cluster config differs from "fsn1"`},
			},
		},
		{
			name: "a pool declared in the file without its required fields",
			doc:  `{"nodeConfigs": {"p": {"minSize": 1}}}`,
			want: []problem{
				{"nodeConfigs.p.serverType", "required: no --nodes spec names the pool"},
				{"nodeConfigs.p.location", "required"},
				{"nodeConfigs.p.maxSize", "required"},
			},
		},
		{
			name: "a declared pool's name must be a pool name",
			doc:  `{"nodeConfigs": {"Pool_1": {"serverType": "cx22", "location": "fsn1", "maxSize": 1}}}`,
			want: []problem{{`nodeConfigs.Pool_1`, `pool name "Pool_1" contains 'P', '_'`}},
		},
		{
			name: "bad values, all at once",
			doc:  `{"nodeConfigs": {"p": {"serverType": "", "location": "fsn 1", "minSize": -1, "maxSize": "3"}, "q": {"serverType": "cx22", "location": "fsn1", "minSize": 4, "maxSize": 2}}}`,
			want: []problem{
				{"nodeConfigs.p.serverType", "empty"},
				{"nodeConfigs.p.location", "contains whitespace"},
				{"nodeConfigs.p.minSize", "-1 is negative"},
				{"nodeConfigs.p.maxSize", "want an integer, got a string"},
				{"nodeConfigs.q.minSize", "4 is greater than maxSize 2"},
			},
		},
		{
			name: "no pools anywhere",
			doc:  `{"nodeConfigs": {"p": {"labels": {"a": "b"}}}}`,
			want: []problem{{"--nodes", "no pools: give at least one --nodes"}},
		},
		{
			name:  "placement group counts the declared pools",
			doc:   `{"nodeConfigs": {"a": {"placementGroup": "pg"}, "b": {"serverType": "cx22", "location": "fsn1", "maxSize": 6, "placementGroup": "pg"}}}`,
			specs: []string{"0:5:cx22:fsn1:a"},
			want:  []problem{{"nodeConfigs.a.placementGroup, nodeConfigs.b.placementGroup", `would hold up to 11 servers (a max 5, b max 6)`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(declaredEnv(tt.doc), tt.specs)
			if err == nil {
				t.Fatalf("Load = %+v, nil; want errors", shapes(cfg.Pools))
			}
			checkProblems(t, err, tt.want)
		})
	}
}
