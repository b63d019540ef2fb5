package imageresolve_test

import (
	"fmt"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/imageresolve"
)

func ExampleSelect() {
	global := config.ImagesForArch{AMD64: "ubuntu-24.04", ARM64: "role=worker-arm"}
	pool := config.ImagesForArch{AMD64: "114690387"} // this pool pins its x86 image
	const hcloudImage = "debian-12"

	for _, arch := range []config.Arch{config.ArchAMD64, config.ArchARM64} {
		fmt.Printf("pool with override, %s: %s\n", arch, imageresolve.Select(pool, global, hcloudImage, arch))
		fmt.Printf("pool without,       %s: %s\n", arch, imageresolve.Select(config.ImagesForArch{}, global, hcloudImage, arch))
	}
	fmt.Printf("no imagesForArch at all: %s\n", imageresolve.Select(config.ImagesForArch{}, config.ImagesForArch{}, hcloudImage, config.ArchARM64))
	fmt.Printf("nothing set: %q\n", imageresolve.Select(config.ImagesForArch{}, config.ImagesForArch{}, "", config.ArchARM64))
	// Output:
	// pool with override, amd64: 114690387
	// pool without,       amd64: ubuntu-24.04
	// pool with override, arm64: role=worker-arm
	// pool without,       arm64: role=worker-arm
	// no imagesForArch at all: debian-12
	// nothing set: ""
}

func ExampleClassify() {
	for _, spec := range []config.ImageSpec{
		"114690387",
		"ubuntu-24.04",
		"golden",
		"role=worker,os=talos",
		"",
	} {
		fmt.Printf("%-22q %v\n", spec, imageresolve.Classify(spec))
	}
	// Output:
	// "114690387"            ID
	// "ubuntu-24.04"         name
	// "golden"               name
	// "role=worker,os=talos" label selector
	// ""                     empty
}
