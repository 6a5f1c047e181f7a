#include "../core/error.hpp"
#include "backend.hpp"
#include "cpu/cpu_backend.hpp"

namespace vt {

#ifdef VTAPE_WITH_CUDA
Backend& cuda_backend(int index);  // backends/cuda
#endif

Backend& backend_for(Device device) {
  if (device.kind == DeviceKind::cpu) {
    static auto* cpu = new cpu::CpuBackend;  // never destroyed: tensors may outlive static destruction
    return *cpu;
  }
#ifdef VTAPE_WITH_CUDA
  return cuda_backend(device.index);
#else
  fail("vtape was built without CUDA: device {} is not available", to_string(device));
#endif
}

}  // namespace vt
