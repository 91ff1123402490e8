// Byte-level BPE tokenizer (tokenizer.ggml.model "gpt2"): the pre-tokenizer cuts the text into
// words, each word's bytes map to GPT-2's printable byte alphabet (one vocab symbol per byte),
// and adjacent symbols merge lowest merge rank first. Symbols are token ids, so a merge is one
// hash lookup on an id pair, and a heap plus a linked list keeps the work O(n log n) per word.
#include <deque>
#include <queue>
#include <unordered_map>

#include "core/quoted_text.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"
#include "weights/gguf_file.h"

namespace akunu {

namespace {

// GPT-2's bytes_to_unicode(): printable bytes stand for themselves, the rest (control
// characters, space, ...) are shifted to U+0100 and up so every byte is a visible character.
struct ByteMap {
    uint32_t to_cp[256];
    std::unordered_map<uint32_t, uint8_t> from_cp;
    ByteMap() {
        uint32_t next = 256;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
            to_cp[b] = printable ? b : next++;
            from_cp[to_cp[b]] = (uint8_t)b;
        }
    }
};
const ByteMap &byte_map() {
    static const ByteMap m;
    return m;
}

class BpeTokenizer final : public VocabTokenizer {
public:
    BpeTokenizer(Vocab vocab, const GGUFFile &file)
        : VocabTokenizer(std::move(vocab)), pre_(PreTokenizer::from_name(v_.pre)) {
        // Llama 3 vocabs (and others, by name) look whole words up before merging (HF ignore_merges).
        ignore_merges_ = pre_.ignore_merges();
        for (int b = 0; b < 256; ++b) {
            std::string s;
            unicode::append_utf8(s, byte_map().to_cp[b]);
            byte_strings_[b] = s;
            byte_tokens_[b] = intern(s);
        }
        const GGUFValue *merges = file.find("tokenizer.ggml.merges");
        // llama.cpp accepts a kimi-k2 vocab without merges (every character is then a token of its own).
        if (!merges && v_.pre == "kimi-k2") {
            init_pieces();
            return;
        }
        if (!merges || merges->type != GGUFValueType::ARRAY || merges->array_type != GGUFValueType::STRING)
            throw TokenizerError("byte-level BPE vocabulary without tokenizer.ggml.merges");
        merges_.reserve(merges->strings.size() * 2);
        int32_t rank = 0;
        for (const std::string &m : merges->strings) {
            const size_t sp = m.find(' ', 1);  // the left part may itself start with ' '
            if (sp == std::string::npos) throw TokenizerError("malformed BPE merge " + quoted(m));
            const int32_t l = intern(m.substr(0, sp)), r = intern(m.substr(sp + 1));
            const int32_t result = intern(m.substr(0, sp) + m.substr(sp + 1));
            merges_.emplace(pair_key(l, r), Merge{rank++, result});  // first (best) rank wins
        }
        init_pieces();
    }

protected:
    void encode_fragment(std::string_view text, bool after_special, std::vector<int32_t> &out) const override;
    std::string compute_piece(int32_t id) const override;

private:
    struct Merge { int32_t rank, result; };
    static uint64_t pair_key(int32_t l, int32_t r) { return ((uint64_t)(uint32_t)l << 32) | (uint32_t)r; }

    // Id of a symbol string: its vocab id, or a private id past the vocab for merge parts that
    // are not tokens themselves (so ids identify symbol texts exactly).
    int32_t intern(const std::string &s) {
        const int32_t id = find(s);
        if (id >= 0) return id;
        auto it = extra_.find(s);
        if (it != extra_.end()) return it->second;
        const int32_t nid = (int32_t)(v_.tokens.size() + extra_.size());
        extra_.emplace(s, nid);
        return nid;
    }

    void encode_word(std::string_view word, std::vector<int32_t> &out) const;

    PreTokenizer pre_;
    bool ignore_merges_ = false;
    std::string byte_strings_[256];
    int32_t byte_tokens_[256];
    std::unordered_map<std::string, int32_t> extra_;
    std::unordered_map<uint64_t, Merge> merges_;
};

struct Symbol { int32_t prev, next, id; };  // id -1 once merged into the left neighbour
struct Bigram { int32_t rank, left, right, left_id, right_id, result; };
struct BigramOrder {  // lowest rank first, then leftmost
    bool operator()(const Bigram &a, const Bigram &b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

void BpeTokenizer::encode_fragment(std::string_view text, bool, std::vector<int32_t> &out) const {
    std::vector<std::pair<uint32_t, uint32_t>> words;
    pre_.split(text, words);
    std::string encoded;
    for (const auto &w : words) {
        const std::string_view word = text.substr(w.first, w.second - w.first);
        if (ignore_merges_ && word.size() > 1) {
            encoded.clear();
            for (char c : word) encoded += byte_strings_[(uint8_t)c];
            const int32_t id = find(encoded);
            if (id >= 0) { out.push_back(id); continue; }
        }
        encode_word(word, out);
    }
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t> &out) const {
    const int32_t n = (int32_t)word.size();
    std::vector<Symbol> sym(n);
    for (int32_t i = 0; i < n; ++i) sym[i] = {i - 1, i + 1 < n ? i + 1 : -1, byte_tokens_[(uint8_t)word[i]]};

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int32_t l, int32_t r) {
        if (l < 0 || r < 0) return;
        auto it = merges_.find(pair_key(sym[l].id, sym[r].id));
        if (it == merges_.end()) return;
        queue.push({it->second.rank, l, r, sym[l].id, sym[r].id, it->second.result});
    };
    for (int32_t i = 1; i < n; ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        Symbol &L = sym[b.left], &R = sym[b.right];
        if (L.id != b.left_id || R.id != b.right_id) continue;  // a side changed since: stale
        L.id = b.result;
        R.id = -1;
        L.next = R.next;
        if (R.next >= 0) sym[R.next].prev = b.left;
        try_add(L.prev, b.left);
        try_add(b.left, L.next);
    }

    const int32_t n_vocab = (int32_t)v_.tokens.size();
    for (int32_t i = 0; i != -1 && i < n; i = sym[i].next) {
        if (sym[i].id >= 0 && sym[i].id < n_vocab) {
            out.push_back(sym[i].id);
            continue;
        }
        // A merge produced a string the vocab lacks: fall back to its single-byte tokens.
        const int32_t end = sym[i].next < 0 ? n : sym[i].next;
        for (int32_t k = i; k < end; ++k)
            if (byte_tokens_[(uint8_t)word[k]] < n_vocab) out.push_back(byte_tokens_[(uint8_t)word[k]]);
    }
}

std::string BpeTokenizer::compute_piece(int32_t id) const {
    const std::string &text = v_.tokens[id];
    const int32_t type = v_.types[id];
    if (type == kUnused) return {};
    if (type != kNormal && type != kByte) return text;  // control/user-defined/unknown: stored raw
    // Undo the byte mapping; characters outside it (should not happen) are kept as they are.
    std::string r;
    for (size_t i = 0; i < text.size();) {
        size_t len;
        const uint32_t cp = unicode::decode_utf8(text.data(), text.size(), i, &len);
        auto it = byte_map().from_cp.find(cp);
        if (it != byte_map().from_cp.end()) r += (char)it->second;
        else r.append(text, i, len);
        i += len;
    }
    return r;
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab, const GGUFFile &file) {
    return std::make_unique<BpeTokenizer>(std::move(vocab), file);
}

}  // namespace akunu
