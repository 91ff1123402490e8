// A whole file mapped read-only (the SafeTensors shards). The mapping lives as long as the
// object; views handed out by the loader point into it, so the model keeps it alive.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace akunu {

class MappedFile {
public:
    // Throws ModelFormatError naming the file: missing, not a regular file, empty, unmappable.
    static std::unique_ptr<MappedFile> open(const std::string &path);
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
