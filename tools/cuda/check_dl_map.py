#!/usr/bin/env python3
"""Host emulation of decode_layers.cu's quantized consumers in the "block a
thread" mapping (written in session 48, landed in session 49 after its
test passed on an H100), for Q8_0 and Q4_0: rows split at load as
split_rows.cu lays them (codes, then f16 scales), x made into xprep's q8
32-groups (with Q4_0's 8 x sum), a 4096-wide stage's R rows taken as
thread t's block t % 128 of rows 2p + t / 128 (p < R / 2), each warp's
values summed by rows_sum's butterfly (the row a lane ends with), written to
rr at 2 row + t / 128 by the lanes the kernel picks and summed over the
four warps of that half; down's DR rows as thread t's blocks t and t + 256.
Checked against the dequantized dot of every row. A transcription of the
device indexing: keep it in step with the kernel. Needs numpy (the project
venv); prints each case's largest relative error (float rounding only:
~1e-6; a wrong index gives ~0.1 and more).

  .venv/bin/python3 tools/cuda/check_dl_map.py
"""
import sys

import numpy as np
rng = np.random.default_rng(1)
D, FF, CT, CW = 4096, 14336, 256, 8

def q8_groups(x):  # xprep q8: per 32-group
    g = x.reshape(-1, 32)
    amax = np.abs(g).max(1)
    d = (amax / 127).astype(np.float16).astype(np.float32)
    iid = np.where(amax != 0, 127 / np.where(amax == 0, 1, amax), 0)
    q = np.clip(np.rint(g * iid[:, None]), -128, 127).astype(np.int32)
    return q, d

def split_row(qt, codes, scales):  # codes per block (int), scales f16 -> split bytes
    nb = len(scales)
    if qt == 'q8':
        cb = (codes.astype(np.int8)).view(np.uint8).reshape(nb, 32)
    else:
        c = codes.reshape(nb, 32).astype(np.uint8)
        cb = (c[:, :16] | (c[:, 16:] << 4)).astype(np.uint8)
    return np.concatenate([cb.reshape(-1), scales.astype(np.float16).view(np.uint8)])

def dot_block(qt, row, b, nb, xq, xd, xoff):
    if qt == 'q8':
        w = row[32 * b:32 * b + 32].view(np.int8).astype(np.int64)
        s = int((w * xq).sum())
        sc = row[32 * nb + 2 * b:32 * nb + 2 * b + 2].view(np.float16)[0]
    else:
        v = row[16 * b:16 * b + 16]
        lo = (v & 15).astype(np.int64); hi = (v >> 4).astype(np.int64)
        s = int((lo * xq[:16]).sum() + (hi * xq[16:]).sum()) - xoff
        sc = row[16 * nb + 2 * b:16 * nb + 2 * b + 2].view(np.float16)[0]
    return np.float32(sc) * np.float32(xd) * np.float32(s)

def rows_sum(vals, R):  # vals [32][R] -> per lane (row, value), butterfly as the kernel
    a = [list(v) for v in vals]
    row = [0] * 32
    n, o = R, 16
    while n > 1:
        new = [None] * 32
        for l in range(32):
            hi = bool(l & o); p = l ^ o
            keep = [a[l][i + n // 2] if hi else a[l][i] for i in range(n // 2)]
            send_p = [a[p][i] if (p & o) else a[p][i + n // 2] for i in range(n // 2)]
            new[l] = [keep[i] + send_p[i] for i in range(n // 2)]
            if hi: row[l] += n // 2
        a = new; n //= 2; o //= 2
    v = [a[l][0] for l in range(32)]
    while o:
        v = [v[l] + v[l ^ o] for l in range(32)]; o //= 2
    return row, v

failed = []
def report(what, got, ref):
    err = max(abs(g - r) / max(1e-9, abs(r)) for g, r in zip(got, ref))
    print(f"{what}: max relative error {err:.3g}" + ("  FAIL" if not err < 1e-4 else ""))
    if not err < 1e-4: failed.append(what)

def make_case(qt, n, K):
    """x of K (its q8 groups, d's and 8 x sums), n random split rows of K and their dequantized dots with x"""
    xq, xd = q8_groups(rng.standard_normal(K).astype(np.float32))
    rows, ref = [], []
    for r in range(n):
        codes = rng.integers(-127, 128, K) if qt == 'q8' else rng.integers(0, 16, K)
        sc = (rng.random(K // 32) * 0.01 + 0.001).astype(np.float16)
        rows.append(split_row(qt, codes, sc))
        deq = (codes if qt == 'q8' else codes - 8).reshape(-1, 32) * sc.astype(np.float32)[:, None]
        ref.append(float((deq * (xq * xd[:, None])).sum()))
    return xq, xd, 8 * xq.sum(1), rows, ref

for qt, R, DR in (('q8', 4, 1), ('q4', 8, 2)):
    xq, xd, xoff, rows, ref = make_case(qt, R, D)
    P = R // 2
    rr = np.full((CW, R), np.nan)
    for w in range(CW):
        vals = []
        for lane in range(32):
            t = 32 * w + lane; h = t >> 7; b = t & 127
            vals.append([dot_block(qt, rows[2 * i + h], b, D // 32, xq[b], xd[b], xoff[b]) for i in range(P)])
        row, v = rows_sum(vals, P)
        for lane in range(32):
            t = 32 * w + lane
            if (t & (32 // P - 1)) == 0: rr[w, 2 * row[lane] + (t >> 7)] = v[lane]
    got = [sum(rr[w, i] for w in range(4 * (i & 1), 4 * (i & 1) + 4)) for i in range(R)]
    report(qt + ' 4096-wide', got, ref)
    # down
    aq, ad, aoff, drows, dref = make_case(qt, DR, FF)
    rr = np.full((CW, DR), np.nan)
    for w in range(CW):
        vals = []
        for lane in range(32):
            t = 32 * w + lane
            acc = []
            for i in range(DR):
                s = dot_block(qt, drows[i], t, FF // 32, aq[t], ad[t], aoff[t])
                if t + CT < FF // 32: s += dot_block(qt, drows[i], t + CT, FF // 32, aq[t + CT], ad[t + CT], aoff[t + CT])
                acc.append(s)
            vals.append(acc)
        row, v = rows_sum(vals, DR)
        for lane in range(32):
            if (lane & (32 // DR - 1)) == 0: rr[w, row[lane]] = v[lane]
    got = [rr[:, i].sum() for i in range(DR)]
    report(qt + ' down', got, dref)
sys.exit(1 if failed else 0)
