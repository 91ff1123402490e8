#include "error_checks.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>


namespace akunu_fuzz {

namespace {
// Strict UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF), as Python decodes it.
bool valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        size_t len;
        unsigned int cp;
        if (c < 0x80) { ++i; continue; }
        if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
        else return false;
        if (i + len > n) return false;
        for (size_t k = 1; k < len; ++k) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}
}  // namespace

void check_error_message(const std::exception &e) {
    const char *message = e.what();
    if (!valid_utf8(reinterpret_cast<const unsigned char *>(message), std::strlen(message))) {
        std::fprintf(stderr, "error message is not valid UTF-8: %s\n", message);
        std::abort();
    }
}

}  // namespace akunu_fuzz
