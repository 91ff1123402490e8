// Hand-written equivalents of the pre-tokenizer regexes. Each matcher returns the end of the
// match starting at code point i, trying the regex alternatives in order as a backtracking
// regex engine would (first alternative that matches wins, quantifiers greedy).
#include "tokenizer/pretokenizer.h"

#include <cstdint>
#include <initializer_list>
#include <iterator>

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

// \p{N}{1,max} at i; i when no number starts there.
size_t match_numbers_up_to(const Cursor &c, size_t i, size_t max) {
    size_t k = i;
    while (c.number(k) && k - i < max) ++k;
    return k;
}

// What may follow ' ?[^\s\p{L}\p{N}]+' in the regexes: nothing, [\r\n]*, [\r\n/]* or [\r\n/]?.
enum class OtherTail { kNone, kNewlines, kNewlinesOrSlashes, kOneNewlineOrSlash };

// ' ?[^\s\p{L}\p{N}]+' and its tail at i; i when it does not match there.
size_t match_other_run(const Cursor &c, size_t i, OtherTail tail) {
    size_t k = (c.at(i) == ' ' && c.other(i + 1)) ? i + 1 : i;
    if (!c.other(k)) return i;
    while (c.other(k)) ++k;
    auto newline_or_slash = [&](size_t j) { return c.newline(j) || c.at(j) == '/'; };
    switch (tail) {
        case OtherTail::kNone: break;
        case OtherTail::kNewlines: while (c.newline(k)) ++k; break;
        case OtherTail::kNewlinesOrSlashes: while (newline_or_slash(k)) ++k; break;
        case OtherTail::kOneNewlineOrSlash: if (newline_or_slash(k)) ++k; break;
    }
    return k;
}

size_t match_gpt2(const Cursor &c, size_t i) {
    if (size_t k = match_contraction(c, i, false)) return k;
    const bool sp = c.at(i) == ' ';
    size_t k = (sp && c.letter(i + 1)) ? i + 1 : i;  // ' ?\p{L}+'
    if (c.letter(k)) { while (c.letter(k)) ++k; return k; }
    k = (sp && c.number(i + 1)) ? i + 1 : i;  // ' ?\p{N}+'
    if (c.number(k)) { while (c.number(k)) ++k; return k; }
    if (size_t e = match_other_run(c, i, OtherTail::kNone); e > i) return e;
    if (c.space(i)) return match_trailing_space(c, i);
    return i + 1;
}

// jais-2's whitespace alternatives for a run starting at i:
// \s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|...|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}
size_t match_jais2_spaces(const Cursor &c, size_t i) {
    size_t k = i, last_nl = SIZE_MAX;
    for (; c.space(k); ++k)
        if (c.newline(k)) last_nl = k;
    if (last_nl != SIZE_MAX) return last_nl + 1;
    const size_t run = k - i;
    const bool word_follows = k < c.end;  // (?!\S) fails at a run's end only when a non-space follows
    // \s{n}(?!\S) for n = 512 ... 4, then the 2 of \s{1,2}(?!\S); its 1 and \s{1} both take one space.
    for (size_t n = 512; n >= 2; n /= 2)
        if (run > n || (run == n && !word_follows)) return i + n;
    return i + 1;
}

// contractions: the (?i:'s|...) alternative (ufakzeka drops it); punct_newlines: the [\r\n]* after
// ' ?[^\s\p{L}\p{N}]+' (seed-coder drops it); spaces: the whitespace alternatives (jais-2 has its own).
size_t match_llama3(const Cursor &c, size_t i, size_t max_digits, bool contractions = true,
                    bool punct_newlines = true, size_t (*spaces)(const Cursor &, size_t) = match_space_newlines) {
    if (contractions)
        if (size_t k = match_contraction(c, i, true)) return k;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!c.newline(i) && !c.letter(i) && !c.number(i) && c.letter(i + 1)) {
        size_t k = i + 1;
        while (c.letter(k)) ++k;
        return k;
    }
    if (c.letter(i)) { size_t k = i; while (c.letter(k)) ++k; return k; }
    if (c.number(i)) return match_numbers_up_to(c, i, max_digits);
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    if (size_t k = match_other_run(c, i, punct_newlines ? OtherTail::kNewlines : OtherTail::kNone); k > i) return k;
    if (c.space(i)) return spaces(c, i);
    return i + 1;
}

