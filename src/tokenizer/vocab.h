// Internal: the vocabulary shared by both tokenizer models (tokens, scores, types, special ids
// and flags read from GGUF metadata) and the base class that implements everything common:
// special-token splitting, BOS/EOS, decoding and the accessors of the public interface.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace akunu {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct Vocab {
    std::string model;  // "llama", "gpt2", "bert", "t5" or "gemma4"
    std::string pre;    // tokenizer.ggml.pre, "default" if absent
    std::vector<std::string> tokens;
    std::vector<float> scores;   // empty for BPE vocabs without scores
    std::vector<int32_t> types;  // TokenType per token
    int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;
    std::vector<int32_t> eog;  // end-of-generation ids (end_of_generation.h)
    bool add_bos = false, add_eos = false;
    bool add_space_prefix = false;  // SentencePiece: prepend ' ' to text starting a fragment
    // Per-token whitespace stripping around a special token found in the text (llama.cpp's
    // LLAMA_TOKEN_ATTR_LSTRIP / RSTRIP, set by model name): kStripLeft / kStripRight bits.
    std::vector<uint8_t> strip;
    static constexpr uint8_t kStripLeft = 1, kStripRight = 2;

    // Reads tokenizer.ggml.* (not merges); throws TokenizerError / UnsupportedError.
    static Vocab from_gguf(const GGUFFile &file);
};

class VocabTokenizer : public Tokenizer {
public:
    explicit VocabTokenizer(Vocab vocab);

    std::vector<int32_t> encode(const std::string &text, bool add_special, bool parse_special) const override;
    std::string token_to_piece(int32_t id) const override;
    std::string decode(const std::vector<int32_t> &ids, bool skip_special) const override;

    size_t vocab_size() const override { return v_.tokens.size(); }
    const std::string &token_text(int32_t id) const override;
    int32_t bos_id() const override { return v_.bos; }
    int32_t eos_id() const override { return v_.eos; }
    bool add_bos() const override { return v_.add_bos; }
    bool is_eog(int32_t id) const override { return in_range(id) && eog_[id]; }
    // Control and unknown tokens: the ones decode(skip_special=true) drops.
    bool is_control(int32_t id) const override {
        return in_range(id) && (v_.types[id] == kControl || v_.types[id] == kUnknown);
    }
    std::string model_name() const override { return v_.model; }
    std::string pre_name() const override { return v_.pre; }

    bool add_space_prefix() const { return v_.add_space_prefix; }

protected:
    // Tokenizes plain text containing no special tokens. `after_special` is true at the start
    // of the text and right after a special token (SentencePiece adds its space prefix then).
    virtual void encode_fragment(std::string_view text, bool after_special, std::vector<int32_t> &out) const = 0;
    // The text a token stands for, computed once per token by the model (see pieces_).
    virtual std::string compute_piece(int32_t id) const = 0;
    // Must be called at the end of the derived constructor (virtuals are live then).
    void init_pieces();

    int32_t find(std::string_view text) const {  // -1 if not in the vocab
        auto it = index_.find(text);
        return it == index_.end() ? -1 : it->second;
    }
    bool in_range(int32_t id) const { return id >= 0 && (size_t)id < v_.tokens.size(); }
    void check_id(int32_t id) const;

    Vocab v_;

private:
    std::unordered_map<std::string_view, int32_t> index_;  // views into v_.tokens
    std::vector<int32_t> specials_;  // control/user-defined/unknown ids, longest text first
    std::vector<uint8_t> eog_;
    std::vector<std::string> pieces_;
};

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab);
std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab, const GGUFFile &file);
std::unique_ptr<Tokenizer> make_wpm_tokenizer(Vocab vocab, const GGUFFile &file);  // "bert"
std::unique_ptr<Tokenizer> make_ugm_tokenizer(Vocab vocab, const GGUFFile &file);  // "t5"
std::unique_ptr<Tokenizer> make_gemma4_tokenizer(Vocab vocab, const GGUFFile &file);

}  // namespace akunu
