// A compile-time table of GEMM tile kernels, one per edge shape: fn[rn - 1][rm - 1] serves a tile
// of rn weight rows by rm activation rows (rn in [1, N], rm in [1, M]), so a GEMM picks the kernel
// for a ragged edge tile with one lookup. Pick::template at<RN, RM>() names the function.
#pragma once

namespace akunu::cpu {

template <class Fn, int N, int M, class Pick> struct TileTable {
    Fn fn[N][M];
    constexpr TileTable() : fn{} { fill<N, M>(); }

private:
    template <int RN, int RM> constexpr void fill() {
        fn[RN - 1][RM - 1] = Pick::template at<RN, RM>();
        if constexpr (RM > 1)
            fill<RN, RM - 1>();
        else if constexpr (RN > 1)
            fill<RN - 1, M>();
    }
};

}  // namespace akunu::cpu
