// RMSNorm, its post-norm form and the per-head QK-norm against the CPU kernels.
#include "core/kernel_params.h"
#include "kernel_case.h"

using namespace metal_check;

AKUNU_KERNEL_CASES(norm) {
    std::vector<KernelCase> cases;
    for (const char *kernel : {"rmsnorm_f32", "rmsnorm_add_f32"})
        for (uint32_t dim : {64u, 96u, 1000u})
            for (uint32_t rows : {1u, 3u}) {
                akunu::RMSNormParams p{};
                p.dim = dim;
                p.rows = rows;
                p.x_stride = dim + 8;  // strided rows: the kernels must honour the strides
                p.out_stride = dim + 4;
                p.eps = 1e-5f;
                KernelCase c;
                c.label = std::string(kernel) + " dim=" + std::to_string(dim) + " rows=" + std::to_string(rows);
                c.kernel = c.cpu_kernel = kernel;
                c.buffers = {to_bytes(random_floats((size_t)rows * p.x_stride, dim + rows, 2.0f)),
                             to_bytes(random_floats(dim, 7 * dim)),
                             to_bytes(random_floats((size_t)rows * p.out_stride, 3 * dim + rows))};
                c.params = params_bytes(p);
                c.grid = {rows, 1, 1};
                c.outputs = {{2, Element::F32, 1e-5}};
                cases.push_back(c);
            }
    for (uint32_t head_dim : {64u, 128u})
        for (uint32_t rows : {1u, 2u}) {
            akunu::HeadNormParams p{};
            p.rows = rows;
            p.n_heads = 6;
            p.n_kv_heads = 2;
            p.head_dim = head_dim;
            p.stride = (p.n_heads + 2 * p.n_kv_heads) * head_dim;  // Q, K, V: V must stay untouched
            p.eps = 1e-6f;
            KernelCase c;
            c.label = "head_rmsnorm_f32 head_dim=" + std::to_string(head_dim) + " rows=" + std::to_string(rows);
            c.kernel = c.cpu_kernel = "head_rmsnorm_f32";
            c.buffers = {to_bytes(random_floats((size_t)rows * p.stride, head_dim + rows, 3.0f)),
                         to_bytes(random_floats(head_dim, 11)), to_bytes(random_floats(head_dim, 12))};
            c.params = params_bytes(p);
            c.grid = {rows, 1, 1};
            c.outputs = {{0, Element::F32, 1e-5}};
            cases.push_back(c);
        }
    return cases;
}
