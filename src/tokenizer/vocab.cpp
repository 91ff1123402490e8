// Vocabulary loading from GGUF metadata and the model-independent half of the tokenizer:
// special-token splitting, BOS/EOS, piece cache and decoding.
#include "tokenizer/vocab.h"

#include <algorithm>

#include "weights/gguf_file.h"

namespace akunu {

namespace {

const GGUFValue *find_array(const GGUFFile &f, const std::string &key, bool required) {
    const GGUFValue *v = f.find(key);
    if (!v) {
        if (required) throw TokenizerError("GGUF file has no " + key + " (no tokenizer vocabulary)");
        return nullptr;
    }
    if (v->type != GGUFValueType::ARRAY) throw TokenizerError(key + " is not an array");
    return v;
}

int32_t special_id(const GGUFFile &f, const std::string &key, size_t n_vocab) {
    const int64_t id = f.get_int(key, -1);
    if (id == -1) return -1;
    if (id < 0 || (uint64_t)id >= n_vocab)
        throw TokenizerError(key + " = " + std::to_string(id) + " is outside the vocabulary of " +
                             std::to_string(n_vocab) + " tokens");
    return (int32_t)id;
}

}  // namespace

Vocab Vocab::from_gguf(const GGUFFile &f) {
    Vocab v;
    if (!f.has("tokenizer.ggml.model")) throw TokenizerError("GGUF file has no tokenizer.ggml.model");
    v.model = f.get_string("tokenizer.ggml.model");
    if (v.model != "llama" && v.model != "gpt2")
        throw UnsupportedError("unsupported tokenizer model (tokenizer.ggml.model) '" + v.model + "'");
    v.pre = f.get_string("tokenizer.ggml.pre", "default");
    if (v.pre.empty()) v.pre = "default";

    const GGUFValue *tokens = find_array(f, "tokenizer.ggml.tokens", true);
    if (tokens->array_type != GGUFValueType::STRING) throw TokenizerError("tokenizer.ggml.tokens is not an array of strings");
    v.tokens = tokens->strings;
    const size_t n = v.tokens.size();
    if (n == 0) throw TokenizerError("tokenizer.ggml.tokens is empty");

    if (const GGUFValue *scores = find_array(f, "tokenizer.ggml.scores", false)) {
        const size_t m = scores->numbers.empty() ? scores->ints.size() : scores->numbers.size();
        if (m != n) throw TokenizerError("tokenizer.ggml.scores has " + std::to_string(m) + " entries for " + std::to_string(n) + " tokens");
        v.scores.resize(n);
        for (size_t i = 0; i < n; ++i)
            v.scores[i] = scores->numbers.empty() ? (float)scores->ints[i] : (float)scores->numbers[i];
    }
    v.types.assign(n, kNormal);
    if (const GGUFValue *types = find_array(f, "tokenizer.ggml.token_type", false)) {
        const size_t m = types->ints.empty() ? types->numbers.size() : types->ints.size();
        if (m != n) throw TokenizerError("tokenizer.ggml.token_type has " + std::to_string(m) + " entries for " + std::to_string(n) + " tokens");
        for (size_t i = 0; i < n; ++i)
            v.types[i] = types->ints.empty() ? (int32_t)types->numbers[i] : (int32_t)types->ints[i];
    }
    if (v.model == "llama" && v.scores.empty()) throw TokenizerError("SentencePiece vocabulary without tokenizer.ggml.scores");

    v.bos = special_id(f, "tokenizer.ggml.bos_token_id", n);
    v.eos = special_id(f, "tokenizer.ggml.eos_token_id", n);
    v.unk = special_id(f, "tokenizer.ggml.unknown_token_id", n);
    v.eot = special_id(f, "tokenizer.ggml.eot_token_id", n);
    v.eom = special_id(f, "tokenizer.ggml.eom_token_id", n);

    // Defaults as llama.cpp: SentencePiece adds BOS and a space prefix; byte-level BPE adds
    // nothing, except Llama 3 style vocabs which add BOS. Explicit metadata wins.
    const bool spm = v.model == "llama";
    const bool llama3 = v.pre == "llama3" || v.pre == "llama-v3" || v.pre == "llama-bpe" || v.pre == "falcon3";
    v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", spm || llama3);
    v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", false);
    v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", spm);
    if (v.add_bos && v.bos < 0) v.add_bos = false;  // nothing to add
    if (v.add_eos && v.eos < 0) v.add_eos = false;
    return v;
}

VocabTokenizer::VocabTokenizer(Vocab vocab) : v_(std::move(vocab)) {
    const size_t n = v_.tokens.size();
    index_.reserve(n * 2);
    for (size_t i = 0; i < n; ++i) index_[v_.tokens[i]] = (int32_t)i;  // later duplicates win, as llama.cpp

    for (size_t i = 0; i < n; ++i) {
        const int32_t t = v_.types[i];
        if ((t == kControl || t == kUserDefined || t == kUnknown) && !v_.tokens[i].empty()) specials_.push_back((int32_t)i);
    }
    std::stable_sort(specials_.begin(), specials_.end(),
                     [&](int32_t a, int32_t b) { return v_.tokens[a].size() > v_.tokens[b].size(); });

    eog_.assign(n, 0);
    for (int32_t id : {v_.eos, v_.eot, v_.eom})
        if (id >= 0) eog_[id] = 1;
    for (const char *text : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>", "</s>", "<|end|>", "<EOT>"}) {
        const int32_t id = find(text);
        if (id >= 0 && v_.types[id] != kNormal) eog_[id] = 1;
    }
}

void VocabTokenizer::init_pieces() {
    pieces_.resize(v_.tokens.size());
    for (size_t i = 0; i < pieces_.size(); ++i) pieces_[i] = compute_piece((int32_t)i);
}

void VocabTokenizer::check_id(int32_t id) const {
    if (!in_range(id))
        throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary of " +
                                std::to_string(v_.tokens.size()) + " tokens");
}

