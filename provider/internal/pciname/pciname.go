package pciname

// PCI vendor ids.
const (
	VendorNVIDIA = 0x10de
	VendorAMD    = 0x1002
	VendorIntel  = 0x8086
	VendorHabana = 0x1da3 // Habana Labs (Intel Gaudi)
)

var models = map[[2]uint16]string{
	{VendorNVIDIA, 0x20b0}: "NVIDIA A100-SXM4-40GB",
	{VendorNVIDIA, 0x20b1}: "NVIDIA A100-PCIE-40GB",
	{VendorNVIDIA, 0x20f1}: "NVIDIA A100-PCIE-40GB",
	{VendorNVIDIA, 0x20f6}: "NVIDIA A100-PCIE-40GB",
	{VendorNVIDIA, 0x20b2}: "NVIDIA A100-SXM4-80GB",
	{VendorNVIDIA, 0x20b5}: "NVIDIA A100 80GB PCIe",
	{VendorNVIDIA, 0x20f3}: "NVIDIA A100-SXM4-80GB",
	{VendorNVIDIA, 0x20f5}: "NVIDIA A100 80GB PCIe",
	{VendorNVIDIA, 0x2330}: "NVIDIA H100 80GB HBM3",
	{VendorNVIDIA, 0x2331}: "NVIDIA H100 PCIe",
	{VendorNVIDIA, 0x2321}: "NVIDIA H100 NVL",
	{VendorNVIDIA, 0x2322}: "NVIDIA H800",
	{VendorNVIDIA, 0x233a}: "NVIDIA H800 NVL",
	{VendorNVIDIA, 0x2342}: "NVIDIA GH200",
	{VendorNVIDIA, 0x233d}: "NVIDIA GH200",
	{VendorNVIDIA, 0x2329}: "NVIDIA H20",
	{VendorNVIDIA, 0x2335}: "NVIDIA H200",
	{VendorNVIDIA, 0x233b}: "NVIDIA H200 NVL",
	{VendorNVIDIA, 0x2901}: "NVIDIA B200",
	{VendorAMD, 0x738c}:    "AMD Instinct MI100",
	{VendorAMD, 0x7408}:    "AMD Instinct MI250X",
	{VendorAMD, 0x740c}:    "AMD Instinct MI250X/MI250",
	{VendorAMD, 0x740f}:    "AMD Instinct MI210",
	{VendorAMD, 0x74a0}:    "AMD Instinct MI300A",
	{VendorAMD, 0x74a1}:    "AMD Instinct MI300X",
	{VendorAMD, 0x74a2}:    "AMD Instinct MI308X",
	{VendorAMD, 0x74a5}:    "AMD Instinct MI325X",
	{VendorAMD, 0x75a0}:    "AMD Instinct MI350X",
	{VendorAMD, 0x75a3}:    "AMD Instinct MI355X",
}

// Model returns the product name of a PCI device, and whether it is known.
func Model(vendor, device uint16) (string, bool) {
	m, ok := models[[2]uint16{vendor, device}]
	return m, ok
}
