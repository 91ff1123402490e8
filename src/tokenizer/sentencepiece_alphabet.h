// SentencePiece's alphabet, shared by the tokenizers whose vocabularies are written in it (the
// SentencePiece "llama" model, Unigram "t5" and Gemma 4's BPE): a space is "▁" (U+2581) and a byte
// the vocabulary has no piece for is the token <0xXX>.
#pragma once
#include <cstdint>
#include <string>

#include "tokenizer/vocab.h"

namespace akunu {

inline constexpr char kSpaceMarker[] = "\xE2\x96\x81";  // U+2581 "▁"

// The text token `id` stands for: a normal token's text with "▁" turned back into spaces, a
// <0xXX> byte token's byte, nothing for an unused one, and the stored text of the others
// (control, user-defined, unknown).
std::string sentencepiece_piece(const Vocab &v, int32_t id);

}  // namespace akunu
