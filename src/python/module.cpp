// The akunu._core extension: one bind_* function per API area, each in its own file.
#include <nanobind/nanobind.h>

namespace nb = nanobind;

void bind_errors(nb::module_ &m);
void bind_tokenizer(nb::module_ &m);
void bind_model(nb::module_ &m);
void bind_checkpoint(nb::module_ &m);
void bind_kernels(nb::module_ &m);
void bind_cuda(nb::module_ &m);
void bind_bench(nb::module_ &m);

NB_MODULE(_core, m) {
    m.doc() = "akunu native core: models, tokenizers and the dispatch-table engine";
    bind_errors(m);
    bind_tokenizer(m);
    bind_checkpoint(m);  // before bind_model: Model's constructor takes an HFCheckpoint
    bind_model(m);
    bind_cuda(m);
    bind_kernels(m);  // low-level kernel entry points for tests and microbenchmarks
    bind_bench(m);    // single-kernel dispatch tables for benchmarks/test_microbench.py
}
