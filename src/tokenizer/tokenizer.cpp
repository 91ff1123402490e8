// Tokenizer factory (picks the model named by tokenizer.ggml.model) and the streaming decoder.
#include "tokenizer/tokenizer.h"

#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"
#include "weights/gguf_file.h"

namespace akunu {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GGUFFile &file) {
    Vocab vocab = Vocab::from_gguf(file);  // validates the model name
    if (vocab.model == "llama") return make_spm_tokenizer(std::move(vocab));
    if (vocab.model == "bert") return make_wpm_tokenizer(std::move(vocab), file);
    if (vocab.model == "t5") return make_ugm_tokenizer(std::move(vocab), file);
    // llama.cpp runs these byte-level ("gpt2") vocabs as it runs Gemma 4's: BPE over raw UTF-8.
    if (vocab.model == "gemma4" || (vocab.model == "gpt2" && PreTokenizer::sentencepiece_style(vocab.pre)))
        return make_gemma4_tokenizer(std::move(vocab), file);
    return make_bpe_tokenizer(std::move(vocab), file);
}

std::string StreamingDecoder::feed(int32_t id) {
    if (skip_special_ && tok_.is_control(id)) {
        (void)tok_.token_text(id);  // range check
        return {};
    }
    // The first token goes through decode() so SentencePiece's leading space is dropped
    // exactly as a full decode would.
    pending_ += first_ ? tok_.decode({id}, skip_special_) : tok_.token_to_piece(id);
    first_ = false;
    // Hold back an incomplete UTF-8 character until the tokens completing it arrive.
    const size_t keep = unicode::incomplete_utf8_tail(pending_);
    std::string ready = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return ready;
}

std::string StreamingDecoder::flush() {
    std::string out;
    // Whatever is left can never complete: one U+FFFD per stray byte sequence.
    if (!pending_.empty()) out = "\xEF\xBF\xBD";
    pending_.clear();
    return out;
}

}  // namespace akunu
