#include "core/arch_descriptor.h"

#include "core/errors.h"

namespace akunu {

ArchDescriptor arch_llama() {
    ArchDescriptor a;
    a.name = "llama";
    a.norm_kernel = "rmsnorm_f32";
    a.activation_kernel = "silu_mul_f32";
    // GGUF stores Llama's Q/K rows permuted so that rotation pairs are adjacent (GPT-J style).
    a.rope_kernel = "rope_interleaved_kv_write";
    a.attention_kernel = "attention_f16kv";
    a.tie_embeddings = false;  // the loader turns this on when output.weight is absent
    return a;
}

namespace {
struct ArchEntry {
    const char *gguf_name;
    ArchDescriptor (*factory)();
};
// Mistral GGUFs declare "llama"; the extra names cover files that spell it out.
const ArchEntry kArchitectures[] = {
    {"llama", arch_llama},
    {"mistral", arch_llama},
};
}  // namespace

ArchDescriptor arch_from_name(const std::string &architecture) {
    for (const ArchEntry &e : kArchitectures)
        if (architecture == e.gguf_name) return e.factory();
    std::string supported;
    for (const std::string &s : supported_architectures()) supported += (supported.empty() ? "" : ", ") + s;
    throw UnsupportedError("unsupported architecture '" + architecture + "' (supported: " + supported + ")");
}

std::vector<std::string> supported_architectures() {
    std::vector<std::string> names;
    for (const ArchEntry &e : kArchitectures) names.push_back(e.gguf_name);
    return names;
}

}  // namespace akunu
