// ArchDescriptor: how one architecture differs from another, as data. The table builder reads
// these fields and never branches on an architecture's name; a new architecture is a new factory.
#pragma once
#include <string>
#include <vector>

namespace akunu {

struct ArchDescriptor {
    std::string name;                  // "llama"
    const char *norm_kernel;           // "rmsnorm_f32"
    const char *activation_kernel;     // gated FFN activation: "silu_mul_f32"
    const char *rope_kernel;           // RoPE + KV-cache write: "rope_interleaved_kv_write"
    const char *attention_kernel;      // "attention_f16kv"
    float embedding_scale = 0.f;       // 0: none (Gemma would use sqrt(dim))
    bool tie_embeddings = false;       // output projection reuses the token embedding
};

ArchDescriptor arch_llama();

// Finds the descriptor for a GGUF general.architecture value; throws UnsupportedError naming the
// architecture and listing the supported ones.
ArchDescriptor arch_from_name(const std::string &architecture);
std::vector<std::string> supported_architectures();

}  // namespace akunu
