// Hand-written equivalents of the pre-tokenizer regexes. Each matcher returns the end of the
// match starting at code point i, trying the regex alternatives in order as a backtracking
// regex engine would (first alternative that matches wins, quantifiers greedy).
#include "tokenizer/pretokenizer.h"

#include <cstdint>
#include <initializer_list>

#include "core/errors.h"
#include "core/quoted_text.h"
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

// \s*[\r\n]+|\s+(?!\S)|\s+ for a whitespace run starting at i: greedy \s* backs off to the
// last newline of the run.
size_t match_space_newlines(const Cursor &c, size_t i) {
    size_t last_nl = SIZE_MAX;
    for (size_t j = i; c.space(j); ++j)
        if (c.newline(j)) last_nl = j;
    if (last_nl != SIZE_MAX) return last_nl + 1;
    return match_trailing_space(c, i);
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

// contractions: the (?i:'s|...) alternative (ufakzeka drops it); punct_newlines: the [\r\n]* after
// ' ?[^\s\p{L}\p{N}]+' (seed-coder drops it).
size_t match_llama3(const Cursor &c, size_t i, size_t max_digits, bool contractions = true,
                    bool punct_newlines = true) {
    if (contractions)
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
        while (punct_newlines && c.newline(k)) ++k;
        return k;
    }
    if (c.space(i)) return match_space_newlines(c, i);
    return i + 1;
}

// gpt-4o (with_contractions, 3 digits) and tekken (neither, 1 digit), as llama.cpp runs them:
// [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,max}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// where U is a letter but a-z, W a letter but A-Z (non-ASCII letters are both: llama.cpp's
// ((?=[\p{L}])([^a-z])) on one byte per code point) and C the optional (?i:'s|...) contraction.
size_t match_gpt4o(const Cursor &c, size_t i, size_t max_digits, bool with_contractions) {
    auto U = [&](size_t k) { return c.letter(k) && !(c.at(k) >= 'a' && c.at(k) <= 'z'); };
    auto W = [&](size_t k) { return c.letter(k) && !(c.at(k) >= 'A' && c.at(k) <= 'Z'); };
    auto contraction = [&](size_t e) {
        if (with_contractions)
            if (size_t k = match_contraction(c, e, true)) return k;
        return e;
    };
    const bool prefix = i < c.end && !c.newline(i) && !c.letter(i) && !c.number(i);
    // U*W+: greedy U* backs off to the last W it holds when no W follows the run.
    auto upper_lower = [&](size_t p) -> size_t {
        size_t u = p;
        while (U(u)) ++u;
        if (W(u)) { while (W(u)) ++u; return u; }
        for (size_t j = u; j > p; --j)
            if (W(j - 1)) return j;
        return 0;
    };
    auto upper_then_lower = [&](size_t p) -> size_t {  // U+W*
        if (!U(p)) return 0;
        size_t u = p;
        while (U(u)) ++u;
        while (W(u)) ++u;
        return u;
    };
    if (prefix)
        if (size_t e = upper_lower(i + 1)) return contraction(e);
    if (size_t e = upper_lower(i)) return contraction(e);
    if (prefix)
        if (size_t e = upper_then_lower(i + 1)) return contraction(e);
    if (size_t e = upper_then_lower(i)) return contraction(e);
    if (c.number(i)) {
        size_t k = i;
        while (c.number(k) && k - i < max_digits) ++k;
        return k;
    }
    size_t k = (c.at(i) == ' ' && c.other(i + 1)) ? i + 1 : i;
    if (c.other(k)) {
        while (c.other(k)) ++k;
        while (c.newline(k) || c.at(k) == '/') ++k;
        return k;
    }
    if (c.space(i)) return match_space_newlines(c, i);
    return i < c.end ? i + 1 : i;
}

