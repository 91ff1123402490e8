// The weights a model puts on its device, listed once: Model::upload_weights uploads them and the
// memory plan (memory_plan.cpp) counts their bytes before anything is uploaded, so that the two
// cannot disagree.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/arch_descriptor.h"
#include "core/device.h"
#include "core/model_config.h"
#include "core/model_weights.h"
#include "weights/weight_provider.h"

namespace akunu {

// What is done with each weight: the loader uploads it, the plan counts it.
class WeightVisitor {
public:
    virtual ~WeightVisitor() = default;
    // A weight matrix as the file stores it, for `slot` (whose desc and geometry describe_matrix sets).
    virtual void matrix(WeightMatrix &slot, const TensorView &tensor) = 0;
    // An F32 vector of n floats for `slot`; values() reads them (converted from the file's dtype).
    virtual void vector(Buffer &slot, size_t n, const std::function<std::vector<float>()> &values) = 0;
};

// Visits every weight of the model, in upload order, with its slot in `weights`. A tied output
// matrix is not visited: its slot becomes a copy of the token embedding's.
void visit_weights(const WeightProvider &provider, const ArchDescriptor &arch, const ModelConfig &config,
                   ModelWeights &weights, WeightVisitor &visitor);

// Sets slot.desc (how `device` runs the tensor's dtype) and the matrix geometry, leaving the buffer
// alone; UnsupportedError naming the tensor, its dtype and the backend when the device cannot run it.
void describe_matrix(const Device &device, const TensorView &tensor, const std::string &path, WeightMatrix &slot);

// Bytes of a described matrix on the device: the file's, or its repacked layout's
// (DTypeDescriptor::repacked_bytes): the size of the buffer Device::upload_matrix returns.
size_t device_matrix_bytes(const WeightMatrix &slot, const TensorView &tensor);

}  // namespace akunu
