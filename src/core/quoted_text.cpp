#include "core/quoted_text.h"

#include <cstdint>

namespace akunu {

namespace {

// Length of the valid UTF-8 character at s[i] (strict, as Python decodes), or 0 if there is none.
size_t utf8_char_length(const std::string &s, size_t i) {
    const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
    const uint8_t c = byte(i);
    size_t len;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1Fu; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0Fu; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07u; }
    else return 0;
    if (i + len > s.size()) return 0;
    for (size_t k = 1; k < len; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (byte(i + k) & 0x3Fu);
    }
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

}  // namespace

std::string quoted(const std::string &text) {
    constexpr size_t kMaxShown = 80;  // characters
    static const char hex[] = "0123456789abcdef";
    std::string out = "'";
    size_t shown = 0, i = 0;
    for (; i < text.size() && shown < kMaxShown; ++shown) {
        const auto c = static_cast<uint8_t>(text[i]);
        const size_t len = utf8_char_length(text, i);
        if (len > 1 || (len == 1 && c >= 0x20 && c < 0x7f && c != '\\')) {
            out.append(text, i, len);
            i += len;
        } else {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
            ++i;
        }
    }
    if (i < text.size()) out += "...";
    return out + "'";
}

}  // namespace akunu