// deepseek-v3's last stage:
// [!-/:-@[-`{-~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Returns i when nothing matches there (a number: the first stage made those pieces).
size_t match_deepseek3(const Cursor &c, size_t i) {
    auto ascii_punct = [&](size_t k) {
        const uint32_t cp = c.at(k);
        return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
               (cp >= 0x7B && cp <= 0x7E);
    };
    auto ascii_letter = [&](size_t k) {
        const uint32_t cp = c.at(k);
        return (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z');
    };
    auto lm = [&](size_t k) { return c.letter(k) || (k < c.end && c.t.cls[k] == unicode::kMark); };
    auto ps = [&](size_t k) {
        return k < c.end && !c.t.space[k] && (c.t.cls[k] == unicode::kPunct || c.t.cls[k] == unicode::kSymbol);
    };
    if (ascii_punct(i) && ascii_letter(i + 1)) {
        size_t k = i + 1;
        while (ascii_letter(k)) ++k;
        return k;
    }
    if (lm(i)) {
        size_t k = i;
        while (lm(k)) ++k;
        return k;
    }
    if (i < c.end && !c.newline(i) && !ps(i) && lm(i + 1)) {
        size_t k = i + 1;
        while (lm(k)) ++k;
        return k;
    }
    size_t k = (c.at(i) == ' ' && ps(i + 1)) ? i + 1 : i;
    if (ps(k)) {
        while (ps(k)) ++k;
        while (c.newline(k)) ++k;
        return k;
    }
    if (c.space(i)) return match_space_newlines(c, i);
    return i;
}

// qwen35: llama.cpp's hand-written splitter for
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// (the letter alternative starts wherever the next code point is a letter or mark).
size_t match_qwen35(const Cursor &c, size_t i) {
    if (size_t k = match_contraction(c, i, true)) return k;
    auto word = [&](size_t k) { return k < c.end && (c.t.cls[k] == unicode::kLetter || c.t.cls[k] == unicode::kMark); };
    if (!c.newline(i) && !c.number(i) && (word(i) || word(i + 1))) {
        size_t k = i + 1;
        while (word(k)) ++k;
        return k;
    }
    if (c.number(i)) return i + 1;
    auto other = [&](size_t k) { return k < c.end && !c.space(k) && !word(k) && !c.number(k); };
    const bool sp = c.at(i) == ' ';
    if (sp ? (i + 1 >= c.end || other(i + 1)) : other(i)) {
        size_t k = sp ? i + 1 : i;
        while (other(k)) ++k;
        while (c.newline(k)) ++k;
        return k;
    }
    if (c.space(i)) {
        size_t last_nl = SIZE_MAX;
        for (size_t j = i; c.space(j); ++j)
            if (c.newline(j)) last_nl = j;
        if (last_nl != SIZE_MAX) return last_nl + 1;
        return match_trailing_space(c, i);
    }
    return i + 1;
}

// --- the regexes of the multi-stage pre-tokenizers -----------------------------------------
// llama.cpp runs those without \p{..} classes through std::wregex on the code points, with every
// non-ASCII whitespace replaced by U+000B (so it matches \s and no listed range); those with
// \p{..} run on one byte per code point standing for its category. Both come down to: \s is
// Unicode White_Space, \p{X} is the general category X, and a listed range never holds a
// non-ASCII whitespace.

struct Range { uint32_t first, last; };

bool in_ranges(uint32_t cp, const Range *r, size_t n) {
    size_t lo = 0, hi = n;  // first range with last >= cp
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (r[mid].last < cp) lo = mid + 1; else hi = mid;
    }
    return lo < n && r[lo].first <= cp;
}

