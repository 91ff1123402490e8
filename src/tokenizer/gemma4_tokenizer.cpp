// Gemma 4's tokenizer (tokenizer.ggml.model "gemma4"), as llama.cpp runs it: BPE over raw UTF-8 in
// SentencePiece's alphabet. Spaces become "▁", the text is cut only into runs of newlines and runs
// of everything else, and each run starts as one symbol per UTF-8 character; adjacent symbols merge
// lowest merge rank first (tokenizer.ggml.merges). A newline run that is a token stays whole. A
// final symbol the vocabulary lacks becomes its <0xXX> byte tokens. BOS is always added.
// llama.cpp runs "gpt2" vocabs whose tokenizer.ggml.pre is gemma4 or granite-embed-multi-311m the same
// way, and sarvam-moe ones too, less the whole newline runs and the forced BOS.
#include <cstdio>
#include <queue>
#include <unordered_map>

#include "core/quoted_text.h"
#include "tokenizer/sentencepiece_alphabet.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"
#include "weights/gguf_file.h"

namespace akunu {

namespace {

class Gemma4Tokenizer final : public VocabTokenizer {
public:
    Gemma4Tokenizer(Vocab vocab, const GGUFFile &file) : VocabTokenizer(std::move(vocab)) {
        if (v_.model == "gemma4") v_.pre = "gemma4";  // llama.cpp ignores the file's pre name then
        newline_words_ = v_.pre != "sarvam-moe";
        // llama.cpp turns add_bos on for Gemma 4 (and granite-embed-multi-311m) whatever the file says
        if (newline_words_) v_.add_bos = v_.bos >= 0;
        v_.add_space_prefix = false;
        for (int b = 0; b < 256; ++b) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "<0x%02X>", b);
            byte_tokens_[b] = find(hex);
        }
        const GGUFValue *merges = file.find("tokenizer.ggml.merges");
        if (!merges || merges->type != GGUFValueType::ARRAY || merges->array_type != GGUFValueType::STRING)
            throw TokenizerError("gemma4 vocabulary without tokenizer.ggml.merges");
        merges_.reserve(merges->strings.size() * 2);
        int32_t rank = 0;
        for (const std::string &m : merges->strings) {
            const size_t sp = m.find(' ', 1);
            if (sp == std::string::npos) throw TokenizerError("malformed BPE merge " + quoted(m));
            const int32_t l = intern(m.substr(0, sp)), r = intern(m.substr(sp + 1));
            const int32_t result = intern(m.substr(0, sp) + m.substr(sp + 1));
            merges_.emplace(pair_key(l, r), Merge{rank++, result});  // the first (best) rank wins
        }
        init_pieces();
    }

protected:
    void encode_fragment(std::string_view text, bool after_special, std::vector<int32_t> &out) const override;
    std::string compute_piece(int32_t id) const override;

private:
    struct Merge { int32_t rank, result; };
    static uint64_t pair_key(int32_t l, int32_t r) { return ((uint64_t)(uint32_t)l << 32) | (uint32_t)r; }

    // Symbol text -> id: the vocab id, or a private id past the vocab for merge parts that are not
    // tokens; -1 for a text no merge knows.
    int32_t intern(const std::string &s) {
        const int32_t id = find(s);
        if (id >= 0) return id;
        auto it = extra_.find(s);
        if (it != extra_.end()) return it->second;
        const int32_t nid = (int32_t)(v_.tokens.size() + extra_.size());
        extra_.emplace(s, nid);
        return nid;
    }
    int32_t lookup(std::string_view s) const {
        const int32_t id = find(s);
        if (id >= 0) return id;
        auto it = extra_.find(std::string(s));
        return it == extra_.end() ? -1 : it->second;
    }

    void encode_run(std::string_view run, std::vector<int32_t> &out) const;

    bool newline_words_ = true;  // a newline run that is a token is taken whole (llama.cpp's Gemma 4 fix)
    int32_t byte_tokens_[256];
    std::unordered_map<std::string, int32_t> extra_;
    std::unordered_map<uint64_t, Merge> merges_;
};

struct Symbol { int32_t prev, next, id; uint32_t start, n; };  // n == 0 once merged into the left neighbour
struct Bigram { int32_t rank, left, right, left_id, right_id, result; };
struct BigramOrder {  // lowest rank first, then leftmost
    bool operator()(const Bigram &a, const Bigram &b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

void Gemma4Tokenizer::encode_fragment(std::string_view text, bool, std::vector<int32_t> &out) const {
    std::string s;
    s.reserve(text.size() + 16);
    for (char c : text) {
        if (c == ' ') s += kSpaceMarker;
        else s += c;
    }
    const std::string_view sv(s);
    for (size_t i = 0; i < sv.size();) {
        const bool newlines = sv[i] == '\n';
        size_t j = i + 1;
        while (j < sv.size() && (sv[j] == '\n') == newlines) ++j;
        const std::string_view run = sv.substr(i, j - i);
        i = j;
        if (newlines && newline_words_) {
            const int32_t id = find(run);
            if (id >= 0) { out.push_back(id); continue; }
        }
        encode_run(run, out);
    }
}

void Gemma4Tokenizer::encode_run(std::string_view run, std::vector<int32_t> &out) const {
    std::vector<Symbol> sym;
    for (size_t off = 0; off < run.size();) {
        const size_t len = std::min(unicode::utf8_len((uint8_t)run[off]), run.size() - off);
        const int32_t idx = (int32_t)sym.size();
        sym.push_back({idx - 1, off + len == run.size() ? -1 : idx + 1, lookup(run.substr(off, len)),
                       (uint32_t)off, (uint32_t)len});
        off += len;
    }

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int32_t l, int32_t r) {
        if (l < 0 || r < 0 || sym[l].id < 0 || sym[r].id < 0) return;
        auto it = merges_.find(pair_key(sym[l].id, sym[r].id));
        if (it == merges_.end()) return;
        queue.push({it->second.rank, l, r, sym[l].id, sym[r].id, it->second.result});
    };
    for (int32_t i = 1; i < (int32_t)sym.size(); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        Symbol &L = sym[b.left], &R = sym[b.right];
        if (L.n == 0 || R.n == 0 || L.id != b.left_id || R.id != b.right_id) continue;  // stale
        L.id = b.result;
        L.n += R.n;
        R.n = 0;
        L.next = R.next;
        if (R.next >= 0) sym[R.next].prev = b.left;
        try_add(L.prev, b.left);
        try_add(b.left, L.next);
    }

    const int32_t n_vocab = (int32_t)v_.tokens.size();
    for (int32_t i = 0; i != -1 && !sym.empty(); i = sym[i].next) {
        if (sym[i].id >= 0 && sym[i].id < n_vocab) {
            out.push_back(sym[i].id);
            continue;
        }
        for (char c : run.substr(sym[i].start, sym[i].n))  // byte fallback
            if (byte_tokens_[(uint8_t)c] >= 0) out.push_back(byte_tokens_[(uint8_t)c]);
    }
}

std::string Gemma4Tokenizer::compute_piece(int32_t id) const { return sentencepiece_piece(v_, id); }

}  // namespace

std::unique_ptr<Tokenizer> make_gemma4_tokenizer(Vocab vocab, const GGUFFile &file) {
    return std::make_unique<Gemma4Tokenizer>(std::move(vocab), file);
}

}  // namespace akunu
