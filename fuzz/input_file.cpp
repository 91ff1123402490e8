#include "input_file.h"

#include <cstdio>
#include <cstdlib>
#include <sys/mman.h>
#include <unistd.h>

namespace akunu_fuzz {

InputFile::InputFile(const uint8_t *data, size_t size) {
    fd_ = memfd_create("akunu_fuzz_input", MFD_CLOEXEC);
    if (fd_ < 0) {
        std::perror("memfd_create");
        std::abort();
    }
    for (size_t written = 0; written < size;) {
        const ssize_t n = write(fd_, data + written, size - written);
        if (n <= 0) {
            std::perror("write to memfd");
            std::abort();
        }
        written += (size_t)n;
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
}

InputFile::~InputFile() {
    if (fd_ >= 0) close(fd_);
}

}  // namespace akunu_fuzz
