// An owned, 64-byte aligned byte buffer for tensors the loader has to build (permuted rows,
// converted MLX matrices, SafeTensors data not aligned to its element size).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace akunu {

class AlignedBytes {
public:
    AlignedBytes() = default;
    explicit AlignedBytes(size_t n) : size_(n) {
        constexpr size_t kAlign = 64;
        const size_t rounded = (n + kAlign - 1) / kAlign * kAlign;
        void *p = std::aligned_alloc(kAlign, rounded ? rounded : kAlign);
        if (!p) throw std::bad_alloc();
        data_.reset(static_cast<uint8_t *>(p));
    }
    uint8_t *data() { return data_.get(); }
    const uint8_t *data() const { return data_.get(); }
    size_t size() const { return size_; }

private:
    struct Free {
        void operator()(uint8_t *p) const { std::free(p); }
    };
    std::unique_ptr<uint8_t, Free> data_;
    size_t size_ = 0;
};

}  // namespace akunu
