// Pre-tokenizers for byte-level BPE vocabularies: split text into "words" exactly as the
// regexes named by tokenizer.ggml.pre would (hand-written matchers; no std::regex, which is slow
// and has no Unicode classes). BPE merges then never cross a word boundary.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace akunu {

class PreTokenizer {
public:
    enum class Kind {
        GPT2,         // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
        LLAMA3,       // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
        QWEN2,        // as LLAMA3 but \p{N} (single digits)
        DIGITS_GPT2,  // \p{N} isolated first, then GPT2 on the rest (smollm, starcoder, ...)
    };

    // Maps a tokenizer.ggml.pre value to its splitter; throws UnsupportedError naming it.
    static PreTokenizer from_name(const std::string &pre);
    explicit PreTokenizer(Kind kind) : kind_(kind) {}
    Kind kind() const { return kind_; }

    // Appends the words of `text` as [begin, end) byte ranges, in order, covering all of it.
    void split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>> &out) const;

private:
    Kind kind_;
};

}  // namespace akunu
