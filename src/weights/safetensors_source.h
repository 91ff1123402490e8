// The tensors of a Hugging Face checkpoint (SafeTensors files, optionally MLX-quantized), as
// canonical-named TensorViews. Plain F32/F16/BF16 tensors point straight into the mapped files
// (zero copy); tensors that must change on the way in live in owned, aligned buffers:
//   - Q/K projections: rows reordered from HF's rotate-half layout to interleaved pairs (the
//     GGUF layout), so the hot path keeps its one RoPE kernel;
//   - MLX-quantized matrices: converted by convert_mlx_matrix (Q4_1, or dequantized);
//   - (1 + w) norm weights (Gemma): F32 w + 1;
//   - data not aligned to its element size (a float read must not straddle; SafeTensors itself
//     only pads its header to 8 bytes, so 32-byte alignment cannot be asked for).
// Every offset, size, dtype and shape is checked against the real files first; problems throw
// ModelFormatError / UnsupportedError naming the file and tensor.
#pragma once
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "weights/aligned_bytes.h"
#include "weights/hf_checkpoint.h"
#include "weights/mapped_file.h"
#include "weights/weight_provider.h"

namespace akunu {

class SafeTensorsSource {
public:
    static std::unique_ptr<SafeTensorsSource> open(const HFCheckpoint &checkpoint);

    // canonical name -> view (valid while this object lives)
    const std::map<std::string, TensorView> &tensors() const { return views_; }
    // Every tensor as loaded, for `akunu inspect` (converted tensors show their new dtype).
    std::vector<TensorView> all_tensors() const;
    size_t converted_bytes() const;  // memory the loader had to allocate (not mapped)
    // Frees the loader's own buffers that the device did not alias (it copied or repacked them):
    // `in_use` holds the host pointers still read through. Views of freed tensors keep their
    // name, dtype and shape but lose their data pointer.
    void release_unused(const std::set<const void *> &in_use);

private:
    SafeTensorsSource() = default;
    const MappedFile &map(const std::string &path);
    const uint8_t *locate(const CheckpointSlice &s);  // checked pointer into the mapping
    TensorView plain_tensor(const CheckpointTensor &t);
    TensorView quantized_tensor(const CheckpointTensor &t);
    TensorView owned_view(const CheckpointTensor &t, DType dtype, AlignedBytes bytes, uint64_t rows, uint64_t cols);

    std::string dir_;
    std::map<std::string, std::unique_ptr<MappedFile>> files_;
    std::vector<AlignedBytes> owned_;
    std::map<std::string, TensorView> views_;
    std::vector<std::string> order_;  // canonical names in checkpoint order
};

}  // namespace akunu
