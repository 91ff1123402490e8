// akunu.Tokenizer: a thin Python face over akunu::Tokenizer. Texts cross the boundary as UTF-8;
// decoded bytes that are not valid UTF-8 (a split character) become U+FFFD, as in
// bytes.decode(errors="replace"). Token ids are checked here so Python sees ValueError.
#include "python/bind_tokenizer.h"

#include <string>
#include <vector>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "weights/gguf_file.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

struct PyTokenizer {
    std::shared_ptr<akunu::Tokenizer> tok;

    void check(int64_t id) const {
        if (id < 0 || (uint64_t)id >= tok->vocab_size())
            throw nb::value_error(("token id " + std::to_string(id) + " is out of range for a vocabulary of " +
                                   std::to_string(tok->vocab_size()) + " tokens").c_str());
    }
    std::vector<int32_t> checked(const std::vector<int64_t> &ids) const {
        std::vector<int32_t> out;
        out.reserve(ids.size());
        for (int64_t id : ids) {
            check(id);
            out.push_back((int32_t)id);
        }
        return out;
    }
};

nb::str to_str(const std::string &s) {
    PyObject *o = PyUnicode_DecodeUTF8(s.data(), (Py_ssize_t)s.size(), "replace");
    if (!o) throw nb::python_error();
    return nb::steal<nb::str>(o);
}

}  // namespace

nb::object make_py_tokenizer(std::shared_ptr<akunu::Tokenizer> tok) {
    return nb::cast(PyTokenizer{std::move(tok)});
}

void bind_tokenizer(nb::module_ &m) {
    nb::class_<PyTokenizer>(m, "Tokenizer",
                            "Tokenizer read from a GGUF file's tokenizer.ggml.* metadata: SentencePiece "
                            "(\"llama\") or byte-level BPE (\"gpt2\") with its pre-tokenizer.")
        .def_static(
            "from_file",
            [](const std::string &path) {
                auto file = akunu::GGUFFile::open(path);
                std::shared_ptr<akunu::Tokenizer> tok = akunu::Tokenizer::from_gguf(*file);
                return PyTokenizer{std::move(tok)};  // the GGUFFile is no longer needed
            },
            "path"_a, "Load the tokenizer of a GGUF file (vocab-only or a full model).")
        .def(
            "encode",
            [](const PyTokenizer &self, const std::string &text, bool add_special, bool parse_special) {
                nb::gil_scoped_release release;
                return self.tok->encode(text, add_special, parse_special);
            },
            "text"_a, "add_special"_a = false, "parse_special"_a = false,
            "Token ids of `text`. add_special adds BOS/EOS as the vocabulary asks; parse_special "
            "turns control-token texts such as \"<|im_start|>\" into their ids.")
        .def(
            "decode",
            [](const PyTokenizer &self, const std::vector<int64_t> &ids, bool skip_special) {
                std::vector<int32_t> v = self.checked(ids);
                std::string s;
                {
                    nb::gil_scoped_release release;
                    s = self.tok->decode(v, skip_special);
                }
                return to_str(s);
            },
            "ids"_a, "skip_special"_a = true,
            "Text of the ids; with skip_special, control tokens (BOS, EOS, ...) produce nothing.")
        .def(
            "decode_stream",
            [](const PyTokenizer &self, const std::vector<int64_t> &ids, bool skip_special) {
                std::vector<int32_t> v = self.checked(ids);
                akunu::StreamingDecoder dec(*self.tok, skip_special);
                std::vector<std::string> pieces;
                pieces.reserve(v.size());
                for (int32_t id : v) pieces.push_back(dec.feed(id));
                std::string rest = dec.flush();
                if (!rest.empty()) {
                    if (pieces.empty()) pieces.emplace_back();
                    pieces.back() += rest;
                }
                nb::list out;
                for (const std::string &p : pieces) out.append(to_str(p));
                return out;
            },
            "ids"_a, "skip_special"_a = true,
            "Decode token by token as a generator would: one string per id (possibly empty), "
            "never splitting a UTF-8 character; the concatenation equals decode(ids).")
        .def(
            "token_to_piece",
            [](const PyTokenizer &self, int64_t id) {
                self.check(id);
                std::string p = self.tok->token_to_piece((int32_t)id);
                return nb::bytes(p.data(), p.size());
            },
            "id"_a, "Raw bytes of one token as it appears in text (may be part of a UTF-8 character).")
        .def(
            "token_text",
            [](const PyTokenizer &self, int64_t id) {
                self.check(id);
                return to_str(self.tok->token_text((int32_t)id));
            },
            "id"_a, "The vocabulary entry as stored (e.g. \"▁the\" or \"Ġthe\").")
        .def(
            "is_eog",
            [](const PyTokenizer &self, int64_t id) {
                self.check(id);
                return self.tok->is_eog((int32_t)id);
            },
            "id"_a, "True for end-of-generation tokens (EOS, EOT, <|im_end|>, ...).")
        .def(
            "is_control",
            [](const PyTokenizer &self, int64_t id) {
                self.check(id);
                return self.tok->is_control((int32_t)id);
            },
            "id"_a, "True for control tokens (those decode(skip_special=True) drops).")
        .def_prop_ro("vocab_size", [](const PyTokenizer &self) { return self.tok->vocab_size(); },
                     "Number of tokens in the vocabulary.")
        .def_prop_ro("bos_id", [](const PyTokenizer &self) { return self.tok->bos_id(); }, "BOS id, -1 if none.")
        .def_prop_ro("eos_id", [](const PyTokenizer &self) { return self.tok->eos_id(); }, "EOS id, -1 if none.")
        .def_prop_ro("add_bos", [](const PyTokenizer &self) { return self.tok->add_bos(); },
                     "Whether encode(add_special=True) prepends BOS.")
        .def_prop_ro("model", [](const PyTokenizer &self) { return self.tok->model_name(); },
                     "tokenizer.ggml.model: \"llama\" (SentencePiece) or \"gpt2\" (byte-level BPE).")
        .def_prop_ro("pre", [](const PyTokenizer &self) { return self.tok->pre_name(); },
                     "tokenizer.ggml.pre, the pre-tokenizer name (\"default\" if absent).")
        .def("__len__", [](const PyTokenizer &self) { return self.tok->vocab_size(); })
        .def("__repr__", [](const PyTokenizer &self) {
            return "<akunu.Tokenizer model=" + self.tok->model_name() + " pre=" + self.tok->pre_name() +
                   " vocab_size=" + std::to_string(self.tok->vocab_size()) + ">";
        });
}