// DeepSeek LLM's letter class (its tokenizer.json's \s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+), sorted and merged.
const Range kDeepseekLetters[] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
    {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
    {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
    {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D},
    {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC},
    {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102},
    {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3},
    {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF},
    {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F},
    {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF},
    {0x1E900, 0x1E943},
};
// [!-/:-~！-／：-～‘-‟　-。] (the ASCII range :-~ holds the ASCII letters too).
const Range kDeepseekPunct[] = {{0x21, 0x2F}, {0x3A, 0x7E}, {0x2018, 0x201F}, {0x3000, 0x3002},
                                {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}};
// [一-龥ࠀ-一가-퟿]: U+0800..U+9FA5 and U+AC00..U+D7FF.
const Range kDeepseekCjk[] = {{0x800, 0x9FA5}, {0xAC00, 0xD7FF}};

// deepseek-v3's [一-龥぀-ゟ゠-ヿ]: U+4E00..U+9FA5, hiragana and katakana.
const Range kDeepseek3Cjk[] = {{0x3040, 0x30FF}, {0x4E00, 0x9FA5}};

template <size_t N>
bool listed(const Cursor &c, size_t k, const Range (&r)[N]) {
    if (k >= c.end || (c.t.space[k] && c.t.cps[k] >= 0x80)) return false;  // U+000B for std::wregex
    return in_ranges(c.t.cps[k], r, N);
}

// Each returns the end of the match starting at i, or i when none starts there.
size_t match_punct_run(const Cursor &c, size_t i, bool backtick) {  // [\p{P}\$\+<=>\^~\|`?]+
    auto in = [&](size_t k) {
        if (k >= c.end) return false;
        const uint32_t cp = c.t.cps[k];
        if (cp == '$' || cp == '+' || cp == '<' || cp == '=' || cp == '>' || cp == '^' || cp == '~' || cp == '|')
            return true;
        if (backtick && cp == '`') return true;
        return c.t.cls[k] == unicode::kPunct && !c.t.space[k];
    };
    size_t k = i;
    while (in(k)) ++k;
    return k;
}
size_t match_numbers(const Cursor &c, size_t i) {  // \p{N}+
    size_t k = i;
    while (c.number(k)) ++k;
    return k;
}
size_t match_number(const Cursor &c, size_t i) { return c.number(i) ? i + 1 : i; }  // \p{N}
size_t match_numbers3(const Cursor &c, size_t i) {  // \p{N}{1,3}
    size_t k = i;
    while (c.number(k) && k - i < 3) ++k;
    return k;
}
size_t match_three_digits(const Cursor &c, size_t i) {  // [0-9][0-9][0-9]
    for (size_t k = i; k < i + 3; ++k)
        if (!(c.at(k) >= '0' && c.at(k) <= '9')) return i;
    return i + 3;
}
size_t match_newline(const Cursor &c, size_t i) { return c.newline(i) ? i + 1 : i; }  // [\r\n]
// \s?X+ for a class X that holds no whitespace: the optional space is taken only if X follows.
template <typename F>
size_t match_space_run(const Cursor &c, size_t i, F in) {
    size_t k = c.space(i) ? i + 1 : i;
    if (!in(k)) return i;
    while (in(k)) ++k;
    return k;
}
template <typename F>
size_t match_run(size_t i, F in) {
    size_t k = i;
    while (in(k)) ++k;
    return k;
}

bool name_in(const std::string &pre, std::initializer_list<const char *> names) {
    for (const char *n : names)
        if (pre == n) return true;
    return false;
}

}  // namespace

