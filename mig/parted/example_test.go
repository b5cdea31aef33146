package parted_test

import (
	"fmt"
	"strings"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/parted"
)

// Read a mig-parted configuration as candidate templates, and write one
// back with the node label that selects it.
func Example() {
	c, err := parted.Read(strings.NewReader(`version: v1
mig-configs:
  all-3g.40gb:
    - device-filter: ["0x20B510DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	templates, _ := c.Templates(nil)
	fmt.Println(templates[0])
	m, _ := mig.DefaultCatalog().Lookup(templates[0].Model)
	out, _ := parted.FromTemplate("", templates[0], m)
	data, _ := out.Marshal()
	fmt.Print(string(data))
	labels, _ := parted.NodeLabels(out.Configs[0].Name)
	fmt.Println(labels)
	// Output:
	// all-3g.40gb (A100-80GB, mig-parted): 2×3g.40gb
	// version: v1
	// mig-configs:
	//   "all-3g.40gb":
	//     - device-filter: ["0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"]
	//       devices: all
	//       mig-enabled: true
	//       mig-devices:
	//         "3g.40gb": 2
	// map[nvidia.com/mig.config:all-3g.40gb]
}
