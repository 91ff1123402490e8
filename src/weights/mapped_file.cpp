#include "weights/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/errors.h"

namespace akunu {

namespace {
std::string os_error(const std::string &path, const char *what) { return path + ": " + what + ": " + std::strerror(errno); }
}  // namespace

std::unique_ptr<MappedFile> MappedFile::open(const std::string &path, const std::string &kind) {
    std::unique_ptr<MappedFile> f(new MappedFile());
    f->path_ = path;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw ModelFormatError(os_error(path, "cannot open"));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        std::string msg = os_error(path, "cannot stat");
        ::close(fd);
        throw ModelFormatError(msg);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw ModelFormatError(path + (S_ISDIR(st.st_mode) ? ": is a directory, not a " + kind : ": not a regular file"));
    }
    if (st.st_size == 0) {
        ::close(fd);
        throw ModelFormatError(path + ": empty file (0 bytes), not a " + kind);
    }
    if ((uint64_t)st.st_size > std::numeric_limits<size_t>::max()) {
        ::close(fd);
        throw ModelFormatError(path + ": file too large to map on this platform");
    }
    const size_t size = (size_t)st.st_size;
    void *map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    std::string map_error = map == MAP_FAILED ? os_error(path, "cannot mmap") : "";
    ::close(fd);  // the mapping keeps the file alive
    if (map == MAP_FAILED) throw ModelFormatError(map_error);
    f->map_ = map;
    f->size_ = size;
    return f;
}

MappedFile::~MappedFile() {
    if (map_) munmap(map_, size_);
}

}  // namespace akunu
