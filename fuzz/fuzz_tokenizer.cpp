// libFuzzer target: the input is a GGUF file carrying tokenizer metadata (tokenizer.ggml.*), then
// optionally the marker kTextMarker and a text. The GGUF reader ignores bytes past what the file
// describes, so the whole input is opened as the file; the text after the last marker is encoded
// with and without special tokens, the ids decoded back (whole and streamed), and ids made from
// the text's bytes (in range or not) decoded too. Tokenizer::from_gguf must refuse bad metadata
// with TokenizerError / UnsupportedError / ModelFormatError; encode / decode must not crash on any
// text, and out-of-range ids must raise std::out_of_range.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "error_checks.h"
#include "input_file.h"
#include "tokenizer/tokenizer.h"
#include "weights/gguf_file.h"

namespace {

constexpr char kTextMarker[] = "\nAKUNU_FUZZ_TEXT\n";

void require(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "broken invariant: %s\n", what);
        std::abort();
    }
}

std::string text_of(const uint8_t *data, size_t size) {
    const std::string all(reinterpret_cast<const char *>(data), size);
    const size_t at = all.rfind(kTextMarker);
    if (at == std::string::npos) return "Hello world! <s> 123 \xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80\n\tx";
    return all.substr(at + sizeof(kTextMarker) - 1);
}

void decode_all_ways(const akunu::Tokenizer &tok, const std::vector<int32_t> &ids) {
    for (int32_t id : ids) require(id >= 0 && (size_t)id < tok.vocab_size(), "encode returns vocabulary ids");
    (void)tok.decode(ids, true);
    (void)tok.decode(ids, false);
    akunu::StreamingDecoder stream(tok);
    for (int32_t id : ids) (void)stream.feed(id);
    (void)stream.flush();
}

// Ids from the text's bytes, two at a time: some in the vocabulary, some past it, some negative.
void decode_raw_ids(const akunu::Tokenizer &tok, const std::string &text) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 1 < text.size() && ids.size() < 64; i += 2)
        ids.push_back((int16_t)((uint8_t)text[i] | (uint8_t)text[i + 1] << 8));
    for (int32_t id : ids) {
        const bool in_range = id >= 0 && (size_t)id < tok.vocab_size();
        try {
            (void)tok.token_to_piece(id);
            (void)tok.token_text(id);
            (void)tok.decode({id}, false);
            require(in_range, "an out-of-range id is refused");
        } catch (const std::out_of_range &) {
            require(!in_range, "an id in range decodes");
        }
        (void)tok.is_eog(id);
        (void)tok.is_control(id);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    akunu_fuzz::InputFile input(data, size);
    std::unique_ptr<akunu::Tokenizer> tok;
    try {
        std::unique_ptr<akunu::GGUFFile> file = akunu::GGUFFile::open(input.path());
        tok = akunu::Tokenizer::from_gguf(*file);
    } catch (const akunu::AkunuError &e) {  // ModelFormatError, UnsupportedError, TokenizerError
        akunu_fuzz::check_error_message(e);
        return 0;
    }
    require(tok->vocab_size() > 0, "a tokenizer has tokens");
    for (int32_t special : {tok->bos_id(), tok->eos_id()})
        require(special == -1 || (special >= 0 && (size_t)special < tok->vocab_size()), "special ids in range");
    const std::string text = text_of(data, size);
    for (bool add_special : {false, true})
        for (bool parse_special : {false, true}) decode_all_ways(*tok, tok->encode(text, add_special, parse_special));
    decode_raw_ids(*tok, text);
    return 0;
}
