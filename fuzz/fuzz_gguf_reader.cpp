// libFuzzer target: the input is a GGUF file. GGUFFile::open parses it (header, metadata, tensor
// directory); then every metadata value is read through each typed getter and every tensor's
// bytes are touched, as the loader and `akunu inspect` do. A bad file must end in
// ModelFormatError / UnsupportedError; anything else (a crash, a sanitizer report, another
// exception, a hang, unbounded memory) is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "error_checks.h"
#include "input_file.h"
#include "weights/gguf_file.h"

namespace {

void require(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "broken invariant: %s\n", what);
        std::abort();
    }
}

void read_every_value(const akunu::GGUFFile &file) {
    for (const auto &entry : file.metadata()) {
        const std::string &key = entry.first;
        require(file.find(key) == &entry.second, "find() returns the metadata entry");
        // A getter for the wrong type throws ModelFormatError naming the key: that is fine.
        try { (void)file.get_string(key); } catch (const akunu::ModelFormatError &e) { akunu_fuzz::check_error_message(e); }
        try { (void)file.get_int(key, 0); } catch (const akunu::ModelFormatError &e) { akunu_fuzz::check_error_message(e); }
        try { (void)file.get_float(key, 0); } catch (const akunu::ModelFormatError &e) { akunu_fuzz::check_error_message(e); }
        try { (void)file.get_bool(key, false); } catch (const akunu::ModelFormatError &e) { akunu_fuzz::check_error_message(e); }
        const akunu::GGUFValue &v = entry.second;
        if (v.type == akunu::GGUFValueType::ARRAY) {
            const size_t kept = v.strings.size() + v.numbers.size() + v.ints.size();
            require(kept == v.array_length || (kept == 0 && v.array_type == akunu::GGUFValueType::ARRAY),
                    "an array keeps all its elements (nested arrays: none)");
        }
    }
}

void touch_every_tensor(const akunu::GGUFFile &file, size_t file_size) {
    unsigned checksum = 0;
    for (const akunu::GGUFTensor &t : file.tensors()) {
        require(file.tensor(t.name) == &t, "tensor() finds every tensor by its name");
        require(t.offset <= file_size && t.n_bytes <= file_size - t.offset, "tensor data inside the file");
        require(t.n_bytes > 0 && t.data != nullptr, "a tensor has bytes");
        checksum += t.data[0] + t.data[t.n_bytes - 1];  // out of the mapping: a fault
    }
    volatile unsigned sink = checksum;
    (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    akunu_fuzz::InputFile input(data, size);
    try {
        std::unique_ptr<akunu::GGUFFile> file = akunu::GGUFFile::open(input.path());
        require(file->version() == 2 || file->version() == 3, "only versions 2 and 3 open");
        read_every_value(*file);
        touch_every_tensor(*file, size);
    } catch (const akunu::AkunuError &e) {  // ModelFormatError, UnsupportedError
        akunu_fuzz::check_error_message(e);
    }
    return 0;
}
