#include "core/host_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

namespace akunu {

namespace {

// Read at most this much of a file: /proc and cgroup files are small (mountinfo on a busy host can
// reach hundreds of KiB); past it a file is cut, and what it held further on sets no limit.
constexpr size_t kMaxFileBytes = 4 << 20;
// cgroup v1 writes "no limit" as the largest page-aligned signed 64-bit value; v2 writes "max".
constexpr uint64_t kUnlimitedAbove = uint64_t(1) << 62;

std::optional<std::string> read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::string text;
    char chunk[4096];
    while (text.size() < kMaxFileBytes) {
        in.read(chunk, sizeof chunk);
        text.append(chunk, (size_t)in.gcount());
        if (!in) break;  // the end (or an error): what was read is all there is
    }
    return text;
}

std::string trim(const std::string &s) {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace((unsigned char)s[b])) ++b;
    while (e > b && std::isspace((unsigned char)s[e - 1])) --e;
    return s.substr(b, e - b);
}

// A decimal number and nothing else (no sign, no space inside); false on overflow.
bool parse_u64(const std::string &text, uint64_t *out) {
    if (text.empty() || text.size() > 20) return false;
    uint64_t v = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return false;
        if (__builtin_mul_overflow(v, uint64_t(10), &v) || __builtin_add_overflow(v, uint64_t(c - '0'), &v))
            return false;
    }
    *out = v;
    return true;
}

