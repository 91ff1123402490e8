// Model hyper-parameters read from the weight file's metadata.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace akunu {

struct ModelConfig {
    std::string architecture;  // "llama", ...
    std::string name;
    uint32_t dim = 0;
    uint32_t n_layers = 0;
    uint32_t n_heads = 0;
    uint32_t n_kv_heads = 0;
    uint32_t head_dim = 0;
    uint32_t rope_dim = 0;
    uint32_t ffn_dim = 0;
    uint32_t vocab_size = 0;
    uint32_t max_seq_len = 0;  // trained context length
    float norm_eps = 1e-5f;
    float rope_theta = 10000.f;
    std::vector<float> rope_inv_freq;  // rope_dim / 2 frequencies, scaling already applied
    // Sliding layers' frequencies when the architecture gives them their own base (Gemma 3's
    // local layers); empty: every layer uses rope_inv_freq.
    std::vector<float> rope_inv_freq_local;

    float attention_scale = 0.f;      // softmax scale of q . k; 0: 1 / sqrt(head_dim)
    float embedding_scale = 0.f;      // multiplies the token embedding; 0: none
    float attn_logit_softcap = 0.f;   // scores = c * tanh(scores / c); 0: off
    float final_logit_softcap = 0.f;  // logits = c * tanh(logits / c); 0: off
    uint32_t sliding_window = 0;      // keys a sliding layer sees (itself included); 0: no window
    std::vector<uint8_t> layer_sliding;  // per layer: 1 = sliding window + local RoPE

    uint32_t q_dim() const { return n_heads * head_dim; }
    uint32_t kv_dim() const { return n_kv_heads * head_dim; }
};

}  // namespace akunu
