#include "core/device.h"

#include "core/errors.h"

namespace akunu {

// Backends whose registry can be asked without an exception may override this.
bool Device::has_kernel(const std::string &kernel_name) {
    try {
        get_pipeline(kernel_name);
        return true;
    } catch (const UnsupportedError &) {
        return false;
    }
}

}  // namespace akunu
