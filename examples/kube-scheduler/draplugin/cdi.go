package draplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// CDIVersion is the CDI specification version of the spec files written.
const CDIVersion = "0.6.0"

// CDIClass is the CDI device class of the devices: IDs are
// "<driver>/gpu=<claim UID>-<device name>" (the claim UID keeps a name from
// being reused, as kubeletplugin advises).
const CDIClass = "gpu"

type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name           string   `json:"name"`
	ContainerEdits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env []string `json:"env,omitempty"`
}

func cdiName(uid types.UID, device string) string { return string(uid) + "-" + device }

func cdiID(driver string, uid types.UID, device string) string {
	return driver + "/" + CDIClass + "=" + cdiName(uid, device)
}

// CDISpecPath returns the CDI spec file of a claim.
func CDISpecPath(dir, driver string, uid types.UID) string {
	return filepath.Join(dir, strings.ReplaceAll(driver, "/", "_")+"-"+string(uid)+".json")
}

func writeCDISpec(dir, driver string, uid types.UID, devs []cdiDevice) error {
	if len(devs) == 0 {
		return nil
	}
	b, err := json.MarshalIndent(cdiSpec{Version: CDIVersion, Kind: driver + "/" + CDIClass, Devices: devs}, "", "  ")
	if err != nil {
		return fmt.Errorf("%w: CDI spec: %w", ErrState, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: CDI dir: %w", ErrState, err)
	}
	return writeAtomic(CDISpecPath(dir, driver, uid), b)
}

func removeCDISpec(dir, driver string, uid types.UID) error {
	if err := os.Remove(CDISpecPath(dir, driver, uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	return nil
}