PreTokenizer PreTokenizer::from_name(const std::string &pre) {
    // Names as written by llama.cpp's convert_hf_to_gguf.py (tokenizer.ggml.pre), grouped by the
    // regex list llama.cpp's llm_tokenizer_bpe gives their LLAMA_VOCAB_PRE_TYPE; `ignore_merges`
    // as llama_vocab::impl::load sets it (whole words are looked up before merging).
    auto is = [&](std::initializer_list<const char *> names) { return name_in(pre, names); };
    if (pre.empty() || pre == "default") return PreTokenizer(Kind::DEFAULT);
    // jina-v1-en, jina-v2-code and roberta-bpe also set llama.cpp's add_sep, which its tokenizer never
    // reads (only embedding and reranking callers do).
    if (is({"gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4", "gigachat",
            "a.x-4.0", "mellum", "modern-bert", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "jina-v1-en",
            "jina-v2-code", "roberta-bpe"}))
        return PreTokenizer(Kind::GPT2);
    if (pre == "falcon") return PreTokenizer(Kind::FALCON);
    if (pre == "deepseek-llm") return PreTokenizer(Kind::DEEPSEEK_LLM);
    if (pre == "deepseek-coder") return PreTokenizer(Kind::DEEPSEEK_CODER);
    if (pre == "qwen35") return PreTokenizer(Kind::QWEN35);
    // glm4 / glm5 / chatglm-bpe: llama.cpp also clears their default BOS id, which only matters for a
    // file without tokenizer.ggml.bos_token_id (akunu has no BOS then either).
    if (is({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
            "jina-v5-nano", "glm4", "glm5"}))
        return PreTokenizer(Kind::LLAMA3, true);
    if (is({"dbrx", "smaug-bpe", "chatglm-bpe"})) return PreTokenizer(Kind::LLAMA3);
    // bailingmoe's regex ends its newline alternative in [\r\n] rather than [\r\n]+ and spells its
    // contractions '(?:[sSdDmMtT]|...): the same pieces as qwen2's.
    if (is({"qwen2", "stablelm2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "hunyuan", "solar-open",
            "grok-2", "bailingmoe", "bailingmoe2", "llada-moe"}))
        return PreTokenizer(Kind::QWEN2);
    if (is({"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"})) return PreTokenizer(Kind::GPT4O);
    if (pre == "tekken") return PreTokenizer(Kind::TEKKEN, true);
    if (is({"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"})) return PreTokenizer(Kind::DEEPSEEK3);
    if (pre == "seed-coder") return PreTokenizer(Kind::SEED_CODER);
    if (pre == "ufakzeka") return PreTokenizer(Kind::UFAKZEKA);
    if (is({"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"}))
        return PreTokenizer(Kind::DIGITS_GPT2);
    throw UnsupportedError("unsupported tokenizer pre-tokenizer (tokenizer.ggml.pre) " + quoted(pre));
}

bool PreTokenizer::adds_bos(const std::string &pre) {
    // llama_vocab::impl::load sets add_bos for these.
    return name_in(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                         "jina-v5-nano", "tekken", "chameleon"});
}

