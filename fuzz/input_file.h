// The fuzzer's input as a file the engine opens by path. The readers under test take a path and
// memory-map it (GGUFFile::open, WeightProvider::open): the input goes into an in-memory file
// (memfd) named /proc/self/fd/N, so the fuzzed path is the production one, mmap included.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace akunu_fuzz {

class InputFile {
public:
    // Holds `size` bytes of `data`; aborts if the in-memory file cannot be made (not an input's fault).
    InputFile(const uint8_t *data, size_t size);
    ~InputFile();
    InputFile(const InputFile &) = delete;
    InputFile &operator=(const InputFile &) = delete;

    const std::string &path() const { return path_; }

private:
    int fd_ = -1;
    std::string path_;
};

}  // namespace akunu_fuzz
