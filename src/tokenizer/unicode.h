// UTF-8 decoding/encoding and the Unicode character classes the pre-tokenizers match on
// (\p{L}, \p{N}, \s, ...). Tables come from unicode_tables.h (generated, see tools/).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace akunu {
namespace unicode {

// General category class (first letter of the Unicode general category).
enum CatClass : uint8_t { kOther = 0, kLetter = 1, kMark = 2, kNumber = 3, kPunct = 4, kSymbol = 5, kSeparator = 6 };

CatClass category(uint32_t cp);
bool is_whitespace(uint32_t cp);  // Unicode White_Space property, i.e. regex \s
bool is_control(uint32_t cp);     // categories Cc, Cf, Cs, Co (not unassigned code points)
uint32_t to_lower(uint32_t cp);   // simple lowercase (first code point of the full mapping)
uint32_t nfd_base(uint32_t cp);   // first code point of the canonical decomposition, else cp

// Length of the UTF-8 sequence introduced by `lead` (1 for invalid lead bytes, so that
// scanning always advances).
inline size_t utf8_len(uint8_t lead) {
    static const uint8_t lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[lead >> 4];
}

// Decodes one code point at s[i] (i < n) and sets *len to its byte length. An invalid or
// truncated sequence consumes one byte and returns kInvalid (classed as "other", like U+FFFD).
constexpr uint32_t kInvalid = 0xFFFFFFFFu;
uint32_t decode_utf8(const char *s, size_t n, size_t i, size_t *len);

// Number of bytes at the end of `s` that form an incomplete (but so far valid) UTF-8 sequence.
size_t incomplete_utf8_tail(const std::string &s);

void append_utf8(std::string &out, uint32_t cp);

// Text split into code points, with the byte offset of each (offsets.size() == cps.size() + 1),
// so matchers work on code points and still cut the original bytes exactly.
struct CodepointText {
    std::vector<uint32_t> cps;
    std::vector<uint8_t> cls;     // category class per code point
    std::vector<uint8_t> space;   // is_whitespace per code point
    std::vector<uint32_t> offsets;
    void assign(const char *s, size_t n);
};

}  // namespace unicode
}  // namespace akunu
