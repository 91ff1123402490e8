// metal_kernel_check: runs every registered case (cases_*.cpp) through the shim and through the
// CPU backend, compares, prints one line per case and exits 1 on any mismatch.
//   metal_kernel_check [substring]   run the cases whose label contains it
//   metal_kernel_check --list-kernels   the kernels the shim has, one per line
//   metal_kernel_check --list-cases     each case's kernel and label
//   metal_kernel_check --list-table     the Metal kernel table (src/backend/metal/metal_kernels.cpp)
//   metal_kernel_check --list-required  what the table builder can ask of Metal (required_kernels.cpp)
//   metal_kernel_check --self-test-race | --self-test-deadlock | --self-test-overflow   buggy kernels
//   metal_kernel_check --check-top-p    the sampler's double-free top-p target == the host's
//   metal_kernel_check --model FILE [--kv f16|q8_0]   a whole model, CPU vs Metal (model_check.cpp)
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <memory>

#include "backend/cpu/cpu_kernel.h"
#include "backend/metal/metal_kernels.h"
#include "kernel_case.h"
#include "metal_shim.h"

namespace metal_check {

int run_model_check(const std::string &path, const std::string &kv);
std::set<std::string> required_metal_kernels();
int self_test_race();
int self_test_deadlock();
int self_test_overflow();
int check_top_p_target();

namespace {
std::vector<std::pair<const char *, CaseFactory>> &factories() {
    static std::vector<std::pair<const char *, CaseFactory>> f;
    return f;
}
}  // namespace

int register_cases(const char *family, CaseFactory f) {
    factories().emplace_back(family, f);
    return 0;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-scale, scale);
    std::vector<float> v(n);
    for (float &x : v) x = d(rng);
    return v;
}

Bytes random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    Bytes b(n);
    for (uint8_t &x : b) x = (uint8_t)(rng() >> 24);
    return b;
}

uint16_t f32_to_f16(float f) {
    _Float16 h = (_Float16)f;
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}

float f16_to_f32(uint16_t u) {
    _Float16 h;
    std::memcpy(&h, &u, 2);
    return (float)h;
}

namespace {

uint8_t *binding(const KernelCase &c, std::vector<Bytes> &buffers, size_t i) {
    const size_t offset = i < c.offsets.size() ? c.offsets[i] : 0;
    if (offset > buffers[i].size()) throw std::runtime_error("a binding starts past its buffer's end");
    return buffers[i].data() + offset;
}

void run_cpu(const KernelCase &c, std::vector<Bytes> &buffers) {
    if (c.cpu_kernel.empty()) {
        c.reference(buffers);
        return;
    }
    akunu::cpu::KernelFn fn = akunu::cpu::find_kernel(c.cpu_kernel.c_str());
    if (!fn) throw std::runtime_error("no CPU kernel '" + c.cpu_kernel + "'");
    akunu::cpu::KernelArgs a{};
    for (size_t i = 0; i < buffers.size(); ++i) a.buffers[i] = binding(c, buffers, i);
    a.params = c.params.data();
    a.grid = c.grid;
    fn(a, 0, (int64_t)c.grid.x * c.grid.y * c.grid.z);
}

void run_metal(const KernelCase &c, std::vector<Bytes> &buffers) {
    const akunu::metal::MetalKernelInfo *info = akunu::metal::find_metal_kernel(c.kernel);
    if (!info) throw std::runtime_error("'" + c.kernel + "' is not in the Metal kernel table (metal_kernels.cpp)");
    const shim::KernelEntry *kernel = shim::find_kernel(c.kernel);
    if (!kernel) throw std::runtime_error("'" + c.kernel + "' is not in metal/ (shim_kernels.cpp)");
    if (kernel->buffer_slots != info->buffer_slots)
        throw std::runtime_error("'" + c.kernel + "' declares " + std::to_string(kernel->buffer_slots) +
                                 " buffers; the kernel table says " + std::to_string(info->buffer_slots));
    if (buffers.size() > info->buffer_slots) throw std::runtime_error("the case binds more buffers than the kernel has");
    // Slots the command leaves empty get no memory at all (MetalDevice binds a placeholder).
    std::vector<void *> pointers(info->buffer_slots, nullptr);
    for (size_t i = 0; i < buffers.size(); ++i) pointers[i] = binding(c, buffers, i);
    // The parameter block is a copy of its own, as setBytes makes one.
    const Bytes params = c.params;
    shim::dispatch(metal::uint3(c.grid.x, c.grid.y, c.grid.z), info->threads_per_group,
                   [&](const shim::ThreadArgs &t) { kernel->fn(pointers.data(), params.data(), t); });
}

// The worst relative error over the output, or -1 when an exact output differs.
double compare(const Output &o, const Bytes &got, const Bytes &want, std::string *where) {
    if (o.element == Element::U32 || o.element == Element::Raw) {
        for (size_t i = 0; i < want.size(); ++i)
            if (got[i] != want[i]) {
                *where = "byte " + std::to_string(i);
                return -1;
            }
        return 0;
    }
    std::vector<double> g, w;
    if (o.element == Element::F32) {
        for (float x : from_bytes<float>(got)) g.push_back(x);
        for (float x : from_bytes<float>(want)) w.push_back(x);
    } else {
        for (uint16_t x : from_bytes<uint16_t>(got)) g.push_back(f16_to_f32(x));
        for (uint16_t x : from_bytes<uint16_t>(want)) w.push_back(f16_to_f32(x));
    }
    double scale = 1e-30, worst = 0;
    for (double x : w) scale = std::max(scale, std::fabs(x));
    for (size_t i = 0; i < w.size(); ++i) {
        const bool both_inf = std::isinf(g[i]) && std::isinf(w[i]) && (g[i] > 0) == (w[i] > 0);
        const double e = both_inf ? 0 : std::fabs(g[i] - w[i]) / scale;
        if (!(e <= worst)) {  // also catches NaN
            worst = std::isnan(e) ? INFINITY : e;
            *where = "element " + std::to_string(i) + ": metal " + std::to_string(g[i]) + ", reference " +
                     std::to_string(w[i]);
        }
    }
    return worst;
}

}  // namespace
}  // namespace metal_check

