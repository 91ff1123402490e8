// The akunu._core extension: one bind_* function per API area, each in its own file. What the
// akunu package (python/akunu/) builds its public API from sits at the top level; the test and
// benchmark seams sit in the submodule _testing (bind_testing.h), re-exported as akunu._testing.
#include <nanobind/nanobind.h>

#include "python/bind_testing.h"

namespace nb = nanobind;

void bind_errors(nb::module_ &m);
void bind_tokenizer(nb::module_ &m);
void bind_model(nb::module_ &m);
void bind_checkpoint(nb::module_ &m);

NB_MODULE(_core, m) {
    m.doc() = "akunu native core: models, tokenizers and the dispatch-table engine";
    bind_errors(m);
    bind_tokenizer(m);
    bind_checkpoint(m);  // before bind_model: Model's constructor takes an HFCheckpoint
    bind_model(m);

    nb::module_ testing = m.def_submodule(
        "_testing", "Test and benchmark seams: single kernels, commands and counters below the Model. Not API.");
    bind_testing_kernels(testing);     // CPU row kernels on raw bytes
    bind_testing_device(testing);      // one command on a new device of any backend
    bind_testing_bench(testing);       // one kernel as a timed dispatch table
    bind_testing_gpu(testing);         // CUDA / Metal presence, CUDA path counters
    bind_testing_checkpoint(testing);  // the loader's MLX conversion
    bind_testing_memory(testing);      // what the memory plan sees as available
    bind_testing_sanitizer(testing);   // which sanitizers this build has, and a bug for each
}
