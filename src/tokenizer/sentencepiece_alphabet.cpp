#include "tokenizer/sentencepiece_alphabet.h"

#include <cstdio>

namespace akunu {

std::string sentencepiece_piece(const Vocab &v, int32_t id) {
    const std::string &text = v.tokens[id];
    switch (v.types[id]) {
        case kNormal: {
            std::string r;
            for (size_t i = 0; i < text.size(); ++i) {
                if (text.compare(i, 3, kSpaceMarker) == 0) { r += ' '; i += 2; }
                else r += text[i];
            }
            return r;
        }
        case kByte: {
            unsigned b = 0;
            if (text.size() == 6 && std::sscanf(text.c_str(), "<0x%2X>", &b) == 1) return std::string(1, (char)b);
            return text;
        }
        case kUnused: return {};
        default: return text;  // control, user-defined, unknown: their text
    }
}

}  // namespace akunu
