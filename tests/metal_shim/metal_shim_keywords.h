// The MSL keywords and attributes as C++ macros, for the kernel sources only (metal/common.h
// includes this after metal_shim.h; host-side test code must not see these names redefined).
#pragma once

// --- MSL keywords and attributes ------------------------------------------------------------------
// Address spaces: device/thread memory is ordinary memory; `constant` is read-only; threadgroup
// arrays are shared by the group's threads (see the top of this file).
#define kernel
#define device
#define thread
#define constant const
#define threadgroup static
// Attributes become the empty attribute list [[]].
#define buffer(n)
#define threadgroup_position_in_grid
#define thread_position_in_threadgroup
#define threads_per_threadgroup
#define thread_index_in_simdgroup
#define simdgroup_index_in_threadgroup
