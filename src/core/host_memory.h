// How much more memory this process may take from the host before the kernel (or its memory
// cgroup) refuses or kills it: the CPU backend's available_memory() and the host side of the memory
// plan (inference/memory_plan.h, docs/adr/0021-memory-plan.md).
//
// Linux: the least of
//   - /proc/meminfo MemAvailable (free memory plus the page cache and slab the kernel can reclaim),
//   - cgroup v2: memory.max - memory.current of the process's cgroup and of each ancestor,
//   - cgroup v1: min(memory.limit_in_bytes, hierarchical_memory_limit) - memory.usage_in_bytes,
// each cgroup's usage less its inactive file cache (reclaimable, as MemAvailable counts it). The
// cgroups are found through /proc/self/cgroup and /proc/self/mountinfo. Every file is parsed
// defensively: a missing, unreadable or malformed one sets no limit. When none sets one (macOS, a
// sandbox without /proc): the physical memory (sysconf).
#pragma once
#include <string>

#include "core/device.h"

namespace akunu {

// `root` prefixes every path read (/proc/..., the cgroup mounts): "" for the real files, a folder
// holding a fake tree for tests.
MemoryAvailable host_available_memory(const std::string &root = "");

}  // namespace akunu
