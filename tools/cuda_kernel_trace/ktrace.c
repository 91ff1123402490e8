// Minimal CUPTI kernel tracer, loaded with ctypes (trace_decode.py): ktrace_start() before the work,
// ktrace_stop(path) writes "start_ns,end_ns,grid_x,block_x,mangled name" per kernel, graph nodes
// included. KREC is the CUPTI kernel-record struct of the toolkit it is built against (trace.sh).
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The CSV text so far (records arrive in buffers, flushed by CUPTI on its own thread).
static char *rows;
static size_t rows_len, rows_cap;

static void add_row(const char *s) {
    size_t n = strlen(s);
    if (rows_len + n + 1 > rows_cap) {
        rows_cap = (rows_cap + n + 1) * 2;
        rows = realloc(rows, rows_cap);
    }
    memcpy(rows + rows_len, s, n + 1);
    rows_len += n;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *size = 8 << 20;
    *buffer = aligned_alloc(8, *size);
    *max_records = 0;  // as many as fit
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    CUpti_Activity *record = NULL;
    char line[600];
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            KREC *k = (KREC *)record;
            snprintf(line, sizeof line, "%llu,%llu,%d,%d,%.400s\n", (unsigned long long)k->start,
                     (unsigned long long)k->end, k->gridX, k->blockX, k->name ? k->name : "?");
            add_row(line);
        }
    }
    free(buffer);
}

int ktrace_start(void) {
    int e = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (e) return e;
    return cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
}

int ktrace_stop(const char *path) {
    cuptiActivityFlushAll(1);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    if (rows) fwrite(rows, 1, rows_len, f);
    fclose(f);
    return 0;
}