void PreTokenizer::split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>> &out) const {
    CodepointText t;
    t.assign(text.data(), text.size());
    const size_t n = t.cps.size();
    auto emit = [&](size_t b, size_t e) { out.emplace_back(t.offsets[b], t.offsets[e]); };
    // A regex that splits [b, e) completely, match after match (the hand-written splitters).
    auto run = [&](size_t b, size_t e) {
        Cursor c{t, e};
        for (size_t i = b; i < e;) {
            size_t j = 0;
            switch (kind_) {
                case Kind::LLAMA3: j = match_llama3(c, i, 3); break;
                case Kind::QWEN2: j = match_llama3(c, i, 1); break;
                case Kind::QWEN35: j = match_qwen35(c, i); break;
                case Kind::SEED_CODER: j = match_llama3(c, i, 1, true, false); break;
                case Kind::UFAKZEKA: j = match_llama3(c, i, 1, false, true); break;
                default: j = match_gpt2(c, i); break;
            }
            emit(i, j);
            i = j;
        }
    };
    switch (kind_) {
        case Kind::GPT2: case Kind::LLAMA3: case Kind::QWEN2: case Kind::QWEN35: case Kind::SEED_CODER:
        case Kind::UFAKZEKA:
            run(0, n);
            return;
        default: break;
    }

    // Multi-stage: `segs` holds the pieces so far as [begin, end) code point ranges.
    using Segs = std::vector<std::pair<size_t, size_t>>;
    Segs segs{{0, n}}, next;
    // Splits every piece by a regex searched for left to right: the matches and the text
    // between them become pieces (llama.cpp's unicode_regex_split_stl).
    auto search = [&](auto match) {
        next.clear();
        for (const auto &s : segs) {
            const Cursor c{t, s.second};
            size_t gap = s.first;
            for (size_t i = s.first; i < s.second;) {
                const size_t j = match(c, i);
                if (j > i) {
                    if (gap < i) next.emplace_back(gap, i);
                    next.emplace_back(i, j);
                    i = gap = j;
                } else {
                    ++i;
                }
            }
            if (gap < s.second) next.emplace_back(gap, s.second);
        }
        segs.swap(next);
    };
    // Splits every piece completely with the GPT-2 splitter (llama.cpp's custom one).
    auto gpt2 = [&]() {
        next.clear();
        for (const auto &s : segs) {
            const Cursor c{t, s.second};
            for (size_t i = s.first; i < s.second;) {
                const size_t j = match_gpt2(c, i);
                next.emplace_back(i, j);
                i = j;
            }
        }
        segs.swap(next);
    };
    auto space = [&](const Cursor &c, size_t k) { return c.space(k); };
    switch (kind_) {
        case Kind::DIGITS_GPT2:
            search(match_number);
            gpt2();
            break;
        case Kind::DEFAULT:
            search([](const Cursor &c, size_t i) { return match_punct_run(c, i, false); });
            gpt2();
            search(match_numbers);
            search(match_three_digits);
            break;
        case Kind::FALCON:
            search([](const Cursor &c, size_t i) { return match_punct_run(c, i, true); });
            gpt2();
            search(match_three_digits);
            break;
        case Kind::DEEPSEEK_LLM:
            search(match_newline);
            search([](const Cursor &c, size_t i) {
                return match_space_run(c, i, [&](size_t k) { return listed(c, k, kDeepseekLetters); });
            });
            search([](const Cursor &c, size_t i) {
                return match_space_run(c, i, [&](size_t k) { return listed(c, k, kDeepseekPunct); });
            });
            // \s+$: the whitespace ending a piece.
            next.clear();
            for (const auto &s : segs) {
                const Cursor c{t, s.second};
                size_t k = s.second;
                while (k > s.first && space(c, k - 1)) --k;
                if (k > s.first) next.emplace_back(s.first, k);
                if (k < s.second) next.emplace_back(k, s.second);
            }
            segs.swap(next);
            search([](const Cursor &c, size_t i) {
                return match_run(i, [&](size_t k) { return listed(c, k, kDeepseekCjk); });
            });
            search(match_numbers);
            break;
        case Kind::GPT4O:
            search([](const Cursor &c, size_t i) { return match_gpt4o(c, i, 3, true); });
            break;
        case Kind::TEKKEN:
            search([](const Cursor &c, size_t i) { return match_gpt4o(c, i, 1, false); });
            break;
        case Kind::DEEPSEEK3:
            search(match_numbers3);
            search([](const Cursor &c, size_t i) {
                return match_run(i, [&](size_t k) { return listed(c, k, kDeepseek3Cjk); });
            });
            search(match_deepseek3);
            break;
        case Kind::DEEPSEEK_CODER:
            search(match_newline);
            search([](const Cursor &c, size_t i) { return match_space_run(c, i, [&](size_t k) { return c.letter(k); }); });
            search([](const Cursor &c, size_t i) {
                return match_space_run(c, i, [&](size_t k) { return k < c.end && c.t.cls[k] == unicode::kPunct; });
            });
            search([](const Cursor &c, size_t i) {
                return match_run(i, [&](size_t k) { return listed(c, k, kDeepseekCjk); });
            });
            search(match_number);
            break;
        default: break;
    }
    for (const auto &s : segs) emit(s.first, s.second);
}

}  // namespace akunu
