// End-of-generation tokens: the ids at which generation stops, chosen as llama.cpp chooses its
// special_eog_ids at vocabulary load (llama_vocab::impl::load in llama.cpp's llama-vocab.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace akunu {

class GGUFFile;
struct Vocab;

// Texts of the tokens that end a turn or a generation in some model family (llama.cpp's list);
// the vocabulary makes them control tokens whatever the GGUF's token type says.
extern const char *const kEndOfGenerationTexts[];
extern const size_t kEndOfGenerationTextCount;

// EOS / EOT / EOM, every token named in kEndOfGenerationTexts, and the FIM pad / repo / file
// separator tokens (the GGUF's, else found by text), less llama.cpp's exceptions: <|end|> of
// gpt-oss / solar-open (which have <|return|> and <|call|>, or <|calls|> and <|flush|>) and the
// normal </s> of gemma4 / plamo. Sorted, without duplicates. Needs the special ids of `v` read.
std::vector<int32_t> end_of_generation_ids(const Vocab &v, const GGUFFile &f);

}  // namespace akunu
