// Unigram tokenizer (tokenizer.ggml.model "t5"), SentencePiece's unigram model as llama.cpp runs it:
//   1. Normalization, one input prefix at a time: a user-defined token text is kept as it is; else
//      the longest prefix the precompiled charsmap (tokenizer.ggml.precompiled_charsmap) knows is
//      replaced by its replacement string; else one UTF-8 character is kept (an invalid byte becomes
//      U+FFFD). Spaces become "▁"; remove_extra_whitespaces drops leading and trailing spaces and
//      merges runs; add_space_prefix puts "▁" in front.
//   2. Viterbi over the normalized bytes: at each character boundary every token (normal,
//      user-defined, unused) starting there extends the best path ending there by its score
//      (user-defined tokens score 0); a character no token covers alone is <unk> with the lowest
//      normal score minus 10. The best path wins, runs of <unk> become one.
// The charsmap is SentencePiece's: a 4-byte size, an XOR-compressed double array (Kanda 2018) over
// input bytes whose leaves hold offsets into a blob of NUL-terminated replacement strings.
#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <cstring>

#include "tokenizer/sentencepiece_alphabet.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"
#include "weights/gguf_file.h"

namespace akunu {

namespace {

// Token texts sorted bytewise; a prefix walk narrows the range one byte at a time, so every token
// that is a prefix of the input is found in order of length.
class PrefixMatcher {
public:
    void build(std::vector<std::pair<std::string_view, int32_t>> entries) {
        // Equal texts: the last id wins (llama.cpp's trie overwrites).
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto &a, const auto &b) { return a.first < b.first; });
        e_.clear();
        for (auto &x : entries) {
            if (x.first.empty()) continue;
            if (!e_.empty() && e_.back().first == x.first) e_.back().second = x.second;
            else e_.push_back(x);
        }
        for (auto &r : first_) r = {0, 0};
        for (size_t i = 0; i < e_.size(); ++i) {
            auto &r = first_[(uint8_t)e_[i].first[0]];
            if (r.second == 0) r.first = (uint32_t)i;
            r.second = (uint32_t)i + 1;
        }
    }
    bool empty() const { return e_.empty(); }

    // Calls f(id, length) for every token that is a prefix of s[0, n), shortest first.
    template <class F>
    void for_each_prefix(const char *s, size_t n, F &&f) const {
        if (n == 0) return;
        uint32_t lo = first_[(uint8_t)s[0]].first, hi = first_[(uint8_t)s[0]].second;
        for (size_t k = 0; lo < hi;) {
            // [lo, hi) share the prefix s[0, k+1); an entry of exactly that length sorts first.
            if (e_[lo].first.size() == k + 1) {
                f(e_[lo].second, k + 1);
                ++lo;
            }
            if (++k >= n) break;
            const uint8_t c = (uint8_t)s[k];
            auto byte_at = [k](const std::pair<std::string_view, int32_t> &x) { return (uint8_t)x.first[k]; };
            lo = (uint32_t)(std::lower_bound(e_.begin() + lo, e_.begin() + hi, c,
                                             [&](const auto &x, uint8_t v) { return byte_at(x) < v; }) - e_.begin());
            hi = (uint32_t)(std::upper_bound(e_.begin() + lo, e_.begin() + hi, c,
                                             [&](uint8_t v, const auto &x) { return v < byte_at(x); }) - e_.begin());
        }
    }

    size_t longest_prefix(const char *s, size_t n) const {
        size_t best = 0;
        for_each_prefix(s, n, [&](int32_t, size_t len) { best = len; });
        return best;
    }

private:
    std::vector<std::pair<std::string_view, int32_t>> e_;
    std::pair<uint32_t, uint32_t> first_[256] = {};
};