std::vector<std::string> lines_of(const std::string &text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// A file holding one number ("max" when `max_is_unlimited`: returns kUnlimitedAbove).
std::optional<uint64_t> read_number(const std::string &path, bool max_is_unlimited = false) {
    const auto text = read_file(path);
    if (!text) return std::nullopt;
    const std::string t = trim(*text);
    if (max_is_unlimited && t == "max") return kUnlimitedAbove;
    uint64_t v;
    if (!parse_u64(t, &v)) return std::nullopt;
    return v;
}

// The value of "key value" in a memory.stat file.
std::optional<uint64_t> stat_value(const std::string &path, const std::string &key) {
    const auto text = read_file(path);
    if (!text) return std::nullopt;
    for (const std::string &line : lines_of(*text)) {
        std::istringstream fields(line);
        std::string k, v;
        uint64_t n;
        if (fields >> k >> v && k == key && parse_u64(v, &n)) return n;
    }
    return std::nullopt;
}

// MemAvailable of /proc/meminfo ("MemAvailable:   12345 kB"), in bytes.
std::optional<uint64_t> meminfo_available(const std::string &root) {
    const auto text = read_file(root + "/proc/meminfo");
    if (!text) return std::nullopt;
    for (const std::string &line : lines_of(*text)) {
        const std::string key = "MemAvailable:";
        if (line.compare(0, key.size(), key) != 0) continue;
        std::istringstream fields(line.substr(key.size()));
        std::string number, unit, extra;
        fields >> number >> unit >> extra;
        uint64_t v;
        if (!parse_u64(number, &v) || !extra.empty()) return std::nullopt;
        if (unit.empty()) return v;
        if (unit != "kB" || __builtin_mul_overflow(v, uint64_t(1024), &v)) return std::nullopt;
        return v;
    }
    return std::nullopt;  // kernels before 3.14 have no MemAvailable
}

// mountinfo writes a space in a path as \040 (octal escapes).
std::string unescape_mount_path(const std::string &s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        const auto octal = [&](size_t j) { return j < s.size() && s[j] >= '0' && s[j] <= '7'; };
        if (s[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
            out += (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        } else {
            out += s[i];
        }
    }
    return out;
}

// A cgroup hierarchy's mount: where it is mounted and which cgroup its root is.
struct CgroupMount {
    std::string mount_point;
    std::string root;
};

// The memory cgroup mounts in /proc/self/mountinfo: "cgroup2", or "cgroup" with the memory
// controller among its super options ("36 25 0:31 / /sys/fs/cgroup/memory rw,... - cgroup cgroup rw,memory").
std::optional<CgroupMount> find_mount(const std::string &root, bool v2) {
    const auto text = read_file(root + "/proc/self/mountinfo");
    if (!text) return std::nullopt;
    for (const std::string &line : lines_of(*text)) {
        std::istringstream in(line);
        std::vector<std::string> fields;
        for (std::string f; in >> f;) fields.push_back(f);
        size_t dash = 0;
        while (dash < fields.size() && fields[dash] != "-") ++dash;
        if (dash < 5 || dash + 3 > fields.size()) continue;  // malformed line
        const std::string &fstype = fields[dash + 1];
        bool memory = false;
        if (!v2 && fstype == "cgroup" && dash + 3 < fields.size()) {
            std::istringstream options(fields[dash + 3]);
            for (std::string o; std::getline(options, o, ',');) memory |= o == "memory";
        }
        if ((v2 && fstype == "cgroup2") || memory) return CgroupMount{unescape_mount_path(fields[4]), unescape_mount_path(fields[3])};
    }
    return std::nullopt;
}

// The process's cgroup path in the v2 hierarchy ("0::/user.slice/...") or in the v1 hierarchy that
// has the memory controller ("4:memory:/docker/abc").
std::optional<std::string> process_cgroup(const std::string &root, bool v2) {
    const auto text = read_file(root + "/proc/self/cgroup");
    if (!text) return std::nullopt;
    for (const std::string &line : lines_of(*text)) {
        const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
        if (path.empty() || path[0] != '/' || path.find("/..") != std::string::npos) continue;
        if (v2 && id == "0" && controllers.empty()) return path;
        if (!v2) {
            std::istringstream list(controllers);
            for (std::string c; std::getline(list, c, ',');)
                if (c == "memory") return path;
        }
    }
    return std::nullopt;
}

bool is_directory(const std::string &path) { return access((path + "/.").c_str(), F_OK) == 0; }

// The folder of the process's cgroup under the mount, or the mount itself when the path does not
// lead there (a container that mounts its own cgroup as the root of the hierarchy).
std::string cgroup_folder(const std::string &root, const CgroupMount &mount, const std::string &cgroup) {
    const std::string base = root + mount.mount_point;
    std::string rel = cgroup;
    if (mount.root != "/" && rel.compare(0, mount.root.size(), mount.root) == 0) rel = rel.substr(mount.root.size());
    if (rel.size() > 1 && is_directory(base + rel)) return base + rel;
    return base;
}

// Headroom of a cgroup: limit - (usage - inactive file cache), or nothing without a limit.
std::optional<uint64_t> headroom(std::optional<uint64_t> limit, std::optional<uint64_t> usage,
                                 std::optional<uint64_t> inactive_file) {
    if (!limit || *limit >= kUnlimitedAbove || !usage) return std::nullopt;
    const uint64_t used = *usage - std::min(*usage, inactive_file.value_or(0));
    return *limit > used ? *limit - used : 0;
}

void take_smaller(MemoryAvailable &best, std::optional<uint64_t> bytes, const std::string &source) {
    if (bytes && (!best.known() || *bytes < best.bytes)) {
        best.bytes = *bytes;
        best.source = source;
    }
}

// cgroup v2: each level from the process's cgroup up to the mount's root bounds the subtree.
void cgroup_v2(const std::string &root, MemoryAvailable &best) {
    const auto mount = find_mount(root, true);
    const auto cgroup = process_cgroup(root, true);
    const CgroupMount m = mount ? *mount : CgroupMount{"/sys/fs/cgroup", "/"};
    const std::string top = root + m.mount_point;
    std::string dir = cgroup ? cgroup_folder(root, m, *cgroup) : top;
    for (;;) {
        const auto room = headroom(read_number(dir + "/memory.max", true), read_number(dir + "/memory.current"),
                                   stat_value(dir + "/memory.stat", "inactive_file"));
        take_smaller(best, room, "cgroup v2 memory.max - memory.current of " + dir.substr(root.size()));
        if (dir.size() <= top.size()) break;
        dir = dir.substr(0, dir.rfind('/'));
    }
}

// cgroup v1: the memory controller's hierarchy; hierarchical_memory_limit covers the ancestors.
void cgroup_v1(const std::string &root, MemoryAvailable &best) {
    const auto mount = find_mount(root, false);
    const auto cgroup = process_cgroup(root, false);
    const CgroupMount m = mount ? *mount : CgroupMount{"/sys/fs/cgroup/memory", "/"};
    const std::string dir = cgroup ? cgroup_folder(root, m, *cgroup) : root + m.mount_point;
    std::optional<uint64_t> limit = read_number(dir + "/memory.limit_in_bytes");
    const auto hierarchical = stat_value(dir + "/memory.stat", "hierarchical_memory_limit");
    if (hierarchical && (!limit || *hierarchical < *limit)) limit = hierarchical;
    auto inactive = stat_value(dir + "/memory.stat", "total_inactive_file");
    if (!inactive) inactive = stat_value(dir + "/memory.stat", "inactive_file");
    take_smaller(best, headroom(limit, read_number(dir + "/memory.usage_in_bytes"), inactive),
                 "cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes of " + dir.substr(root.size()));
}

}  // namespace

MemoryAvailable host_available_memory(const std::string &root) {
    MemoryAvailable best;
    take_smaller(best, meminfo_available(root), "/proc/meminfo MemAvailable");
    cgroup_v2(root, best);
    cgroup_v1(root, best);
    if (best.known()) return best;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) {
        best.bytes = (uint64_t)pages * (uint64_t)page;
        best.source = "physical memory (no MemAvailable or cgroup limit could be read)";
    }
    return best;
}

}  // namespace akunu
