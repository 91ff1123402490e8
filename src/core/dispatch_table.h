// The dispatch table: the whole forward pass for one token as a flat array of POD commands,
// built once at load and replayed per token. Only a few fields change from token to token, and
// each command says which ones through its patch type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/device.h"

namespace akunu {

enum class PatchType : uint8_t {
    None = 0,
    TokenOffset,   // offsets[0] += 4 * token_index        (embedding reads token slot i)
    Position,      // u32 at params[patch_offset_1] = position
    KVSeqLen,      // u32 at params[patch_offset_1] = position + 1
    // position at patch_offset_1 and position + span at patch_offset_2, span being the table's
    // own kv_len - position as built (1 for decode; a multi-row patched table's row count).
    PosAndKV,
    ArgmaxOutput,  // offsets[1] += 4 * (token_index + 1)  (argmax writes token slot i + 1)
    // The sampler writes slot i + 1 (offsets[1] as ArgmaxOutput) and draws the token of position
    // + 1 with i draws of the replay before it: u32 at params[patch_offset_1] = position + 1,
    // u32 at params[patch_offset_2] = token_index.
    SampleOutput,
};

const char *patch_type_name(PatchType p);

struct DispatchCmd {
    static constexpr int kMaxBuffers = 8;
    static constexpr int kMaxParamBytes = 96;

    Pipeline pipeline;
    Buffer buffers[kMaxBuffers];
    size_t offsets[kMaxBuffers];
    int buffer_count = 0;

    alignas(8) uint8_t params[kMaxParamBytes];
    int param_size = 0;

    Dim3 grid;         // work units (CPU: parallel tasks; GPU: thread blocks)
    Dim3 threadgroup;  // threads per unit on GPUs; ignored by the CPU

    PatchType patch = PatchType::None;
    uint16_t patch_offset_1 = 0;
    uint16_t patch_offset_2 = 0;
};

struct DispatchLabel {
    char text[48];
};

struct DispatchTable {
    std::vector<DispatchCmd> commands;   // hot: replayed per token
    std::vector<DispatchLabel> labels;   // cold: one per command, for profiling and tests
    std::vector<std::string> kernel_names;  // cold: one per command
    // Long-lived (the decode table): backends may cache work per table, e.g. CUDA captures its
    // replays as graphs. Tables built per call (prefill, evaluation) leave it false.
    bool persistent = false;
};

// Fluent helper that fills one DispatchCmd and appends it:
//   CmdBuilder(table, device, "rmsnorm_f32", grid).buf(x).buf(w).buf(y).params(p).label("layer.0.attn_norm").emit();
class CmdBuilder {
public:
    CmdBuilder(DispatchTable &table, Device &device, const std::string &kernel, Dim3 grid, Dim3 threadgroup = {});
    CmdBuilder &buf(const Buffer &b, size_t offset = 0);
    template <typename P>
    CmdBuilder &params(const P &p) {
        static_assert(sizeof(P) <= DispatchCmd::kMaxParamBytes, "kernel params too large for a DispatchCmd");
        static_assert(std::is_trivially_copyable<P>::value, "kernel params must be POD");
        std::memcpy(cmd_.params, &p, sizeof(P));
        cmd_.param_size = sizeof(P);
        return *this;
    }
    CmdBuilder &patch(PatchType type, size_t offset_1 = 0, size_t offset_2 = 0);
    CmdBuilder &label(const std::string &text);
    void emit();

private:
    DispatchTable &table_;
    std::string kernel_;
    std::string label_;
    DispatchCmd cmd_{};
};

// What a PosAndKV patch adds to the position for the KV length: the rows of the pass, as the
// table was built (kv_len - position of its params).
inline uint32_t patched_kv_span(const DispatchCmd &cmd) {
    uint32_t built_position, built_kv_len;
    std::memcpy(&built_position, cmd.params + cmd.patch_offset_1, 4);
    std::memcpy(&built_kv_len, cmd.params + cmd.patch_offset_2, 4);
    return built_kv_len - built_position;
}

// The generic replay: what every backend's encode_dispatch_table does, spelled out once.
// Writes the patched copy of `cmd` for token `token_index` at `position` into `out`.
inline void apply_patch(const DispatchCmd &cmd, int token_index, int position, DispatchCmd &out) {
    out = cmd;
    switch (cmd.patch) {
        case PatchType::None: break;
        case PatchType::TokenOffset: out.offsets[0] += 4u * (uint32_t)token_index; break;
        case PatchType::Position: {
            uint32_t v = (uint32_t)position;
            std::memcpy(out.params + cmd.patch_offset_1, &v, 4);
            break;
        }
        case PatchType::KVSeqLen: {
            uint32_t v = (uint32_t)position + 1;
            std::memcpy(out.params + cmd.patch_offset_1, &v, 4);
            break;
        }
        case PatchType::PosAndKV: {
            uint32_t p = (uint32_t)position, kv = (uint32_t)position + patched_kv_span(cmd);
            std::memcpy(out.params + cmd.patch_offset_1, &p, 4);
            std::memcpy(out.params + cmd.patch_offset_2, &kv, 4);
            break;
        }
        case PatchType::ArgmaxOutput: out.offsets[1] += 4u * (uint32_t)(token_index + 1); break;
        case PatchType::SampleOutput: {
            out.offsets[1] += 4u * (uint32_t)(token_index + 1);
            uint32_t p = (uint32_t)position + 1, i = (uint32_t)token_index;
            std::memcpy(out.params + cmd.patch_offset_1, &p, 4);
            std::memcpy(out.params + cmd.patch_offset_2, &i, 4);
            break;
        }
    }
}

}  // namespace akunu
