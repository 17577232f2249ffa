#!/usr/bin/env python3
"""Host emulation of attention_rows_tc.cu's register-built e4m3 V fragments
(tc_pv_raw) and of its merge store; and the same for the
former ldmatrix.trans path (an f16 V tile), to show both feed each output element the same
B column. Also bank-conflict counts of the V loads (and the K loads)."""
import random

def byte_perm(x, y, s):
    b = list(x) + list(y)           # x bytes 0..3, y bytes 4..7 (low to high)
    out = []
    for i in range(4):
        sel = (s >> (4 * i)) & 0xF
        assert sel < 8, "no sign-replicate mode used"
        out.append(b[sel])
    return out

def check(HD, RLD):
    NDT, NW = HD // 8, HD // 32     # n-tiles; 32-bit words per lane per row
    RAW = 64 * RLD
    # byte-addressed shared stage: K tile at 0, V tile at RAW; labels ('V', p, d)
    smem = {}
    for p in range(64):
        for d in range(HD):
            smem[RAW + p * RLD + d] = ('V', p, d)
            smem[p * RLD + d] = ('K', p, d)
    def ld_words(addr, nbytes):
        assert addr % nbytes == 0, "vector load alignment"
        return [[smem.get(addr + 4 * k + i, ('pad', addr + 4 * k + i)) for i in range(4)] for k in range(nbytes // 4)]
    # selectors: 0x5140 -> (x0, y0, x1, y1), 0x7362 -> (x2, y2, x3, y3)
    assert byte_perm('abcd', 'efgh', 0x5140) == list('aebf')
    assert byte_perm('abcd', 'efgh', 0x7362) == list('cgdh')
    D = lambda j, n: NDT * n + j    # column n of n-tile j
    assert sorted(D(j, n) for j in range(NDT) for n in range(8)) == list(range(HD))
    banks_max = 0
    for w in range(4):
        vt = RAW + 16 * w * RLD
        frag = {}                   # (lane, j) -> (b0 labels (lo, hi), b1 labels)
        loads = []                  # per r: list of (lane, addr, nbytes)
        for lane in range(32):
            g, c = lane >> 2, lane & 3
            vr = vt + 2 * c * RLD + NDT * g
            v = []
            for r in range(4):
                a = vr + ((r & 1) + 8 * (r >> 1)) * RLD
                v.append(ld_words(a, 4 * NW))
                loads.append((r, lane, a, 4 * NW))
            for m in range(NW):
                lo = [byte_perm(v[0][m], v[1][m], 0x5140), byte_perm(v[0][m], v[1][m], 0x7362)]
                hi = [byte_perm(v[2][m], v[3][m], 0x5140), byte_perm(v[2][m], v[3][m], 0x7362)]
                for i in range(4):
                    sh = 2 * (i & 1)    # (uint16_t)(x >> 16 (i & 1)): bytes sh, sh + 1; cvt: low byte -> low half
                    frag[(lane, 4 * m + i)] = (tuple(lo[i >> 1][sh:sh + 2]), tuple(hi[i >> 1][sh:sh + 2]))
        # the m16n8k16 B layout: b0 = (B[2c][g], B[2c+1][g]), b1 = (B[2c+8][g], B[2c+9][g]), B[k][n] = V[16w+k][D(j,n)]
        for lane in range(32):
            g, c = lane >> 2, lane & 3
            for j in range(NDT):
                want0 = (('V', 16 * w + 2 * c, D(j, g)), ('V', 16 * w + 2 * c + 1, D(j, g)))
                want1 = (('V', 16 * w + 2 * c + 8, D(j, g)), ('V', 16 * w + 2 * c + 9, D(j, g)))
                assert frag[(lane, j)] == (want0, want1), (HD, w, lane, j, frag[(lane, j)])
        # bank conflicts: 16-byte loads served 8 lanes a phase, 8-byte 16, 4-byte 32
        for r in range(4):
            per = {16: 8, 8: 16, 4: 32}[4 * NW]
            for ph in range(0, 32, per):
                bank_words = {}
                for (rr, lane, a, nb) in loads:
                    if rr != r or not (ph <= lane < ph + per): continue
                    for k in range(nb // 4):
                        wd = (a + 4 * k) // 4
                        bank_words.setdefault(wd % 32, set()).add(wd)
                banks_max = max(banks_max, max(len(s) for s in bank_words.values()))
        # the current path: ldsm_x4_trans at row 16w + (lane & 15), col 8 jd + 8 (lane >> 4) of V (f16 tile,
        # emulated on logical labels): thread t gets from matrix i M_i[2(t%4)+h][t/4]; b[0],b[1] -> o[jd], b[2],b[3] -> o[jd+1]
        for jd in range(0, NDT, 2):
            rows = [(16 * w + (l & 15), 8 * jd + 8 * (l >> 4)) for l in range(32)]
            for t in range(32):
                g, c = t >> 2, t & 3
                b = []
                for i in range(4):
                    b.append(tuple(('V', rows[8 * i + 2 * c + h][0], rows[8 * i + 2 * c + h][1] + g) for h in range(2)))
                for jj, (b0, b1) in ((jd, (b[0], b[1])), (jd + 1, (b[2], b[3]))):
                    # same column data as the new path gives for logical dim 8 jj + g
                    d = 8 * jj + g
                    jn, nn = d % NDT, d // NDT      # the VREG n-tile / column holding dim d
                    tn = 4 * nn + c                   # the lane (g' = nn, this c) that holds column nn
                    assert (b0, b1) == frag[(tn, jn)], (HD, w, t, jj)
    # K reads of the S step (unchanged): 16 bytes at (16w + 8j + g) RLD + c HD/4 + 16 i
    kmax = 0
    for w in range(4):
        for j in range(2):
            for i in range(HD // 64):
                for ph in range(0, 32, 8):
                    bank_words = {}
                    for lane in range(ph, ph + 8):
                        g, c = lane >> 2, lane & 3
                        a = (16 * w + 8 * j + g) * RLD + c * (HD // 4) + 16 * i
                        for k in range(4):
                            wd = (a + 4 * k) // 4
                            bank_words.setdefault(wd % 32, set()).add(wd)
                    kmax = max(kmax, max(len(s) for s in bank_words.values()))
    return banks_max, kmax

def check_numeric(HD, trials=20):
    """P V per warp through the fragments and the merge store, against the reference"""
    NDT = HD // 8
    for _ in range(trials):
        V = [[random.randint(-8, 8) for _ in range(HD)] for _ in range(16)]
        P = [[random.randint(-4, 4) for _ in range(16)] for _ in range(16)]
        o = {}  # (lane, j) -> [4]
        for j in range(NDT):
            # B matrix of n-tile j from the lanes' fragments: lane (g, c) b0 half h -> B[2c+h][g], b1 -> B[2c+8+h][g]
            B = [[None] * 8 for _ in range(16)]
            for lane in range(32):
                g, c = lane >> 2, lane & 3
                d = NDT * g + j
                for h in range(2):
                    B[2 * c + h][g] = V[2 * c + h][d]
                    B[2 * c + 8 + h][g] = V[2 * c + 8 + h][d]
            Dm = [[sum(P[r][k] * B[k][n] for k in range(16)) for n in range(8)] for r in range(16)]
            for lane in range(32):
                g, c = lane >> 2, lane & 3
                o[(lane, j)] = [Dm[g][2 * c], Dm[g][2 * c + 1], Dm[g + 8][2 * c], Dm[g + 8][2 * c + 1]]
        # merge store of rows 0..7: orow + NDT (cq + x) + j <- (o[j][x], o[j+1][x], o[j+2][x], o[j+3][x])
        ow = {}
        for lane in range(32):
            g, c = lane >> 2, lane & 3
            cq = 2 * c
            for x in range(2):
                for j in range(0, NDT, 4):
                    base = NDT * (cq + x) + j
                    assert (g * HD + base) % 4 == 0, "float4 alignment"
                    for t in range(4):
                        key = (g, base + t)
                        assert key not in ow and 0 <= base + t < HD
                        ow[key] = o[(lane, j + t)][x]
        assert len(ow) == 8 * HD
        for g in range(8):
            for d in range(HD):
                assert ow[(g, d)] == sum(P[g][k] * V[k][d] for k in range(16)), (HD, g, d)

for HD in (64, 128):
    vmax, kmax = check(HD, HD + 16)
    check_numeric(HD)
    print(f"hd {HD}: B fragments == V[16w+k][NDT n + j] for all warps/lanes/n-tiles; "
          f"same columns as the ldmatrix.trans path; merge store covers every (row, dim) once and "
          f"equals P V; max words per bank per phase: V loads {vmax}, K loads {kmax}")
    assert vmax == 1 and kmax == (1 if HD == 128 else 2)
print("ok")