const std::string &VocabTokenizer::token_text(int32_t id) const {
    check_id(id);
    return v_.tokens[id];
}

std::string VocabTokenizer::token_to_piece(int32_t id) const {
    check_id(id);
    return pieces_[id];
}

std::vector<int32_t> VocabTokenizer::encode(const std::string &text, bool add_special, bool parse_special) const {
    std::vector<int32_t> out;
    if (add_special && v_.add_bos) out.push_back(v_.bos);

    // Split the text around special-token texts, longest tokens first (as llama.cpp does).
    // User-defined tokens are always split out; control/unknown ones only with parse_special.
    struct Fragment { int32_t token; size_t begin, end; };  // token -1: raw text [begin, end)
    std::vector<Fragment> frags, next;
    if (!text.empty()) frags.push_back({-1, 0, text.size()});
    const std::string_view all(text);
    for (int32_t id : specials_) {
        if (!parse_special && v_.types[id] != kUserDefined) continue;
        const std::string &s = v_.tokens[id];
        if (all.find(s) == std::string_view::npos) continue;  // cheap reject for most specials
        next.clear();
        for (const Fragment &f : frags) {
            if (f.token >= 0) { next.push_back(f); continue; }
            const std::string_view raw = all.substr(f.begin, f.end - f.begin);
            size_t pos = 0;
            for (size_t hit; (hit = raw.find(s, pos)) != std::string_view::npos; pos = hit + s.size()) {
                if (hit > pos) next.push_back({-1, f.begin + pos, f.begin + hit});
                next.push_back({id, 0, 0});
            }
            if (pos < raw.size()) next.push_back({-1, f.begin + pos, f.end});
        }
        frags.swap(next);
    }

    bool after_special = true;
    for (const Fragment &f : frags) {
        if (f.token >= 0) {
            out.push_back(f.token);
            after_special = true;
        } else {
            encode_fragment(all.substr(f.begin, f.end - f.begin), after_special, out);
            after_special = false;
        }
    }
    if (add_special && v_.add_eos) out.push_back(v_.eos);
    return out;
}

std::string VocabTokenizer::decode(const std::vector<int32_t> &ids, bool skip_special) const {
    std::string out;
    // The space SentencePiece put in front of the text is not part of it: drop it from the
    // first token that produces output.
    bool strip_space = v_.add_space_prefix;
    for (int32_t id : ids) {
        check_id(id);
        if (skip_special && is_control(id)) continue;
        const std::string &p = pieces_[id];
        if (strip_space && !p.empty() && p[0] == ' ') out.append(p, 1, std::string::npos);
        else out += p;
        strip_space = false;
    }
    return out;
}

}  // namespace akunu
