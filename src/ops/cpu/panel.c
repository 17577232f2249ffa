/* panel.c - packing to and reading from the interleaved layout (panel.h). */
#include "ops/cpu/panel.h"

#include "core/status.h"
#include "ops/cpu/matmul_impl.h"
#include "ops/cpu/quant.h"

#include <string.h>

typedef struct {
    size_t bb;   /* bytes of a block */
    size_t head; /* the tile's scale bytes: d[8], and m[8] (q4_1) or dmin[8] (q4_K) */
    size_t qo;   /* offset of the dword-interleaved bytes in a block */
    int vecs;    /* 32-byte vectors of them a tile */
} panel_shape;

static int shape(hearth_dtype wt, panel_shape *s) {
    switch (wt) {
    case HEARTH_DT_Q4_0: *s = (panel_shape){sizeof(hearth_block_q4_0), 16, 2, 4}; return 1;
    case HEARTH_DT_Q4_1: *s = (panel_shape){sizeof(hearth_block_q4_1), 32, 4, 4}; return 1;
    case HEARTH_DT_Q8_0: *s = (panel_shape){sizeof(hearth_block_q8_0), 16, 2, 8}; return 1;
    case HEARTH_DT_Q4_K: *s = (panel_shape){sizeof(hearth_block_q4_K), 32, 4, 35}; return 1;
    default: return 0;
    }
}

int hearth_cpu_panel_wanted(hearth_dtype wt, int N) {
    panel_shape s;
    const int isa = hearth_cpu_isa_current();
    return shape(wt, &s) && N >= PANEL_ROWS && (isa == HEARTH_CPU_ISA_AVX2 || isa == HEARTH_CPU_ISA_AVX512);
}

void hearth_cpu_panel_pack(void *dst, const void *src, hearth_dtype wt, int K, int N) {
    panel_shape s;
    HEARTH_ASSERT(shape(wt, &s) && K % hearth_dtype_get(wt)->block == 0);
    const int nb = K / hearth_dtype_get(wt)->block;
    const size_t row_bytes = s.bb * (size_t)nb, tile = s.bb * PANEL_ROWS;
    const int groups = N / PANEL_ROWS;
    const uint8_t *in = src;
    uint8_t *out = dst;
    for (int g = 0; g < groups; g++)
        for (int b = 0; b < nb; b++) {
            uint8_t *t = out + ((size_t)g * nb + b) * tile;
            for (int r = 0; r < PANEL_ROWS; r++) {
                const uint8_t *blk = in + (size_t)(g * PANEL_ROWS + r) * row_bytes + (size_t)b * s.bb;
                memcpy(t + 2 * r, blk, 2);                      /* d */
                if (s.head == 32) memcpy(t + 16 + 2 * r, blk + 2, 2); /* m, dmin */
                for (int i = 0; i < s.vecs; i++) memcpy(t + s.head + 32 * i + 4 * r, blk + s.qo + 4 * i, 4);
            }
        }
    size_t done = (size_t)groups * PANEL_ROWS * row_bytes;
    memcpy(out + done, in + done, (size_t)N * row_bytes - done); /* the tail rows, as stored */
}

void hearth_cpu_panel_block(const void *w, hearth_dtype wt, int K, int N, int n, int b, void *blk) {
    panel_shape s;
    const int nb = K / hearth_dtype_get(wt)->block;
    HEARTH_ASSERT(shape(wt, &s) && K % hearth_dtype_get(wt)->block == 0 && n >= 0 && n < N && b >= 0 && b < nb);
    const uint8_t *in = w;
    uint8_t *o = blk;
    if (n >= N / PANEL_ROWS * PANEL_ROWS) {
        memcpy(o, in + (size_t)n * s.bb * nb + (size_t)b * s.bb, s.bb);
        return;
    }
    const int g = n / PANEL_ROWS, r = n % PANEL_ROWS;
    const uint8_t *t = in + ((size_t)g * nb + b) * s.bb * PANEL_ROWS;
    memcpy(o, t + 2 * r, 2);
    if (s.head == 32) memcpy(o + 2, t + 16 + 2 * r, 2);
    for (int i = 0; i < s.vecs; i++) memcpy(o + s.qo + 4 * i, t + s.head + 32 * i + 4 * r, 4);
}
