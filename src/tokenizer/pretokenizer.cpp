// Hand-written equivalents of the pre-tokenizer regexes. Each matcher returns the end of the
// match starting at code point i, trying the regex alternatives in order as a backtracking
// regex engine would (first alternative that matches wins, quantifiers greedy).
#include "tokenizer/pretokenizer.h"

#include <cstdint>

#include "core/errors.h"
#include "tokenizer/unicode.h"

namespace akunu {

namespace {

using unicode::CodepointText;

struct Cursor {
    const CodepointText &t;
    size_t end;  // exclusive bound of the segment being split
    bool letter(size_t k) const { return k < end && t.cls[k] == unicode::kLetter; }
    bool number(size_t k) const { return k < end && t.cls[k] == unicode::kNumber; }
    bool space(size_t k) const { return k < end && t.space[k]; }
    // [^\s\p{L}\p{N}]
    bool other(size_t k) const {
        return k < end && !t.space[k] && t.cls[k] != unicode::kLetter && t.cls[k] != unicode::kNumber;
    }
    bool newline(size_t k) const { return k < end && (t.cps[k] == '\r' || t.cps[k] == '\n'); }
    uint32_t lower(size_t k) const {  // ASCII lowercase, for the (?i:...) contractions
        if (k >= end) return 0;
        uint32_t c = t.cps[k];
        return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    }
    uint32_t at(size_t k) const { return k < end ? t.cps[k] : 0; }
};

// 's|'t|'re|'ve|'m|'ll|'d (case-insensitive variant for llama3/qwen2). Returns 0 if no match.
size_t match_contraction(const Cursor &c, size_t i, bool ignore_case) {
    if (c.at(i) != '\'') return 0;
    auto ch = [&](size_t k) { return ignore_case ? c.lower(k) : c.at(k); };
    const uint32_t a = ch(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    const uint32_t b = ch(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
}

// \s+(?!\S)|\s+ for a whitespace run starting at i (c.space(i) must hold).
size_t match_trailing_space(const Cursor &c, size_t i) {
    size_t k = i;
    while (c.space(k)) ++k;
    // Followed by a non-space: leave the last space to prefix the next word (if we can).
    if (k < c.end && k - i > 1) return k - 1;
    return k;
}

size_t match_gpt2(const Cursor &c, size_t i) {
    if (size_t k = match_contraction(c, i, false)) return k;
    const bool sp = c.at(i) == ' ';
    size_t k = (sp && c.letter(i + 1)) ? i + 1 : i;  // ' ?\p{L}+'
    if (c.letter(k)) { while (c.letter(k)) ++k; return k; }
    k = (sp && c.number(i + 1)) ? i + 1 : i;  // ' ?\p{N}+'
    if (c.number(k)) { while (c.number(k)) ++k; return k; }
    k = (sp && c.other(i + 1)) ? i + 1 : i;  // ' ?[^\s\p{L}\p{N}]+'
    if (c.other(k)) { while (c.other(k)) ++k; return k; }
    if (c.space(i)) return match_trailing_space(c, i);
    return i + 1;
}

size_t match_llama3(const Cursor &c, size_t i, size_t max_digits) {
    if (size_t k = match_contraction(c, i, true)) return k;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!c.newline(i) && !c.letter(i) && !c.number(i) && c.letter(i + 1)) {
        size_t k = i + 1;
        while (c.letter(k)) ++k;
        return k;
    }
    if (c.letter(i)) { size_t k = i; while (c.letter(k)) ++k; return k; }
    // \p{N}{1,max}
    if (c.number(i)) {
        size_t k = i;
        while (c.number(k) && k - i < max_digits) ++k;
        return k;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    size_t k = (c.at(i) == ' ' && c.other(i + 1)) ? i + 1 : i;
    if (c.other(k)) {
        while (c.other(k)) ++k;
        while (c.newline(k)) ++k;
        return k;
    }
    if (c.space(i)) {
        // \s*[\r\n]+ : greedy \s* backs off to the last newline of the run.
        size_t last_nl = SIZE_MAX;
        size_t j = i;
        for (; c.space(j); ++j)
            if (c.newline(j)) last_nl = j;
        if (last_nl != SIZE_MAX) return last_nl + 1;
        return match_trailing_space(c, i);
    }
    return i + 1;
}

}  // namespace

PreTokenizer PreTokenizer::from_name(const std::string &pre) {
    // Names as written by llama.cpp's convert_hf_to_gguf.py (tokenizer.ggml.pre).
    if (pre.empty() || pre == "default" || pre == "gpt-2" || pre == "phi-2" || pre == "mpt" || pre == "olmo")
        return PreTokenizer(Kind::GPT2);
    if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3")
        return PreTokenizer(Kind::LLAMA3);
    if (pre == "qwen2" || pre == "stablelm2") return PreTokenizer(Kind::QWEN2);
    if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "command-r")
        return PreTokenizer(Kind::DIGITS_GPT2);
    throw UnsupportedError("unsupported tokenizer pre-tokenizer (tokenizer.ggml.pre) '" + pre + "'");
}

void PreTokenizer::split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>> &out) const {
    CodepointText t;
    t.assign(text.data(), text.size());
    const size_t n = t.cps.size();
    auto emit = [&](size_t b, size_t e) { out.emplace_back(t.offsets[b], t.offsets[e]); };
    auto run = [&](size_t b, size_t e) {  // split [b, e) with this kind's main regex
        Cursor c{t, e};
        for (size_t i = b; i < e;) {
            size_t j = 0;
            switch (kind_) {
                case Kind::LLAMA3: j = match_llama3(c, i, 3); break;
                case Kind::QWEN2: j = match_llama3(c, i, 1); break;
                default: j = match_gpt2(c, i); break;
            }
            emit(i, j);
            i = j;
        }
    };
    if (kind_ != Kind::DIGITS_GPT2) {
        run(0, n);
        return;
    }
    // Digits are isolated first; the text between them is split on its own (lookaheads stop
    // at the segment end, as with HF's Sequence of pre-tokenizers).
    size_t seg = 0;
    for (size_t i = 0; i < n; ++i) {
        if (t.cls[i] != unicode::kNumber) continue;
        if (seg < i) run(seg, i);
        emit(i, i + 1);
        seg = i + 1;
    }
    if (seg < n) run(seg, n);
}

}  // namespace akunu