int main(int argc, char **argv) {
    using namespace metal_check;
    const std::string filter = argc > 1 ? argv[1] : "";
    if (filter == "--list-kernels") {
        for (const shim::KernelEntry &e : shim::kernels()) std::printf("%s\n", e.name);
        return 0;
    }
    if (filter == "--model" && argc >= 3) {
        const std::string kv = argc >= 5 && std::string(argv[3]) == "--kv" ? argv[4] : "f16";
        try {
            return run_model_check(argv[2], kv);
        } catch (const std::exception &e) {
            std::printf("error %s\n", e.what());
            return 1;
        }
    }
    if (filter == "--list-table") {
        for (const akunu::metal::MetalKernelInfo &k : akunu::metal::metal_kernels()) std::printf("%s\n", k.name);
        return 0;
    }
    if (filter == "--list-required") {
        for (const std::string &k : required_metal_kernels()) std::printf("%s\n", k.c_str());
        return 0;
    }
    if (filter == "--self-test-race") return self_test_race();
    if (filter == "--self-test-deadlock") return self_test_deadlock();
    if (filter == "--self-test-overflow") return self_test_overflow();
    if (filter == "--check-top-p") return check_top_p_target();
    if (filter == "--list-cases") {  // kernel, then label
        for (auto &[family, factory] : factories())
            for (const KernelCase &c : factory()) std::printf("%s\t%s\n", c.kernel.c_str(), c.label.c_str());
        return 0;
    }
    int failed = 0, ran = 0;
    for (auto &[family, factory] : factories()) {
        for (const KernelCase &c : factory()) {
            if (!filter.empty() && c.label.find(filter) == std::string::npos) continue;
            ++ran;
            try {
                std::vector<Bytes> want = c.buffers, got = c.buffers;
                run_cpu(c, want);
                run_metal(c, got);
                bool ok = true;
                std::string report;
                for (const Output &o : c.outputs) {
                    std::string where;
                    const double e = compare(o, got[o.buffer], want[o.buffer], &where);
                    char line[256];
                    if (e < 0 || e > o.tolerance) {
                        ok = false;
                        std::snprintf(line, sizeof line, " buffer %d: error %.3g > %.3g at %s", o.buffer, e,
                                      o.tolerance, where.c_str());
                    } else {
                        std::snprintf(line, sizeof line, " buffer %d: error %.3g", o.buffer, e);
                    }
                    report += line;
                }
                std::printf("%s [%s] %s:%s\n", ok ? "ok  " : "FAIL", family, c.label.c_str(), report.c_str());
                failed += ok ? 0 : 1;
            } catch (const std::exception &e) {
                std::printf("FAIL [%s] %s: %s\n", family, c.label.c_str(), e.what());
                ++failed;
            }
            std::fflush(stdout);
        }
    }
    std::printf("%d cases, %d failed\n", ran, failed);
    return failed || ran == 0 ? 1 : 0;
}
