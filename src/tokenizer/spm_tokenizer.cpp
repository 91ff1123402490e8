// SentencePiece-style tokenizer (tokenizer.ggml.model "llama"), as llama.cpp implements it:
// spaces become "▁", the text is split into UTF-8 characters, and adjacent pieces are merged
// greedily, highest vocab score first, while the merged text is a token. Pieces that end up
// not being tokens are emitted as byte tokens <0xXX>.
#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/sentencepiece_alphabet.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace akunu {

namespace {

class SpmTokenizer final : public VocabTokenizer {
public:
    explicit SpmTokenizer(Vocab vocab) : VocabTokenizer(std::move(vocab)) {
        for (int b = 0; b < 256; ++b) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "<0x%02X>", b);
            int32_t id = find(hex);
            if (id < 0) id = find(std::string(1, (char)b));  // some vocabs store bytes raw
            if (id < 0) id = v_.unk;
            byte_tokens_[b] = id;
        }
        init_pieces();
    }

protected:
    void encode_fragment(std::string_view text, bool after_special, std::vector<int32_t> &out) const override;
    std::string compute_piece(int32_t id) const override;

private:
    int32_t byte_tokens_[256];
};

struct Symbol {
    int32_t prev, next;
    uint32_t start, n;  // bytes of the escaped text; n == 0 once merged into its left neighbour
};

struct Bigram {
    float score;
    int32_t left, right;
    uint32_t size;  // bytes; a mismatch later means one side has changed since
};

struct BigramOrder {  // max score first, then leftmost
    bool operator()(const Bigram &a, const Bigram &b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

void SpmTokenizer::encode_fragment(std::string_view text, bool after_special, std::vector<int32_t> &out) const {
    // Escape: optional space prefix, then every ' ' becomes "▁".
    std::string s;
    s.reserve(text.size() + 8);
    if (v_.add_space_prefix && after_special) s += kSpaceMarker;
    for (char c : text) {
        if (c == ' ') s += kSpaceMarker;
        else s += c;
    }
    if (s.empty()) return;

    std::vector<Symbol> sym;
    for (size_t off = 0; off < s.size();) {
        const size_t len = std::min(unicode::utf8_len((uint8_t)s[off]), s.size() - off);
        const int32_t idx = (int32_t)sym.size();
        sym.push_back({idx - 1, off + len == s.size() ? -1 : idx + 1, (uint32_t)off, (uint32_t)len});
        off += len;
    }

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int32_t l, int32_t r) {
        if (l < 0 || r < 0) return;
        const uint32_t size = sym[l].n + sym[r].n;
        const int32_t id = find(std::string_view(s).substr(sym[l].start, size));
        if (id < 0) return;
        queue.push({v_.scores[id], l, r, size});
    };
    for (int32_t i = 1; i < (int32_t)sym.size(); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        Symbol &L = sym[b.left], &R = sym[b.right];
        if (L.n == 0 || R.n == 0 || L.n + R.n != b.size) continue;  // stale
        L.n += R.n;
        R.n = 0;
        L.next = R.next;
        if (R.next >= 0) sym[R.next].prev = b.left;
        try_add(L.prev, b.left);
        try_add(b.left, L.next);
    }

    for (int32_t i = 0; i != -1; i = sym[i].next) {
        const std::string_view piece = std::string_view(s).substr(sym[i].start, sym[i].n);
        const int32_t id = find(piece);
        if (id >= 0) {
            out.push_back(id);
            continue;
        }
        for (char c : piece)  // byte fallback
            if (byte_tokens_[(uint8_t)c] >= 0) out.push_back(byte_tokens_[(uint8_t)c]);
    }
}

std::string SpmTokenizer::compute_piece(int32_t id) const { return sentencepiece_piece(v_, id); }

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab) {
    return std::make_unique<SpmTokenizer>(std::move(vocab));
}

}  // namespace akunu
