/* panel.h - the CPU's interleaved layout of q4_0 / q4_1 / q8_0 / q4_K weights
 * (HEARTH_LAYOUT_PANEL8), which the AVX2 kernels read without gathers, and
 * the AVX-512 prefill kernels pack from with plain loads.
 *
 * Rows go in groups of 8; the first N - N % 8 rows are re-laid, the last N % 8
 * stay as stored, where they were (so the matrix keeps its size, and row n of
 * the tail is at n * row_bytes as before). Group g's block b is one tile of
 * 8 * sizeof(block) bytes at (g * nb + b) * 8 * sizeof(block):
 *
 *   d[8]    the 8 rows' f16 scales                        16 bytes
 *   m[8]    (q4_1) the 8 rows' f16 minimums               16 bytes
 *   codes   q4: 4 vectors of 32 bytes, vector i holding bytes 4i..4i+3 of
 *           each row's 16 nibble bytes (row r at 4r): the low nibbles are
 *           codes 4i..4i+3, the high ones 16+4i..16+4i+3;
 *           q8_0: 8 vectors of 32 bytes, vector i holding codes 4i..4i+3 of
 *           each row (row r at 4r).
 *
 *   q4_K: d[8], dmin[8], then the block's other bytes as they are,
 *         interleaved a dword at a time in the same way (vector i: dword i
 *         of each row, row r at 4r): 3 vectors of the packed 6-bit scales
 *         and mins (scales bytes 4i..4i+3), 32 of the nibbles (qs bytes
 *         4i..4i+3). So one 32-byte load gives a dword of the scales of 8
 *         rows, which 32-bit masks unpack for all 8 at once.
 *
 * So one 16-byte load gives 8 rows' scales, and one 32-byte load four codes
 * of 8 rows, which a broadcast of four activation codes dots per row
 * (PMADDUBSW) with no transpose. llama.cpp's CPU "repack" buffers (q4_0 8x8)
 * are the same idea. */
#ifndef HEARTH_OPS_CPU_PANEL_H
#define HEARTH_OPS_CPU_PANEL_H

#include "core/dtype.h"

#include <stddef.h>

enum { PANEL_ROWS = 8 };

/* 1 when weights of type wt are re-laid at load: wt is one of the four above,
 * there are at least 8 rows, and the ISA in use is AVX2 or AVX-512 (which
 * decodes them through AVX2's panel kernels, 1.8-5x its own stored-layout
 * GEMVs on a Zen 4 VM, s30, and prefills them from the tiles). */
int hearth_cpu_panel_wanted(hearth_dtype wt, int N);

/* dst (row_bytes * N bytes, not overlapping src) = src re-laid. */
void hearth_cpu_panel_pack(void *dst, const void *src, hearth_dtype wt, int K, int N);

/* Block b of row n of panel-laid weights w, in its stored form, into blk
 * (one block: 18 to 144 bytes). */
void hearth_cpu_panel_block(const void *w, hearth_dtype wt, int K, int N, int n, int b, void *blk);

#endif