class UgmTokenizer final : public VocabTokenizer {
public:
    UgmTokenizer(Vocab vocab, const GGUFFile &file) : VocabTokenizer(std::move(vocab)) {
        const size_t n = v_.tokens.size();
        auto id_or = [&](const char *key, int32_t def) {
            const int64_t id = file.get_int(key, -1);
            if (id >= 0 && (uint64_t)id < n) return (int32_t)id;
            return def >= 0 && (size_t)def < n ? def : -1;
        };
        // llama.cpp's defaults for T5-style vocabularies, overridden by the GGUF's keys.
        v_.eos = id_or("tokenizer.ggml.eos_token_id", 1);
        v_.unk = id_or("tokenizer.ggml.unknown_token_id", 2);
        v_.add_bos = file.get_bool("tokenizer.ggml.add_bos_token", false) && v_.bos >= 0;
        v_.add_eos = file.get_bool("tokenizer.ggml.add_eos_token", true) && v_.eos >= 0;
        v_.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix", false);
        remove_extra_ws_ = file.get_bool("tokenizer.ggml.remove_extra_whitespaces", false);
        if (const GGUFValue *cm = file.find("tokenizer.ggml.precompiled_charsmap")) {
            if (cm->type != GGUFValueType::ARRAY ||
                (cm->array_type != GGUFValueType::UINT8 && cm->array_type != GGUFValueType::INT8))
                throw TokenizerError("tokenizer.ggml.precompiled_charsmap is not an array of bytes");
            charsmap_.resize(cm->ints.size());
            for (size_t i = 0; i < cm->ints.size(); ++i) charsmap_[i] = (char)(uint8_t)cm->ints[i];
            parse_charsmap();
        }

        std::vector<std::pair<std::string_view, int32_t>> all, user;
        float min_score = FLT_MAX;
        for (size_t i = 0; i < n; ++i) {
            const int32_t t = v_.types[i];
            const float score = v_.scores.empty() ? 0.0f : v_.scores[i];
            if (t == kNormal) min_score = std::min(min_score, score);
            if (t == kNormal || t == kUserDefined || t == kUnused) all.emplace_back(v_.tokens[i], (int32_t)i);
            if (t == kUserDefined) user.emplace_back(v_.tokens[i], (int32_t)i);
        }
        unk_score_ = min_score - 10.0f;
        tokens_.build(std::move(all));
        user_.build(std::move(user));
        init_pieces();
    }

protected:
    void encode_fragment(std::string_view text, bool after_special, std::vector<int32_t> &out) const override;
    std::string compute_piece(int32_t id) const override;

private:
    void parse_charsmap();
    void normalize(std::string_view in, std::string &out) const;
    // The normalized form of the prefix of `in` at `pos`: sets *consumed (>= 1) and returns it.
    std::string_view normalize_prefix(std::string_view in, size_t pos, size_t *consumed) const;

    bool remove_extra_ws_ = false;
    float unk_score_ = 0;
    PrefixMatcher tokens_, user_;
    std::string charsmap_;
    const char *xcda_ = nullptr;  // the double array's 32-bit units (read with memcpy)
    size_t xcda_n_ = 0;
    const char *repl_ = nullptr;  // replacement strings
    size_t repl_n_ = 0;
};

void UgmTokenizer::parse_charsmap() {
    if (charsmap_.empty()) return;
    uint32_t size = 0;
    if (charsmap_.size() < 4) throw TokenizerError("tokenizer.ggml.precompiled_charsmap is truncated");
    std::memcpy(&size, charsmap_.data(), 4);
    if (size % 4 != 0 || size > charsmap_.size() - 4)
        throw TokenizerError("tokenizer.ggml.precompiled_charsmap: double array of " + std::to_string(size) +
                             " bytes in a map of " + std::to_string(charsmap_.size()));
    xcda_ = charsmap_.data() + 4;
    xcda_n_ = size / 4;
    repl_ = xcda_ + size;
    repl_n_ = charsmap_.size() - 4 - size;
}

