#include "core/dispatch_table.h"

#include <algorithm>

#include "core/errors.h"

namespace akunu {

const char *patch_type_name(PatchType p) {
    switch (p) {
        case PatchType::None: return "none";
        case PatchType::TokenOffset: return "token_offset";
        case PatchType::Position: return "position";
        case PatchType::KVSeqLen: return "kv_seq_len";
        case PatchType::PosAndKV: return "pos_and_kv";
        case PatchType::ArgmaxOutput: return "argmax_output";
        case PatchType::SampleOutput: return "sample_output";
    }
    return "?";
}

CmdBuilder::CmdBuilder(DispatchTable &table, Device &device, const std::string &kernel, Dim3 grid, Dim3 threadgroup)
    : table_(table), kernel_(kernel) {
    cmd_.pipeline = device.get_pipeline(kernel);
    cmd_.grid = grid;
    cmd_.threadgroup = threadgroup;
}

CmdBuilder &CmdBuilder::buf(const Buffer &b, size_t offset) {
    if (cmd_.buffer_count == DispatchCmd::kMaxBuffers) throw AkunuError("internal: too many buffers for " + kernel_);
    cmd_.buffers[cmd_.buffer_count] = b;
    cmd_.offsets[cmd_.buffer_count] = offset;
    ++cmd_.buffer_count;
    return *this;
}

CmdBuilder &CmdBuilder::patch(PatchType type, size_t offset_1, size_t offset_2) {
    cmd_.patch = type;
    cmd_.patch_offset_1 = (uint16_t)offset_1;
    cmd_.patch_offset_2 = (uint16_t)offset_2;
    return *this;
}

CmdBuilder &CmdBuilder::label(const std::string &text) {
    label_ = text;
    return *this;
}

void CmdBuilder::emit() {
    table_.commands.push_back(cmd_);
    DispatchLabel l{};
    size_t n = std::min(label_.size(), sizeof(l.text) - 1);
    std::copy(label_.begin(), label_.begin() + (long)n, l.text);
    table_.labels.push_back(l);
    table_.kernel_names.push_back(kernel_);
}

}  // namespace akunu
