// WordPiece tokenizer (tokenizer.ggml.model "bert"), as llama.cpp implements it:
//   1. BERT normalization: with strip_accents each character is replaced by the first code point of
//      its canonical decomposition and combining marks (\p{M}) are dropped; NUL, U+FFFD and control
//      characters are dropped; with lowercase characters are lowercased. Whitespace separates words;
//      punctuation (\p{P}), ASCII symbols and CJK ideographs are words of their own.
//   2. Each word gets the "▁" word-start marker (llama.cpp's converter stores BERT's "##" suffix
//      pieces without a prefix and word-initial pieces with "▁") and is cut greedily into the longest
//      vocabulary tokens from the left. A word with a position no token starts at becomes one [UNK].
// encode(add_special) puts [CLS] (the BOS id) in front and [SEP] at the end, whatever the add_bos /
// add_eos flags say, as llama.cpp does.
#include <algorithm>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"
#include "weights/gguf_file.h"

namespace akunu {

namespace {

const char kWordMarker[] = "\xE2\x96\x81";  // U+2581 "▁"

class WpmTokenizer final : public VocabTokenizer {
public:
    WpmTokenizer(Vocab vocab, const GGUFFile &file) : VocabTokenizer(std::move(vocab)) {
        const size_t n = v_.tokens.size();
        auto id_or = [&](const char *key, int32_t def) {
            const int64_t id = file.get_int(key, -1);
            if (id >= 0 && (uint64_t)id < n) return (int32_t)id;
            return def >= 0 && (size_t)def < n ? def : -1;
        };
        // llama.cpp's defaults for BERT vocabularies, overridden by the GGUF's keys.
        v_.bos = id_or("tokenizer.ggml.bos_token_id", 101);  // [CLS]
        v_.unk = id_or("tokenizer.ggml.unknown_token_id", 100);
        sep_ = id_or("tokenizer.ggml.seperator_token_id", 102);  // (sic), [SEP]
        v_.add_bos = v_.bos >= 0;
        v_.add_eos = false;
        lowercase_ = file.get_bool("tokenizer.ggml.normalizer.lowercase", true);
        strip_accents_ = file.get_bool("tokenizer.ggml.normalizer.strip_accents", lowercase_);
        for (const std::string &t : v_.tokens) max_len_ = std::max(max_len_, t.size());
        init_pieces();
    }

    std::vector<int32_t> encode(const std::string &text, bool add_special, bool parse_special) const override {
        std::vector<int32_t> out;
        if (add_special && v_.bos >= 0) out.push_back(v_.bos);
        std::vector<int32_t> body = VocabTokenizer::encode(text, false, parse_special);
        out.insert(out.end(), body.begin(), body.end());
        if (add_special && sep_ >= 0) out.push_back(sep_);
        return out;
    }

    // Every word carries the "▁" marker, so the text starts with a space nobody wrote: drop it.
    std::string decode(const std::vector<int32_t> &ids, bool skip_special) const override {
        std::string s = VocabTokenizer::decode(ids, skip_special);
        if (!s.empty() && s[0] == ' ') s.erase(0, 1);
        return s;
    }

protected:
    void encode_fragment(std::string_view text, bool after_special, std::vector<int32_t> &out) const override;
    std::string compute_piece(int32_t id) const override;

private:
    void split_words(std::string_view text, std::vector<std::string> &words) const;

    int32_t sep_ = -1;
    bool lowercase_ = true, strip_accents_ = true;
    size_t max_len_ = 0;
};

bool is_cjk_ideograph(uint32_t cp) {  // the ranges of BERT's _is_chinese_char, as llama.cpp has them
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

void WpmTokenizer::split_words(std::string_view text, std::vector<std::string> &words) const {
    std::string word;
    auto finish = [&]() {
        if (!word.empty()) words.push_back(std::move(word));
        word.clear();
    };
    for (size_t i = 0; i < text.size();) {
        size_t len = 1;
        uint32_t cp = unicode::decode_utf8(text.data(), text.size(), i, &len);
        i += len;
        if (cp == unicode::kInvalid) cp = 0xFFFD;
        if (strip_accents_) cp = unicode::nfd_base(cp);
        if (unicode::is_whitespace(cp)) {
            finish();
            continue;
        }
        if (cp == 0 || cp == 0xFFFD || unicode::is_control(cp)) continue;
        const unicode::CatClass cls = unicode::category(cp);
        if (strip_accents_ && cls == unicode::kMark) continue;
        const uint32_t c = lowercase_ ? unicode::to_lower(cp) : cp;
        if (cls == unicode::kPunct || (cp < 0x7F && cls == unicode::kSymbol) || is_cjk_ideograph(cp)) {
            finish();
            unicode::append_utf8(word, c);
            finish();
        } else {
            unicode::append_utf8(word, c);
        }
    }
    finish();
}

void WpmTokenizer::encode_fragment(std::string_view text, bool, std::vector<int32_t> &out) const {
    std::vector<std::string> words;
    split_words(text, words);
    std::string w;
    for (const std::string &word : words) {
        w.assign(kWordMarker);
        w += word;
        const size_t n = w.size(), start = out.size();
        const std::string_view sv(w);
        for (size_t i = 0; i < n;) {
            // The longest token starting at byte i.
            size_t j = std::min(n, i + max_len_);
            int32_t id = -1;
            for (; j > i; --j)
                if ((id = find(sv.substr(i, j - i))) >= 0) break;
            if (id < 0) {  // no token starts here: the whole word is unknown
                out.resize(start);
                break;
            }
            out.push_back(id);
            i = j;
        }
        if (out.size() == start && v_.unk >= 0) out.push_back(v_.unk);
    }
}

std::string WpmTokenizer::compute_piece(int32_t id) const {
    const std::string &text = v_.tokens[id];
    if (v_.types[id] == kUnused) return {};
    if (v_.types[id] != kNormal) return text;  // control, unknown, user-defined: their text
    std::string r;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text.compare(i, 3, kWordMarker) == 0) { r += ' '; i += 2; }
        else r += text[i];
    }
    return r;
}

}  // namespace

std::unique_ptr<Tokenizer> make_wpm_tokenizer(Vocab vocab, const GGUFFile &file) {
    return std::make_unique<WpmTokenizer>(std::move(vocab), file);
}

}  // namespace akunu