// Which code points the word alternatives of match_gpt4o take. kCased: letters, upper and lower
// case told apart as below (gpt-4o, tekken); kCasedMarks: the same with marks counted as letters
// (granite-embed-multi-97m's [\p{L}\p{M}] lookaheads); kMarks: letters and marks, case ignored
// (youtu, tiny_aya: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}] both become "letter
// or mark" when llama.cpp maps each code point to one byte for its category).
enum class Letters { kCased, kCasedMarks, kMarks };

// gpt-4o (with_contractions, 3 digits) and tekken (neither, 1 digit), as llama.cpp runs them:
// [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,max}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// where U is a letter but a-z, W a letter but A-Z (non-ASCII letters are both: llama.cpp's
// ((?=[\p{L}])([^a-z])) on one byte per code point) and C the optional (?i:'s|...) contraction.
size_t match_gpt4o(const Cursor &c, size_t i, size_t max_digits, bool with_contractions,
                   Letters letters = Letters::kCased) {
    auto word = [&](size_t k) {
        return c.letter(k) || (letters != Letters::kCased && k < c.end && c.t.cls[k] == unicode::kMark);
    };
    const bool cased = letters != Letters::kMarks;
    auto U = [&](size_t k) { return word(k) && !(cased && c.at(k) >= 'a' && c.at(k) <= 'z'); };
    auto W = [&](size_t k) { return word(k) && !(cased && c.at(k) >= 'A' && c.at(k) <= 'Z'); };
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
    if (c.number(i)) return match_numbers_up_to(c, i, max_digits);
    if (size_t k = match_other_run(c, i, OtherTail::kNewlinesOrSlashes); k > i) return k;
    if (c.space(i)) return match_space_newlines(c, i);
    return i < c.end ? i + 1 : i;
}

