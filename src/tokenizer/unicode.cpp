// Unicode class lookups (binary search in generated run tables, ASCII fast path) and UTF-8 helpers.
#include "tokenizer/unicode.h"

#include <algorithm>

#include "tokenizer/unicode_tables.h"

namespace akunu {
namespace unicode {

namespace {

uint8_t lookup_class(uint32_t cp) {
    using unicode_tables::kCategoryRuns;
    const size_t n = sizeof(kCategoryRuns) / sizeof(kCategoryRuns[0]);
    // Last run whose first <= cp.
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (kCategoryRuns[mid].first <= cp) lo = mid; else hi = mid;
    }
    return kCategoryRuns[lo].cls;
}

struct AsciiTable {
    uint8_t cls[128];
    AsciiTable() { for (uint32_t c = 0; c < 128; ++c) cls[c] = lookup_class(c); }
};
const AsciiTable &ascii() {
    static const AsciiTable t;
    return t;
}

}  // namespace

CatClass category(uint32_t cp) {
    if (cp < 128) return (CatClass)ascii().cls[cp];
    if (cp > 0x10FFFF) return kOther;  // includes kInvalid
    return (CatClass)lookup_class(cp);
}

bool is_whitespace(uint32_t cp) {
    if (cp < 128) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
    for (const auto &r : unicode_tables::kWhiteSpace)
        if (cp >= r.first && cp <= r.last) return true;
    return false;
}

bool is_control(uint32_t cp) {
    const auto &t = unicode_tables::kControl;
    const auto *it = std::upper_bound(std::begin(t), std::end(t), cp,
                                      [](uint32_t c, const unicode_tables::Range &r) { return c < r.first; });
    return it != std::begin(t) && cp <= (it - 1)->last;
}

uint32_t to_lower(uint32_t cp) {
    if (cp < 128) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    const auto &t = unicode_tables::kLowercase;
    const auto *it = std::lower_bound(std::begin(t), std::end(t), cp,
                                      [](const unicode_tables::CaseMap &m, uint32_t c) { return m.cp < c; });
    return it != std::end(t) && it->cp == cp ? it->lower : cp;
}

uint32_t nfd_base(uint32_t cp) {
    if (cp < 0xC0) return cp;
    const auto &t = unicode_tables::kNfdBase;
    const auto *it = std::upper_bound(std::begin(t), std::end(t), cp,
                                      [](uint32_t c, const unicode_tables::NfdRun &r) { return c < r.first; });
    return it != std::begin(t) && cp <= (it - 1)->last ? (it - 1)->base : cp;
}

uint32_t decode_utf8(const char *s, size_t n, size_t i, size_t *len) {
    const uint8_t c = (uint8_t)s[i];
    if (c < 0x80) { *len = 1; return c; }
    size_t l = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xE0) == 0xC0) { l = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { l = 3; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { l = 4; cp = c & 0x07; min = 0x10000; }
    else { *len = 1; return kInvalid; }
    if (i + l > n) { *len = 1; return kInvalid; }
    for (size_t k = 1; k < l; ++k) {
        const uint8_t cc = (uint8_t)s[i + k];
        if ((cc & 0xC0) != 0x80) { *len = 1; return kInvalid; }
        cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) { *len = 1; return kInvalid; }
    *len = l;
    return cp;
}

size_t incomplete_utf8_tail(const std::string &s) {
    // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
    const size_t n = s.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        const uint8_t c = (uint8_t)s[n - back];
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        size_t need = 0;
        if ((c & 0xE0) == 0xC0) need = 2;
        else if ((c & 0xF0) == 0xE0) need = 3;
        else if ((c & 0xF8) == 0xF0) need = 4;
        return (need > back) ? back : 0;
    }
    return 0;
}

void append_utf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
        out += (char)cp;
    } else if (cp < 0x800) {
        out += (char)(0xC0 | (cp >> 6));
        out += (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += (char)(0xE0 | (cp >> 12));
        out += (char)(0x80 | ((cp >> 6) & 0x3F));
        out += (char)(0x80 | (cp & 0x3F));
    } else {
        out += (char)(0xF0 | (cp >> 18));
        out += (char)(0x80 | ((cp >> 12) & 0x3F));
        out += (char)(0x80 | ((cp >> 6) & 0x3F));
        out += (char)(0x80 | (cp & 0x3F));
    }
}

void CodepointText::assign(const char *s, size_t n) {
    cps.clear(); cls.clear(); space.clear(); offsets.clear();
    size_t i = 0;
    while (i < n) {
        size_t len;
        const uint32_t cp = decode_utf8(s, n, i, &len);
        cps.push_back(cp);
        cls.push_back(category(cp));
        space.push_back(cp != kInvalid && is_whitespace(cp));
        offsets.push_back((uint32_t)i);
        i += len;
    }
    offsets.push_back((uint32_t)n);
}

}  // namespace unicode
}  // namespace akunu
