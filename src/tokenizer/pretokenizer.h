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
        QWEN35,       // as QWEN2 with marks joining letters: [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+, ?[^\s\p{L}\p{M}\p{N}]+
        SEED_CODER,   // as QWEN2 without the [\r\n]* after punctuation
        UFAKZEKA,     // as QWEN2 without the contractions
        GPT4O,        // [^\r\n\p{L}\p{N}]?[upper]*[lower]+'s?|...[upper]+[lower]*'s?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|...
        TEKKEN,       // as GPT4O without the contractions, \p{N} single
        // Several regexes in a row, each splitting the pieces the previous one left (llama.cpp's
        // regex_exprs lists): matches and the text between them both become pieces.
        DEFAULT,         // [\p{P}$+<=>^~|]+ ; GPT2 ; \p{N}+ ; [0-9]{3}   (no or "default" pre: aquila, gpt-neox)
        FALCON,          // [\p{P}$+<=>^~|`]+ ; GPT2 ; [0-9]{3}
        DEEPSEEK_LLM,    // [\r\n] ; \s?[Latin/Greek/Cyrillic/...]+ ; \s?[ASCII and CJK punctuation]+ ; \s+$ ; [CJK]+ ; \p{N}+
        DEEPSEEK_CODER,  // [\r\n] ; \s?\p{L}+ ; \s?\p{P}+ ; [CJK]+ ; \p{N}
        DEEPSEEK3,       // \p{N}{1,3} ; [CJK kana]+ ; [ASCII punct][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|...
        SPARK2_5,        // as DEEPSEEK3 with single newlines and no [\r\n]* after punctuation ; \p{N}
        AFMOE,           // digit groups ; [CJK, kana, Thai, Lao, Khmer, Myanmar, Hangul ...]+ ; DEEPSEEK3's last stage
        MINICPM5,        // \p{N}{1,3} ; LLAMA3 with \p{N}+
        JAIS2,           // LLAMA3 with whitespace runs cut into 512, 256, ..., 4, 2 and 1 spaces
        EXAONE_MOE,      // (?i:'s|...)|[^\r\n\p{L}\p{N}]?(\p{L}\p{M}*( \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|...
        GRANITE_97M,     // GPT4O with marks counted as letters
        YOUTU,           // [Hangul]+|[CJK punctuation]+|[Bopomofo]+|[CJK kana]+ ; GPT4O uncased with marks, \p{N}
        TINY_AYA,        // digit groups ; GPT4O uncased with marks
        LAGUNA,          // [^\n]+|\n+ ; QWEN2
        KIMI_K2,         // \p{Han}+ first, then GPT4O-like words without Han (llama.cpp's hand-written splitter)
        PORO,            //  ?[^(\s|.,!?…。，、।۔،)]+   (poro-chat, bloom, gpt3-finnish)
        VIKING,          // PORO ; \p{N}
        CHAMELEON,       // <sentinel:[0-9]+> ; IMGIMG[A-I]{1,4}Z ; [\t\n]|4 or 2 spaces ; \p{N} ; punctuation ; GPT2
        SUPERBPE,        // \p{N}+ ; a cut before every group of three digits counted from the right
    };

    // Maps a tokenizer.ggml.pre value to its splitter; throws UnsupportedError naming it.
    static PreTokenizer from_name(const std::string &pre);
    // tokenizer.ggml.pre values llama.cpp runs as it runs Gemma 4's vocab (BPE over raw UTF-8 with
    // spaces as U+2581, cut only at newlines): those vocabs go to gemma4_tokenizer.cpp.
    static bool sentencepiece_style(const std::string &pre);
    // llama.cpp's add_bos default for a byte-level BPE vocab of this pre name (a tokenizer.ggml.add_bos_token
    // in the file wins).
    static bool adds_bos(const std::string &pre);
    explicit PreTokenizer(Kind kind, bool ignore_merges = false) : kind_(kind), ignore_merges_(ignore_merges) {}
    Kind kind() const { return kind_; }
    // Whole words found in the vocab are taken as one token before any merge (llama.cpp's
    // ignore_merges, set per tokenizer.ggml.pre name).
    bool ignore_merges() const { return ignore_merges_; }

    // Appends the words of `text` as [begin, end) byte ranges, in order, covering all of it.
    void split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>> &out) const;

private:
    Kind kind_;
    bool ignore_merges_ = false;
};

}  // namespace akunu
