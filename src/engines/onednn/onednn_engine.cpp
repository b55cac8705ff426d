// The native oneDNN CPU engine: what it supports, and prepare().
#include "engines/onednn/onednn_engine.hpp"

#include <omp.h>

#include <new>

#include "crossbench/error.hpp"
#include "engines/onednn/dnnl_util.hpp"
#include "engines/onednn/onednn_session.hpp"

namespace crossbench {
namespace onednn {

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    default: return "no vector ISA oneDNN uses";
  }
}

namespace {

// oneDNN's ISA values are nested bit sets: an ISA includes every bit of the ones below it.
bool has_native_bf16(dnnl::cpu_isa isa) {
  const auto bits = static_cast<unsigned>(isa), bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (bits & bf16) == bf16;
}

class OnednnEngine final : public Engine {
 public:
  explicit OnednnEngine(const EngineConfig& config) : config_(config) {
    if (config_.threads > 0) omp_set_num_threads(config_.threads);
  }

  std::string_view name() const override { return "onednn"; }
  DeviceKind device_kind() const override { return DeviceKind::cpu; }

  Support supports(const Device& device, const CellSpec& cell) const override {
    if (device.kind != DeviceKind::cpu) return Support::no("onednn runs on CPUs; this device is a GPU");
    switch (cell.precision) {
      case Precision::fp32:
        return Support::yes();
      case Precision::bf16: {
        const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
        if (has_native_bf16(isa)) return Support::yes();
        return Support::no("bf16 needs a CPU with native bf16 (avx512_core_bf16 or AMX); this CPU's best ISA is " +
                           isa_name(isa));
      }
      case Precision::tf32:
        return Support::no("tf32 is a GPU tensor-core mode; CPUs have no tf32 arithmetic");
      case Precision::amp_fp16: case Precision::amp_bf16:  // DESIGN.md: amp-* is the frameworks' recipe
        return Support::no(mixed_precision_refusal(cell.precision, "onednn", "bf16"));
      case Precision::fp16:
        return Support::no("fp16 is not supported by oneDNN's CPU training path (oneDNN 2.x: no fp16 "
                           "backward primitives on CPU)");
    }
    return Support::no("unknown precision");
  }

  std::unique_ptr<Session> prepare(const Network& network, const CellSpec& cell, Communicator* communicator) override {
    if (cell.precision != Precision::fp32) {  // oneDNN would fall back to reference kernels, or fail late
      Device cpu;
      const Support support = supports(cpu, cell);
      if (!support.supported) throw Error("oneDNN engine cannot run " + describe(cell) + ": " + support.reason);
    }
    try {
      GraphOptions options;
      options.fuse = config_.setting("engine.fuse") == "true";
      return std::make_unique<OnednnSession>(network, cell, config_, options, communicator);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory("oneDNN " + describe(cell) + ": a host allocation failed while preparing the session");
    } catch (const dnnl::error& e) {
      throw_library_error("oneDNN", "prepare " + describe(cell), __FILE__, __LINE__, e.what(),
                          e.status == dnnl_out_of_memory);
    }
  }

  EngineConfig config_;
};

}  // namespace
}  // namespace onednn

std::unique_ptr<Engine> make_onednn_engine(const Device& device, const EngineConfig& config) {
  (void)device;  // one CPU engine per rank; its binding is the process's affinity and config.threads
  return std::make_unique<onednn::OnednnEngine>(config);
}

}  // namespace crossbench
