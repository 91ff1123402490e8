// What a kernel boundary costs on the GPU, against a grid-wide barrier inside one kernel: the floor
// under the five dependent kernels of a decode layer.
//
// A CUDA graph of 160 empty kernels (each waits for its predecessor and releases its successor, as
// every akunu kernel does), with and without programmatic dependent launch, for grids of one to
// four blocks per SM; then one kernel crossing 160 grid barriers (an atomic counter per barrier,
// every block resident). Prints microseconds per boundary.
//
//   nvcc -arch=sm_90a -O3 -o /tmp/kernel_boundary tools/cuda_experiments/kernel_boundary.cu && /tmp/kernel_boundary
#include <cuda_runtime.h>

#include <cstdio>

namespace {

constexpr int kBoundaries = 160;  // about a 32-layer decode step's kernels

__global__ void empty_kernel(float *sink) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (threadIdx.x == 1u << 30) sink[0] = 0.f;  // never: keeps the kernel from being empty
}

__global__ void grid_barriers(unsigned *counter, int n) {
    for (int b = 0; b < n; ++b) {
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(counter, 1u);
            const unsigned target = (unsigned)(b + 1) * gridDim.x;
            while (atomicAdd(counter, 0u) < target) {
            }
            __threadfence();
        }
        __syncthreads();
    }
}

// Milliseconds that the work `enqueue` puts on stream s takes on the GPU.
template <typename Enqueue>
float time_ms(cudaStream_t s, Enqueue enqueue) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0, s);
    enqueue();
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms = 0.f;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms;
}

}  // namespace

int main() {
    float *sink = nullptr;
    unsigned *counter = nullptr;
    cudaMalloc(&sink, sizeof(float));
    cudaMalloc(&counter, sizeof(unsigned));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);

    for (int per_sm : {1, 2, 4})
        for (int threads : {256, 512})
            for (int pdl : {0, 1}) {
                cudaGraph_t graph;
                cudaGraphExec_t exec;
                cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
                for (int i = 0; i < kBoundaries; ++i) {
                    cudaLaunchConfig_t cfg{};
                    cfg.gridDim = dim3(sms * per_sm);
                    cfg.blockDim = dim3(threads);
                    cfg.stream = s;
                    cudaLaunchAttribute attr;
                    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
                    attr.val.programmaticStreamSerializationAllowed = 1;
                    cfg.attrs = &attr;
                    cfg.numAttrs = pdl;
                    cudaLaunchKernelEx(&cfg, empty_kernel, sink);
                }
                cudaStreamEndCapture(s, &graph);
                cudaGraphInstantiate(&exec, graph, 0);
                const int reps = 20;
                const auto replay = [&](int n) {
                    for (int r = 0; r < n; ++r) cudaGraphLaunch(exec, s);
                };
                time_ms(s, [&] { replay(3); });  // warm-up
                const float ms = time_ms(s, [&] { replay(reps); });
                std::printf("graph of %d kernels, %d blocks x %d threads, PDL %s: %.2f us per kernel\n", kBoundaries,
                            sms * per_sm, threads, pdl ? "on " : "off", ms * 1000.f / (reps * kBoundaries));
                cudaGraphExecDestroy(exec);
                cudaGraphDestroy(graph);
            }

    for (int per_sm : {1, 2, 4}) {
        const auto barriers = [&] { grid_barriers<<<sms * per_sm, 256, 0, s>>>(counter, kBoundaries); };
        cudaMemsetAsync(counter, 0, sizeof(unsigned), s);
        time_ms(s, barriers);  // warm-up
        cudaMemsetAsync(counter, 0, sizeof(unsigned), s);
        const float ms = time_ms(s, barriers);
        std::printf("one kernel, %d grid barriers, %d blocks x 256 threads: %.2f us per barrier\n", kBoundaries,
                    sms * per_sm, ms * 1000.f / kBoundaries);
    }
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        std::printf("CUDA error: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
