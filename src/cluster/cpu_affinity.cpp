#include "cluster/cpu_affinity.hpp"

#include <hwloc.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "crossbench/error.hpp"

namespace crossbench {
namespace {

// One loaded topology, with the PCI devices (GPUs) kept.
class Topology {
 public:
  Topology() {
    CB_CHECK_HWLOC(hwloc_topology_init(&topology_));
    try {
      CB_CHECK_HWLOC(hwloc_topology_set_io_types_filter(topology_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT));
      CB_CHECK_HWLOC(hwloc_topology_load(topology_));
    } catch (...) {
      hwloc_topology_destroy(topology_);
      throw;
    }
  }
  ~Topology() { hwloc_topology_destroy(topology_); }
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  hwloc_topology_t get() const { return topology_; }

 private:
  hwloc_topology_t topology_ = nullptr;
};

struct BitmapFree {
  void operator()(hwloc_bitmap_s* bitmap) const { hwloc_bitmap_free(bitmap); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapFree>;

Bitmap new_bitmap() {
  Bitmap bitmap(hwloc_bitmap_alloc());
  if (!bitmap) throw_library_error("hwloc", "hwloc_bitmap_alloc()", __FILE__, __LINE__, "out of memory");
  return bitmap;
}

std::string list_text(hwloc_const_bitmap_t bitmap) {
  char* text = nullptr;
  CB_CHECK_HWLOC(hwloc_bitmap_list_asprintf(&text, bitmap));
  std::string result = text;
  std::free(text);
  return result;
}

// The GPU's nearest non-I/O object (NUMA node, package or machine), or nullptr.
hwloc_obj_t near_gpu(const Topology& topology, const Device& device) {
  if (device.kind != DeviceKind::gpu || device.pci_bus_id.empty()) return nullptr;
  // NVML's bus id has an 8-digit domain ("00000000:1B:00.0"); hwloc parses hex fields.
  const hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(topology.get(), device.pci_bus_id.c_str());
  if (pci == nullptr) return nullptr;
  return hwloc_get_non_io_ancestor_obj(topology.get(), pci);
}

CpuPlacement placement(const Topology& topology, const Device& device) {
  CpuPlacement result;
  const Bitmap bound = new_bitmap();
  CB_CHECK_HWLOC(hwloc_get_cpubind(topology.get(), bound.get(), HWLOC_CPUBIND_PROCESS));
  result.cpu_set = list_text(bound.get());
  if (const hwloc_obj_t ancestor = near_gpu(topology, device)) {
    result.near_gpu_cpu_set = list_text(ancestor->cpuset);
    if (ancestor->nodeset != nullptr) result.numa_node = hwloc_bitmap_first(ancestor->nodeset);
  }
  return result;
}

}  // namespace

CpuPlacement cpu_placement(const Device& device) {
  const Topology topology;
  return placement(topology, device);
}

CpuPlacement bind_near_gpu(const Device& device) {
  const Topology topology;
  if (const hwloc_obj_t ancestor = near_gpu(topology, device))
    CB_CHECK_HWLOC(hwloc_set_cpubind(topology.get(), ancestor->cpuset, HWLOC_CPUBIND_PROCESS));
  return placement(topology, device);
}

}  // namespace crossbench
