// A whole file mapped read-only (a GGUF file, the SafeTensors shards). The mapping lives as long
// as the object; views handed out by the loader point into it, so the model keeps it alive.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace akunu {

class MappedFile {
public:
    // Throws ModelFormatError naming the file: missing, a directory or not a regular file, empty,
    // unmappable. `kind` ("GGUF file") completes the messages: "...: empty file (0 bytes), not a GGUF file".
    static std::unique_ptr<MappedFile> open(const std::string &path, const std::string &kind = "model file");
    ~MappedFile();
    MappedFile(const MappedFile &) = delete;
    MappedFile &operator=(const MappedFile &) = delete;

    const std::string &path() const { return path_; }
    const uint8_t *data() const { return static_cast<const uint8_t *>(map_); }
    size_t size() const { return size_; }

private:
    MappedFile() = default;
    std::string path_;
    void *map_ = nullptr;
    size_t size_ = 0;
};

}  // namespace akunu
