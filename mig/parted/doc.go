// Package parted reads and writes the configuration files of NVIDIA's
// mig-parted (the MIG manager of the GPU Operator applies the named
// configuration a node's [LabelConfig] label selects):
//
//	version: v1
//	mig-configs:
//	  all-1g.10gb:
//	    - device-filter: ["0x20B010DE", "0x20B510DE"]
//	      devices: all
//	      mig-enabled: true
//	      mig-devices:
//	        "1g.10gb": 7
//
// [Config.Templates] turns the configurations into the candidate
// templates of [mig.ChooseTemplate]; [FromTemplate] writes a chosen
// template back as a configuration, and [NodeLabels] the label that
// selects it. The package keeps the YAML dependency out of package mig.
//
// # Limits
//
// Inputs are bounded: a file beyond a limit fails with an error wrapping
// [mig.ErrParse] and [topology.ErrLimit] that names the limit ("parted
// limit maxConfigs"). No caller needs to name them, so they are
// documented here:
//
//	limit              value     bounds
//	maxConfigBytes     256 KiB   a configuration file (Parse, and what Read reads)
//	maxConfigs         1,024     named configurations in a file
//	maxNameBytes       256       a configuration's name
//	maxEntries         64        entries of one configuration
//	maxDeviceEntries   16        mig-devices of one entry (mig.MaxSlots)
//	maxCount           16        one profile's count in mig-devices (mig.MaxSlots)
//	maxFilterIDs       64        device-filter IDs of one entry
//	maxDeviceIndex     64        device indices of one entry (each below it)
package parted
