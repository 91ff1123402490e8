// Device factory: the only place that knows which backends were compiled in.
#include <memory>
#include <string>

#include "backend/cpu/cpu_device.h"
#include "core/device.h"
#include "core/errors.h"

namespace akunu {

std::unique_ptr<Device> create_device(const std::string &backend, int threads) {
    if (backend == "auto" || backend == "cpu") return std::make_unique<cpu::CpuDevice>(threads);
    if (backend == "cuda" || backend == "metal")
        throw UnsupportedError("backend '" + backend + "' is not available in this build of akunu");
    throw std::invalid_argument("unknown backend '" + backend + "' (expected 'auto', 'cpu', 'cuda' or 'metal')");
}

}  // namespace akunu
