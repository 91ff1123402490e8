// Tokenizer built from GGUF metadata (tokenizer.ggml.*): SentencePiece-style ("llama"),
// byte-level BPE ("gpt2") with the pre-tokenizer variants named by tokenizer.ggml.pre, WordPiece
// ("bert") and Unigram ("t5").
#pragma once
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/errors.h"

namespace akunu {

class GGUFFile;


class Tokenizer {
public:
    // Throws TokenizerError (or UnsupportedError for an unknown model/pre-tokenizer) naming the problem (missing vocab, unsupported tokenizer.ggml.model
    // or tokenizer.ggml.pre, inconsistent arrays, out-of-range special ids).
    static std::unique_ptr<Tokenizer> from_gguf(const GGUFFile &file);
    virtual ~Tokenizer() = default;

    // add_special: prepend BOS (and append EOS) as the vocab's add_bos/add_eos flags say.
    // parse_special: recognise control/user-defined token texts such as "<|im_start|>" in `text`.
    virtual std::vector<int32_t> encode(const std::string &text, bool add_special, bool parse_special) const = 0;
    // Raw bytes of one token as it appears in text (byte tokens decoded, the SentencePiece
    // space marker turned into ' ', GPT-2 byte mapping undone). May be a partial UTF-8 sequence.
    virtual std::string token_to_piece(int32_t id) const = 0;
    // Concatenated pieces; with skip_special, control tokens (BOS/EOS/...) produce nothing.
    // A leading space added by SentencePiece's add_space_prefix is removed.
    virtual std::string decode(const std::vector<int32_t> &ids, bool skip_special) const = 0;

    virtual size_t vocab_size() const = 0;
    virtual const std::string &token_text(int32_t id) const = 0;  // the vocab entry as stored
    virtual int32_t bos_id() const = 0;                            // -1 if none
    virtual int32_t eos_id() const = 0;                            // -1 if none
    virtual bool add_bos() const = 0;
    // End of generation: EOS, EOT and the usual chat end markers present in the vocab
    // (<|im_end|>, <|endoftext|>, <|eot_id|>, <end_of_turn>, </s>, <|end|>).
    virtual bool is_eog(int32_t id) const = 0;
    virtual bool is_control(int32_t id) const = 0;
    virtual std::string model_name() const = 0;  // "llama", "gpt2", "bert" or "t5"
    virtual std::string pre_name() const = 0;    // tokenizer.ggml.pre or "default"
};

// Turns a token stream into text pieces that never split a UTF-8 character.
class StreamingDecoder {
public:
    explicit StreamingDecoder(const Tokenizer &tok, bool skip_special = true) : tok_(tok), skip_special_(skip_special) {}
    // Returns the text that became complete with this token (possibly empty).
    std::string feed(int32_t id);
    // Whatever is left at the end (invalid trailing bytes become U+FFFD).
    std::string flush();
    void reset() { pending_.clear(); first_ = true; }

private:
    const Tokenizer &tok_;
    bool skip_special_;
    std::string pending_;
    bool first_ = true;
};

}  // namespace akunu