std::string_view UgmTokenizer::normalize_prefix(std::string_view in, size_t pos, size_t *consumed) const {
    const char *s = in.data() + pos;
    const size_t n = in.size() - pos;
    if (size_t len = user_.longest_prefix(s, n)) {
        *consumed = len;
        return {s, len};
    }
    if (xcda_n_ > 0) {
        // Walk the double array: a child of node i for byte c is i ^ c when its LCHECK is c; a
        // LEAF bit says the node's BASE leads to a unit holding the replacement's offset.
        auto unit = [&](size_t i, uint32_t *u) {
            if (i >= xcda_n_) return false;
            std::memcpy(u, xcda_ + 4 * i, 4);
            return true;
        };
        auto base = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
        size_t match_len = 0, match_off = 0;
        uint32_t u;
        if (unit(0, &u)) {
            size_t node = base(u);
            for (size_t k = 0; k < n; ++k) {
                const uint8_t c = (uint8_t)s[k];
                if (c == 0) break;
                node ^= c;
                if (!unit(node, &u) || (u & ((1u << 31) | 0xFFu)) != c) break;
                const bool leaf = (u >> 8) & 1;
                node ^= base(u);
                if (leaf) {
                    if (!unit(node, &u)) break;
                    match_len = k + 1;
                    match_off = u & ((1u << 31) - 1);
                }
            }
        }
        if (match_len > 0 && match_off < repl_n_) {
            const char *r = repl_ + match_off;
            const size_t rlen = strnlen(r, repl_n_ - match_off);
            if (rlen < repl_n_ - match_off) {  // NUL-terminated inside the blob
                *consumed = match_len;
                return {r, rlen};
            }
        }
    }
    size_t len = 1;
    if (unicode::decode_utf8(s, n, 0, &len) == unicode::kInvalid) {
        *consumed = 1;
        return "\xEF\xBF\xBD";
    }
    *consumed = len;
    return {s, len};
}

void UgmTokenizer::normalize(std::string_view in, std::string &out) const {
    out.clear();
    out.reserve(in.size() * 3);
    bool prepended = false, in_word = false;
    for (size_t pos = 0; pos < in.size();) {
        size_t consumed = 1;
        const std::string_view piece = normalize_prefix(in, pos, &consumed);
        for (char c : piece) {
            if (c != ' ') {
                if (!in_word) {
                    in_word = true;
                    if ((v_.add_space_prefix && !prepended) || remove_extra_ws_) {
                        out += kSpaceMarker;
                        prepended = true;
                    }
                }
                out += c;
            } else {
                in_word = false;
                if (!remove_extra_ws_) out += kSpaceMarker;
            }
        }
        pos += consumed;
    }
}

void UgmTokenizer::encode_fragment(std::string_view text, bool, std::vector<int32_t> &out) const {
    std::string s;
    normalize(text, s);
    const size_t n = s.size();
    if (n == 0) return;

    struct Best { int32_t id; uint32_t from; double score; };
    std::vector<Best> best(n + 1, {v_.unk, 0, -DBL_MAX});
    best[0] = {v_.unk, 0, 0.0};
    for (size_t pos = 0; pos < n;) {
        const size_t char_len = std::min(unicode::utf8_len((uint8_t)s[pos]), n - pos);
        const double here = best[pos].score;
        bool covered = false;
        tokens_.for_each_prefix(s.data() + pos, n - pos, [&](int32_t id, size_t len) {
            if (len == char_len) covered = true;
            const double score = here + (v_.types[id] == kUserDefined ? 0.0 : (double)v_.scores[id]);
            Best &b = best[pos + len];
            if (score > b.score) b = {id, (uint32_t)pos, score};
        });
        if (!covered) {
            const double score = here + unk_score_;
            Best &b = best[pos + char_len];
            if (score > b.score) b = {v_.unk, (uint32_t)pos, score};
        }
        pos += char_len;
    }

    const size_t first = out.size();
    bool prev_unk = false;
    for (size_t at = n;;) {
        const Best &b = best[at];
        const bool unk = b.id == v_.unk;
        if (!(prev_unk && unk)) out.push_back(b.id);
        if (b.from == 0) break;
        prev_unk = unk;
        at = b.from;
    }
    std::reverse(out.begin() + first, out.end());
}

std::string UgmTokenizer::compute_piece(int32_t id) const { return sentencepiece_piece(v_, id); }

}  // namespace

std::unique_ptr<Tokenizer> make_ugm_tokenizer(Vocab vocab, const GGUFFile &file) {
    return std::make_unique<UgmTokenizer>(std::move(vocab), file);
}

}  // namespace akunu
