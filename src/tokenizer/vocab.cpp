// Vocabulary loading from GGUF metadata and the model-independent half of the tokenizer:
// special-token splitting, BOS/EOS, piece cache and decoding.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>

#include "tokenizer/end_of_generation.h"
#include "tokenizer/pretokenizer.h"
#include "core/quoted_text.h"
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

// llama.cpp corrects the token types of many converted vocabularies by token text (and strips
// whitespace next to some special tokens by model name). Encoding special-token text the way it
// does needs the same corrections: see llama_vocab::impl::load in llama.cpp's llama-vocab.cpp.
void apply_llama_cpp_token_overrides(Vocab &v, const GGUFFile &f) {
    std::unordered_map<std::string_view, int32_t> ids;  // last id of each text, as llama.cpp's token_to_id
    for (size_t i = 0; i < v.tokens.size(); ++i) ids[v.tokens[i]] = (int32_t)i;
    auto id_of = [&](const char *text) {
        auto it = ids.find(text);
        return it == ids.end() ? -1 : it->second;
    };
    auto make_control = [&](int32_t id) {
        if (id >= 0 && v.types[id] != kControl) v.types[id] = kControl;
    };
    // End-of-generation texts, and FIM texts unless the GGUF names that FIM token: control tokens.
    std::vector<int32_t> eog;
    for (size_t i = 0; i < kEndOfGenerationTextCount; ++i) {
        const int32_t id = id_of(kEndOfGenerationTexts[i]);
        if (id < 0) continue;
        eog.push_back(id);
        make_control(id);
    }
    struct Fim { const char *key; std::vector<const char *> texts; };
    static const Fim kFim[] = {
        {"tokenizer.ggml.fim_pre_token_id", {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
             "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}},
        {"tokenizer.ggml.fim_suf_token_id", {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
             "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}},
        {"tokenizer.ggml.fim_mid_token_id", {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
             "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}},
        {"tokenizer.ggml.fim_pad_token_id", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
        {"tokenizer.ggml.fim_rep_token_id", {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
        {"tokenizer.ggml.fim_sep_token_id", {"<|file_sep|>"}},
    };
    for (const Fim &fim : kFim) {
        if (f.has(fim.key)) continue;
        for (const char *text : fim.texts) make_control(id_of(text));
    }
    auto in_eog = [&](const char *text) {
        const int32_t id = id_of(text);
        return id >= 0 && std::find(eog.begin(), eog.end(), id) != eog.end();
    };
    // gpt-oss / solar-open: <|end|> is an ordinary user-defined token there.
    if (in_eog("<|end|>") && ((in_eog("<|return|>") && in_eog("<|call|>")) || (in_eog("<|calls|>") && in_eog("<|flush|>"))))
        v.types[id_of("<|end|>")] = kUserDefined;
    // gemma4 / plamo: </s> is a normal token.
    if (in_eog("</s>") && (in_eog("<|tool_response>") || in_eog("<|plamo:eos|>"))) v.types[id_of("</s>")] = kNormal;
    for (const char *text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
        const int32_t id = id_of(text);
        if (id >= 0) v.types[id] = kUserDefined;
    }

    v.strip.assign(v.tokens.size(), 0);
    auto lower = [](std::string s) {
        for (char &c : s) c = (char)std::tolower((unsigned char)c);
        return s;
    };
    const std::string name = lower(f.get_string("general.name", ""));
    const std::string arch = f.get_string("general.architecture", "");
    auto has = [](const std::string &s, std::initializer_list<const char *> subs) {
        for (const char *sub : subs)
            if (s.find(sub) != std::string::npos) return true;
        return false;
    };
    if (has(v.pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) || has(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
        if (id_of("<mask>") >= 0) v.strip[id_of("<mask>")] |= Vocab::kStripLeft;
    } else if (has(name, {"phi-3", "phi3"})) {
        for (size_t i = 0; i < v.tokens.size(); ++i) {
            const int32_t t = v.types[i];
            if (t == kControl || t == kUserDefined || t == kUnknown) v.strip[i] |= Vocab::kStripRight;
        }
        if (id_of("</s>") >= 0) v.strip[id_of("</s>")] |= Vocab::kStripRight;
        for (const char *text : {"<unk>", "<s>", "<|endoftext|>"})
            if (id_of(text) >= 0) v.strip[id_of(text)] &= (uint8_t)~Vocab::kStripRight;
    } else if (has(name, {"modern-bert"})) {
        if (id_of("[MASK]") >= 0) v.strip[id_of("[MASK]")] |= Vocab::kStripLeft;
    }
}

}  // namespace

Vocab Vocab::from_gguf(const GGUFFile &f) {
    Vocab v;
    if (!f.has("tokenizer.ggml.model")) throw TokenizerError("GGUF file has no tokenizer.ggml.model");
    v.model = f.get_string("tokenizer.ggml.model");
    if (v.model != "llama" && v.model != "gpt2" && v.model != "bert" && v.model != "t5" &&
        v.model != "gemma4")
        throw UnsupportedError("unsupported tokenizer model (tokenizer.ggml.model) " + quoted(v.model));
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
    apply_llama_cpp_token_overrides(v, f);
    if ((v.model == "llama" || v.model == "t5") && v.scores.empty())
        throw TokenizerError("SentencePiece vocabulary without tokenizer.ggml.scores");

    v.bos = special_id(f, "tokenizer.ggml.bos_token_id", n);
    v.eos = special_id(f, "tokenizer.ggml.eos_token_id", n);
    v.unk = special_id(f, "tokenizer.ggml.unknown_token_id", n);
    v.eot = special_id(f, "tokenizer.ggml.eot_token_id", n);
    v.eom = special_id(f, "tokenizer.ggml.eom_token_id", n);
    v.eog = end_of_generation_ids(v, f);

    // Defaults as llama.cpp: SentencePiece adds BOS and a space prefix; byte-level BPE adds
    // nothing, except for the pre-tokenizer names that add BOS (Llama 3 style, tekken, ...).
    // Explicit metadata wins.
    const bool spm = v.model == "llama";
    v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", spm || PreTokenizer::adds_bos(v.pre));
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
    for (int32_t id : v_.eog) eog_[id] = 1;
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
            // llama.cpp's LSTRIP / RSTRIP drop ASCII whitespace (isspace) beside the token.
            auto is_space = [](char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r'); };
            const uint8_t strip = v_.strip.empty() ? 0 : v_.strip[id];
            size_t pos = 0;
            for (size_t hit; (hit = raw.find(s, pos)) != std::string_view::npos;) {
                size_t left_end = hit;
                if (strip & Vocab::kStripLeft)
                    while (left_end > pos && is_space(raw[left_end - 1])) --left_end;
                if (left_end > pos) next.push_back({-1, f.begin + pos, f.begin + left_end});
                next.push_back({id, 0, 0});
                pos = hit + s.size();
                if (strip & Vocab::kStripRight)
                    while (pos < raw.size() && is_space(raw[pos])) ++pos;
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
