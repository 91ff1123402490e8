// End-of-generation ids as llama.cpp's special_eog_ids: see end_of_generation.h.
#include "tokenizer/end_of_generation.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "tokenizer/vocab.h"
#include "weights/gguf_file.h"

namespace akunu {

const char *const kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "[e~["};
const size_t kEndOfGenerationTextCount = sizeof(kEndOfGenerationTexts) / sizeof(kEndOfGenerationTexts[0]);

std::vector<int32_t> end_of_generation_ids(const Vocab &v, const GGUFFile &f) {
    std::unordered_map<std::string_view, int32_t> ids;  // last id of each text, as llama.cpp's token_to_id
    for (size_t i = 0; i < v.tokens.size(); ++i) ids[v.tokens[i]] = (int32_t)i;
    auto id_of = [&](std::string_view text) {
        auto it = ids.find(text);
        return it == ids.end() ? -1 : it->second;
    };
    std::vector<int32_t> eog;
    auto add = [&](int32_t id) {
        if (id >= 0 && (size_t)id < v.tokens.size()) eog.push_back(id);
    };
    // FIM tokens that end a generation: the GGUF's id, else the first of these texts the vocab has.
    struct Fim { const char *key; std::vector<const char *> texts; };
    static const Fim kFim[] = {
        {"tokenizer.ggml.fim_pad_token_id", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
        {"tokenizer.ggml.fim_rep_token_id", {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
        {"tokenizer.ggml.fim_sep_token_id", {"<|file_sep|>"}},
    };
    for (const Fim &fim : kFim) {
        if (f.has(fim.key)) {
            const int64_t id = f.get_int(fim.key, -1);
            if (id >= 0 && (uint64_t)id < v.tokens.size()) add((int32_t)id);
            continue;
        }
        for (const char *text : fim.texts) {
            if (id_of(text) >= 0) {
                add(id_of(text));
                break;
            }
        }
    }
    for (size_t i = 0; i < kEndOfGenerationTextCount; ++i) add(id_of(kEndOfGenerationTexts[i]));
    for (int32_t id : {v.eos, v.eot, v.eom}) add(id);
    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

    auto in_eog = [&](std::string_view text) {
        for (int32_t id : eog)
            if (v.tokens[id] == text) return true;
        return false;
    };
    auto drop = [&](std::string_view text) {
        eog.erase(std::remove_if(eog.begin(), eog.end(), [&](int32_t id) { return v.tokens[id] == text; }), eog.end());
    };
    const bool call = in_eog("<|call|>") || in_eog("<|calls|>");
    if (in_eog("<|end|>") && ((in_eog("<|return|>") && call) || (call && in_eog("<|flush|>")))) drop("<|end|>");
    if (in_eog("</s>") && (in_eog("<|tool_response>") || in_eog("<|plamo:eos|>"))) drop("</s>");
    return eog;
}

}  // namespace akunu
