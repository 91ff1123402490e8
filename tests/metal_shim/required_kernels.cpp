// The kernels the table builder can ask of the Metal backend: for every architecture, the
// kernels its ArchDescriptor names (with the KV-cache variants for both cache dtypes, and the
// fused decode attention ChipConfig::for_apple_gpu turns on); for every dtype the CPU runs, the
// Metal descriptor's GEMM and embedding; and the argmax, the sampler and the grammar mask.
#include <set>
#include <string>

#include "backend/cpu/dtypes.h"
#include "backend/metal/metal_dtypes.h"
#include "core/arch_descriptor.h"
#include "core/chip_config.h"
#include "core/dtype.h"
#include "core/kv_cache.h"
#include "core/table_builder.h"

namespace metal_check {

std::set<std::string> required_metal_kernels() {
    std::set<std::string> names = {"argmax_f32", "sample_f32", "grammar_bitmask_f32"};
    const akunu::ChipConfig chip = akunu::ChipConfig::for_apple_gpu(10, 16u << 20);
    for (const std::string &arch_name : akunu::supported_architectures()) {
        const akunu::ArchDescriptor a = akunu::arch_from_name(arch_name);
        for (const char *k : {a.norm_kernel, a.activation_kernel, a.post_norm_kernel, a.qk_norm_kernel, a.bias_kernel,
                              a.softcap_kernel})
            names.insert(k);
        for (akunu::KVCacheDType kv : {akunu::KVCacheDType::F16, akunu::KVCacheDType::Q8_0})
            for (const std::string &k : akunu::kv_cache_kernels(a, chip, kv)) names.insert(k);
    }
    for (uint32_t code = 0; code < 64; ++code) {
        const akunu::DTypeInfo *info = akunu::dtype_info(code);
        if (!info || !akunu::cpu::cpu_supports_dtype((akunu::DType)code)) continue;
        const akunu::DTypeDescriptor *d = akunu::metal::metal_dtype_lookup((akunu::DType)code);
        if (!d) {
            names.insert(std::string("<no Metal descriptor for ") + info->name + ">");
            continue;
        }
        names.insert(d->gemm_kernel);
        names.insert(d->embedding_kernel);
        if (d->act_quant_kernel) names.insert(d->act_quant_kernel);
    }
    return names;
}

}  // namespace metal_check
