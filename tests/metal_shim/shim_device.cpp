#include "shim_device.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "backend/metal/metal_dtypes.h"
#include "backend/metal/metal_kernels.h"
#include "core/dispatch_table.h"
#include "core/errors.h"
#include "metal_shim.h"

namespace metal_check {

struct ShimMetalDevice::ShimPipeline {
    const akunu::metal::MetalKernelInfo *info;
    const shim::KernelEntry *kernel;
};

ShimMetalDevice::ShimMetalDevice() = default;

ShimMetalDevice::~ShimMetalDevice() {
    for (void *p : owned_) std::free(p);
}

// An M-class chip with 10 GPU cores and a 16 MB SLC (an M4).
akunu::ChipConfig ShimMetalDevice::chip_config() const { return akunu::ChipConfig::for_apple_gpu(10, 16u << 20); }

const akunu::DTypeDescriptor *ShimMetalDevice::dtype_lookup(akunu::DType t) const {
    return akunu::metal::metal_dtype_lookup(t);
}

akunu::Pipeline ShimMetalDevice::get_pipeline(const std::string &kernel_name) {
    const akunu::metal::MetalKernelInfo *info = akunu::metal::find_metal_kernel(kernel_name);
    if (!info) throw akunu::UnsupportedError("the Metal backend has no kernel '" + kernel_name + "'");
    const shim::KernelEntry *kernel = shim::find_kernel(kernel_name);
    if (!kernel) throw akunu::AkunuError("metal shim: '" + kernel_name + "' is in the kernel table but not in metal/");
    if (kernel->buffer_slots != info->buffer_slots)
        throw akunu::AkunuError("metal shim: '" + kernel_name + "' declares " + std::to_string(kernel->buffer_slots) +
                                " buffers, the kernel table says " + std::to_string(info->buffer_slots));
    kernels_used_.insert(kernel_name);
    pipelines_.push_back({info, kernel});
    return akunu::Pipeline{&pipelines_.back()};
}

akunu::Buffer ShimMetalDevice::allocate(size_t bytes) {
    void *p = std::calloc(1, bytes ? bytes : 16);
    if (!p) throw std::bad_alloc();
    owned_.insert(p);
    return akunu::Buffer{p, bytes, p};
}

// Unified memory: kernels read the caller's (mmapped) bytes in place.
akunu::Buffer ShimMetalDevice::upload_weights(const void *host, size_t bytes) {
    void *p = const_cast<void *>(host);
    return akunu::Buffer{p, bytes, p};
}

void ShimMetalDevice::free_buffer(akunu::Buffer &buf) {
    auto it = owned_.find(buf.handle);
    if (it != owned_.end()) {
        std::free(*it);
        owned_.erase(it);
    }
    buf = akunu::Buffer{};
}

void ShimMetalDevice::write_buffer(const akunu::Buffer &dst, const void *src, size_t bytes, size_t offset) {
    std::memcpy(static_cast<uint8_t *>(dst.contents) + offset, src, bytes);
}

void ShimMetalDevice::read_buffer(void *dst, const akunu::Buffer &src, size_t bytes, size_t offset) {
    std::memcpy(dst, static_cast<const uint8_t *>(src.contents) + offset, bytes);
}

void ShimMetalDevice::run_command(const akunu::DispatchCmd &cmd) {
    const ShimPipeline &p = *static_cast<const ShimPipeline *>(cmd.pipeline.handle);
    if ((unsigned)cmd.buffer_count > p.info->buffer_slots)
        throw akunu::AkunuError(std::string("metal shim: a command binds more buffers than '") + p.info->name + "' has");
    // Slots the command leaves empty stay null: a kernel that touches one crashes the test.
    std::vector<void *> slots(p.info->buffer_slots, nullptr);
    for (int i = 0; i < cmd.buffer_count; ++i)
        slots[(size_t)i] = static_cast<uint8_t *>(cmd.buffers[i].contents) + cmd.offsets[i];
    // setBytes copies the parameters when the command is encoded.
    uint8_t params[akunu::DispatchCmd::kMaxParamBytes];
    std::memcpy(params, cmd.params, sizeof params);
    const auto t0 = std::chrono::steady_clock::now();
    shim::dispatch(metal::uint3(cmd.grid.x, cmd.grid.y, cmd.grid.z), p.info->threads_per_group,
                   [&](const shim::ThreadArgs &t) { p.kernel->fn(slots.data(), params, t); });
    kernel_ms_[p.info->name] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void ShimMetalDevice::encode_dispatch_table(const akunu::DispatchTable &table, int start_position, int count,
                                            int cmd_begin, int cmd_end) {
    const int end = cmd_end < 0 ? (int)table.commands.size() : cmd_end;
    akunu::DispatchCmd patched;
    for (int i = 0; i < count; ++i)
        for (int c = cmd_begin; c < end; ++c) {
            akunu::apply_patch(table.commands[(size_t)c], i, start_position + i, patched);
            run_command(patched);
        }
}

std::vector<double> ShimMetalDevice::profile_dispatch_table(const akunu::DispatchTable &table, int position) {
    std::vector<double> ms;
    akunu::DispatchCmd patched;
    for (const akunu::DispatchCmd &cmd : table.commands) {
        const auto t0 = std::chrono::steady_clock::now();
        akunu::apply_patch(cmd, 0, position, patched);
        run_command(patched);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return ms;
}

}  // namespace metal_check