// deepseek-v3's last stage:
// [!-/:-@[-`{-~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// and spark2_5's, which ends in | ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+ instead.
// Returns i when nothing matches there (a number: the first stage made those pieces).
size_t match_deepseek3(const Cursor &c, size_t i, bool spark = false) {
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
        while (!spark && c.newline(k)) ++k;
        return k;
    }
    if (spark) {
        if (c.newline(i)) return i + 1;
        if (c.space(i)) return match_trailing_space(c, i);  // newlines inside the run included
        return i;
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

// exaone-moe, run by llama.cpp as a regex:
// (?i:'s|...)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+
// (words joined by single spaces stay one piece; \s*[\r\n] ends at a run's last newline as \s*[\r\n]+ does).
size_t match_exaone_moe(const Cursor &c, size_t i) {
    if (size_t k = match_contraction(c, i, true)) return k;
    auto mark = [&](size_t k) { return k < c.end && c.t.cls[k] == unicode::kMark; };
    auto words = [&](size_t p) {  // end of (\p{L}\p{M}*(?: \p{L}\p{M}*)*)+ from p, p if none
        size_t k = p;
        for (;;) {
            if (c.letter(k)) ++k;
            else if (k > p && c.at(k) == ' ' && c.letter(k + 1)) k += 2;
            else return k;
            while (mark(k)) ++k;
        }
    };
    if (i < c.end && !c.newline(i) && !c.letter(i) && !c.number(i))  // the optional leading character
        if (size_t k = words(i + 1); k > i + 1) return k;
    if (size_t k = words(i); k > i) return k;
    if (c.number(i)) return i + 1;
    if (size_t k = match_other_run(c, i, OtherTail::kOneNewlineOrSlash); k > i) return k;
    if (c.space(i)) return match_space_newlines(c, i);
    return i < c.end ? i + 1 : i;
}

// llama.cpp's unicode_cpt_is_han.
bool is_han(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2EBEF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// kimi-k2: llama.cpp's hand-written splitter for
// \p{Han}+|[^\r\n\p{L}\p{N}]?[letters but Han]+(?i:'s|...)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// (its letter runs take no marks, and the contraction is lowercased with the full Unicode table).
size_t match_kimi_k2(const Cursor &c, size_t i) {
    auto han = [&](size_t k) { return k < c.end && is_han(c.t.cps[k]); };
    auto letter = [&](size_t k) { return c.letter(k) && !han(k); };
    if (han(i)) {
        size_t k = i;
        while (han(k)) ++k;
        return k;
    }
    const bool lead = !c.newline(i) && !c.letter(i) && !c.number(i);
    if (letter(i) || (lead && letter(i + 1))) {
        size_t k = lead ? i + 1 : i;
        while (letter(k)) ++k;
        if (c.at(k) == '\'' && k + 1 < c.end) {
            const uint32_t a = unicode::to_lower(c.t.cps[k + 1]);
            const uint32_t b = k + 2 < c.end ? unicode::to_lower(c.t.cps[k + 2]) : 0;
            if (a == 's' || a == 't' || a == 'm' || a == 'd') k += 2;
            else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) k += 3;
        }
        return k;
    }
    if (c.number(i)) return match_numbers_up_to(c, i, 3);
    if (size_t k = match_other_run(c, i, OtherTail::kNewlines); k > i) return k;
    if (c.space(i)) return match_space_newlines(c, i);
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

// afmoe's [一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+, sorted and merged. Its 豈 is
// U+8C48 (not the compatibility U+F900), so that range runs U+8C48..U+FAFF and swallows the Hangul,
// Myanmar and Cham ranges listed after it.
const Range kAfmoeScripts[] = {{0x0E40, 0x0EFF}, {0x1000, 0x109F}, {0x1100, 0x11FF}, {0x1780, 0x17FF},
                               {0x2F00, 0x2FDF}, {0x3040, 0x30FF}, {0x3400, 0x4DBF}, {0x4E00, 0xFAFF},
                               {0xFF65, 0xFF9F}};

// youtu's first stage, [가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+: four classes, each
// matched as a run of its own.
const Range kYoutuHangul[] = {{0x3131, 0x318E}, {0xAC00, 0xD7A3}};
const Range kYoutuPunct[] = {{0x2014, 0x2014}, {0x2018, 0x2019}, {0x201C, 0x201D}, {0x2026, 0x2026},
                             {0x3001, 0x303F}, {0xFE30, 0xFE4F}, {0xFF01, 0xFF01}, {0xFF0C, 0xFF0C},
                             {0xFF1A, 0xFF1B}};
const Range kYoutuBopomofo[] = {{0x3105, 0x312F}};
const Range kYoutuCjk[] = {{0x3040, 0x30FF}, {0x4E00, 0x9FA5}};

// poro-chat / bloom / gpt3-finnish's [^(\s|.,!?…。，、।۔،)] leaves out these (and whitespace).
const uint32_t kPoroStops[] = {'(', ')', '|', '.', ',', '!', '?', 0x2026, 0x3002, 0xFF0C, 0x3001, 0x0964, 0x06D4, 0x060C};

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
size_t match_numbers3(const Cursor &c, size_t i) { return match_numbers_up_to(c, i, 3); }  // \p{N}{1,3}
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

size_t match_youtu_scripts(const Cursor &c, size_t i) {
    for (const auto &r : {std::make_pair(kYoutuHangul, std::size(kYoutuHangul)),
                          std::make_pair(kYoutuPunct, std::size(kYoutuPunct)),
                          std::make_pair(kYoutuBopomofo, std::size(kYoutuBopomofo)),
                          std::make_pair(kYoutuCjk, std::size(kYoutuCjk))}) {
        auto in = [&](size_t k) {
            return k < c.end && !(c.t.space[k] && c.t.cps[k] >= 0x80) && in_ranges(c.t.cps[k], r.first, r.second);
        };
        if (in(i)) return match_run(i, in);
    }
    return i;
}

size_t match_poro(const Cursor &c, size_t i) {  //  ?[^(\s|.,!?…。，、।۔،)]+
    auto in = [&](size_t k) {
        if (k >= c.end || c.t.space[k]) return false;
        for (uint32_t stop : kPoroStops)
            if (c.t.cps[k] == stop) return false;
        return true;
    };
    const size_t k = (c.at(i) == ' ' && in(i + 1)) ? i + 1 : i;
    return in(k) ? match_run(k, in) : i;
}

// chameleon's stages before GPT-2's regex.
size_t match_literal(const Cursor &c, size_t i, const char *s) {  // end of the ASCII text s at i, or i
    size_t k = i;
    for (; *s; ++s, ++k)
        if (c.at(k) != (uint8_t)*s) return i;
    return k;
}
size_t match_sentinel(const Cursor &c, size_t i) {  // <sentinel:[0-9]+>
    size_t k = match_literal(c, i, "<sentinel:");
    if (k == i) return i;
    const size_t digits = k;
    while (c.at(k) >= '0' && c.at(k) <= '9') ++k;
    return k > digits && c.at(k) == '>' ? k + 1 : i;
}
size_t match_image_tokens(const Cursor &c, size_t i) {  // (IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z
    size_t k = match_literal(c, i, "IMGIMG");
    if (k == i) return i;
    const size_t letters = k;
    while (c.at(k) >= 'A' && c.at(k) <= 'I' && k - letters < 4) ++k;
    return k > letters && c.at(k) == 'Z' ? k + 1 : i;
}
size_t match_tab_newline_spaces(const Cursor &c, size_t i) {  // ([\t\n]|    |  )
    if (c.at(i) == '\t' || c.at(i) == '\n') return i + 1;
    if (size_t k = match_literal(c, i, "    "); k > i) return k;
    return match_literal(c, i, "  ");
}
size_t match_chameleon_punct(const Cursor &c, size_t i) {  // [\p{P}!-/:-@\[-`{-~]: one character
    if (i >= c.end) return i;
    const uint32_t cp = c.t.cps[i];
    const bool in = cp < 0x80 ? (cp >= 0x21 && cp <= 0x7E && !(cp >= '0' && cp <= '9') &&
                                 !(cp >= 'A' && cp <= 'Z') && !(cp >= 'a' && cp <= 'z'))
                              : (!c.t.space[i] && c.t.cls[i] == unicode::kPunct);
    return in ? i + 1 : i;
}
size_t match_newline_runs(const Cursor &c, size_t i) {  // [^\n]+|[\n]+
    if (i >= c.end) return i;
    const bool nl = c.t.cps[i] == '\n';
    return match_run(i, [&](size_t k) { return k < c.end && (c.t.cps[k] == '\n') == nl; });
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
    if (pre == "spark2_5") return PreTokenizer(Kind::SPARK2_5);
    if (pre == "afmoe") return PreTokenizer(Kind::AFMOE);
    if (pre == "minicpm5") return PreTokenizer(Kind::MINICPM5, true);
    if (pre == "jais-2") return PreTokenizer(Kind::JAIS2);
    if (pre == "exaone-moe") return PreTokenizer(Kind::EXAONE_MOE);
    if (pre == "granite-embed-multi-97m") return PreTokenizer(Kind::GRANITE_97M, true);
    if (pre == "youtu") return PreTokenizer(Kind::YOUTU, true);
    if (is({"tiny_aya", "cohere2moe"})) return PreTokenizer(Kind::TINY_AYA);
    if (pre == "laguna") return PreTokenizer(Kind::LAGUNA);
    if (pre == "kimi-k2") return PreTokenizer(Kind::KIMI_K2);
    if (is({"poro-chat", "bloom", "gpt3-finnish"})) return PreTokenizer(Kind::PORO);
    if (pre == "viking") return PreTokenizer(Kind::VIKING);
    if (pre == "chameleon") return PreTokenizer(Kind::CHAMELEON);
    if (pre == "superbpe") return PreTokenizer(Kind::SUPERBPE);
    // Refused: "whitespace". llama.cpp's converter writes it only beside tokenizer.ggml.model "whitespace"
    // (a tokenizer that drops whitespace before BPE, which akunu does not have); with a "gpt2" vocab
    // llama.cpp splits \S+ over raw UTF-8 and aborts (GGML_ASSERT in find_bpe_rank) on any whitespace
    // run of two or more characters holding a space, so there is no behaviour to match.
    throw UnsupportedError("unsupported tokenizer pre-tokenizer (tokenizer.ggml.pre) " + quoted(pre));
}

bool PreTokenizer::sentencepiece_style(const std::string &pre) {
    // llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4 and _SARVAM_MOE (escape_whitespaces on, byte_encode off).
    return name_in(pre, {"gemma4", "granite-embed-multi-311m", "sarvam-moe"});
}

bool PreTokenizer::adds_bos(const std::string &pre) {
    // llama_vocab::impl::load sets add_bos for these; gemma4's BOS is forced on in gemma4_tokenizer.cpp.
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
                case Kind::KIMI_K2: j = match_kimi_k2(c, i); break;
                default: j = match_gpt2(c, i); break;
            }
            emit(i, j);
            i = j;
        }
    };
    switch (kind_) {
        case Kind::GPT2: case Kind::LLAMA3: case Kind::QWEN2: case Kind::QWEN35: case Kind::SEED_CODER:
        case Kind::UFAKZEKA: case Kind::KIMI_K2:
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
    // Splits every piece completely with one of llama.cpp's hand-written splitters (every match is
    // non-empty and they leave no gaps).
    auto split_all = [&](auto match) {
        next.clear();
        for (const auto &s : segs) {
            const Cursor c{t, s.second};
            for (size_t i = s.first; i < s.second;) {
                const size_t j = match(c, i);
                next.emplace_back(i, j);
                i = j;
            }
        }
        segs.swap(next);
    };
    auto gpt2 = [&]() { split_all(match_gpt2); };
    // llama.cpp's digit grouping (afmoe, and tiny_aya's \d{1,3}(?=(?:\d{3})*\b)): a run of n numbers becomes
    // its first n % 3, then groups of three. The first group also takes the text since the previous
    // group, as llama.cpp's splitter cuts only where a group ends.
    auto digit_groups = [&]() {
        next.clear();
        for (const auto &s : segs) {
            const Cursor c{t, s.second};
            size_t prev = s.first;
            for (size_t i = s.first; i < s.second;) {
                if (!c.number(i)) { ++i; continue; }
                const size_t run_end = match_numbers(c, i);
                size_t cut = i + (run_end - i) % 3;
                if (cut == i) cut += 3;
                for (; cut <= run_end; cut += 3) {
                    next.emplace_back(prev, cut);
                    prev = cut;
                }
                i = run_end;
            }
            if (prev < s.second) next.emplace_back(prev, s.second);
        }
        segs.swap(next);
    };
    // superbpe's (?=(\d{3})+(?!\d)): an empty match wherever the ASCII digits from there to the end of
    // their run are a multiple of three, so a piece is cut there.
    auto cut_digit_triples = [&]() {
        next.clear();
        auto digit = [&](size_t k, size_t end) { return k < end && t.cps[k] >= '0' && t.cps[k] <= '9'; };
        for (const auto &s : segs) {
            size_t prev = s.first;
            for (size_t i = s.first; i < s.second;) {
                if (!digit(i, s.second)) { ++i; continue; }
                size_t run_end = i;
                while (digit(run_end, s.second)) ++run_end;
                for (size_t cut = i + (run_end - i) % 3; cut < run_end; cut += 3) {
                    if (cut > prev) next.emplace_back(prev, cut);
                    prev = cut;
                }
                i = run_end;
            }
            if (prev < s.second) next.emplace_back(prev, s.second);
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
        case Kind::GRANITE_97M:
            search([](const Cursor &c, size_t i) { return match_gpt4o(c, i, 3, true, Letters::kCasedMarks); });
            break;
        case Kind::YOUTU:
            search(match_youtu_scripts);
            search([](const Cursor &c, size_t i) { return match_gpt4o(c, i, 1, true, Letters::kMarks); });
            break;
        case Kind::TINY_AYA:
            digit_groups();
            search([](const Cursor &c, size_t i) { return match_gpt4o(c, i, 3, true, Letters::kMarks); });
            break;
        case Kind::SPARK2_5:
            search(match_numbers3);
            search([](const Cursor &c, size_t i) {
                return match_run(i, [&](size_t k) { return listed(c, k, kDeepseek3Cjk); });
            });
            search([](const Cursor &c, size_t i) { return match_deepseek3(c, i, true); });
            search(match_number);
            break;
        case Kind::AFMOE:
            digit_groups();
            search([](const Cursor &c, size_t i) {
                return match_run(i, [&](size_t k) { return listed(c, k, kAfmoeScripts); });
            });
            search([](const Cursor &c, size_t i) { return match_deepseek3(c, i); });
            break;
        case Kind::MINICPM5:
            search(match_numbers3);
            search([](const Cursor &c, size_t i) { return match_llama3(c, i, SIZE_MAX); });
            break;
        case Kind::JAIS2:
            search([](const Cursor &c, size_t i) { return match_llama3(c, i, 3, true, true, match_jais2_spaces); });
            break;
        case Kind::EXAONE_MOE:
            search(match_exaone_moe);
            break;
        case Kind::LAGUNA:
            search(match_newline_runs);
            split_all([](const Cursor &c, size_t i) { return match_llama3(c, i, 1); });
            break;
        case Kind::PORO:
            search(match_poro);
            break;
        case Kind::VIKING:
            search(match_poro);
            search(match_number);
            break;
        case Kind::CHAMELEON:
            search(match_sentinel);
            search(match_image_tokens);
            search(match_tab_newline_spaces);
            search(match_number);
            search(match_chameleon_punct);
            gpt2();
            break;
        case Kind::SUPERBPE:
            search(match_numbers);
            cut_digit_triples();
            break;

        case Kind::TEKKEN:
            search([](const Cursor &c, size_t i) { return match_gpt4o(c, i, 1, false); });
            break;
        case Kind::DEEPSEEK3:
            search(match_numbers3);
            search([](const Cursor &c, size_t i) {
                return match_run(i, [&](size_t k) { return listed(c, k, kDeepseek3Cjk); });
            });
            search([](const Cursor &c, size_t i) { return match_deepseek3(c, i); });
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
