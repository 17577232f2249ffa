#!/usr/bin/env python3
"""Host emulation of mmv_tc.cu's mmv_tcq_kernel for one warp: its cp.async
copies of a round (codes, d's, x) into the stage, the ldmatrix.x4 fragments
and the m16n8k32 s8 products, checked against the direct integer dot of
every block or sub-block (Q4_0, Q8_0 and Q4_K, T = 3 and 8, full and
partial rounds, every slice, empty ones included), the heads, and the x
(d, sum) pairs each lane reads for its scaling.
mmv_tcqx_kernel runs the same round (tcq_round) on x kept whole in shared
memory; its x addressing is checked on the device only (cuda_matmul), but
for Q6_K (below).
Q6_K (run_q6k): stored rows re-laid as split_rows.cu's split_map does, the
copies of a round (tcq_rows, tcq_copy_w: q6k_rows, q6k_copy_w) into a stage
that starts as garbage (cp.async zero fill emulated), both kernels
(mmv_tcqx_kernel: its stage slots over two tiles, its resident x and zero
bytes), the s8 codes and m16n8k16 products of each 16-element region
checked against the stored block decoded as deq_group32<Q6_K> does, with
each lane's int8 scales, d and x's d.
A transcription of the device indexing: keep it in step with the kernel.
Needs numpy (the project venv).

  .venv/bin/python3 tools/cuda/check_tcq_map.py
"""
import numpy as np
def run(QT, NT, nb, KS, ks, swiglu=False):
    # nb: weight blocks a row; a Q4_K block is 8 of x's 32-groups, with a 16-byte head
    QB = {'q4_0': 16, 'q8_0': 32, 'q4_K': 128}[QT]; U = 128//QB; GPB = 8 if QT=='q4_K' else 1; HB = 16 if QT=='q4_K' else 2
    XS = 32*U*GPB+16; WS=144; HOFF=16*WS+8*XS; DOFF=HOFF+256; STAGE=DOFF+8*U*GPB*8
    ng = nb*GPB; K = ng*32; rows = 16
    rng = np.random.default_rng(1)
    codes = rng.integers(0,256,(rows, nb*QB), dtype=np.uint8)
    heads = rng.integers(0,256,(rows, nb*HB), dtype=np.uint8)
    W = np.concatenate([codes, heads],1)   # split row: codes then heads
    xq = rng.integers(-127,128,(NT,K)).astype(np.int8)
    xds = rng.standard_normal((NT, ng, 4)).astype(np.float32)   # x's (d, sum, s, 0) a group; the stage keeps (d, sum)
    def elem(r, k):  # weight integer element as the kernel sees it (Q4_0, Q4_K: nibble 0..15)
        if QT=='q4_K':  # block k // 256; unit j = 32 code bytes: low nibbles elements 64j.., high 64j+32..
            b, e = divmod(k, 256); j, f = divmod(e, 64); byte = codes[r, b*128 + 32*j + f%32]
            return int(byte & 15) if f < 32 else int(byte >> 4)
        b, e = divmod(k,32)
        if QT=='q4_0':
            byte = codes[r, b*16 + (e%16)]; return int(byte & 15) if e < 16 else int(byte >> 4)
        return int(np.int8(codes[r, b*32+e]))
    per = ((nb+KS-1)//KS + U-1)//U*U; b0 = ks*per; mine = max(0, min(per, nb-b0)) if b0 < nb else 0
    rounds = (mine+U-1)//U
    res = np.zeros((rows, 8), dtype=np.int64)   # per block sums checked individually
    for rd in range(rounds):
        sm = bytearray(STAGE)
        for lane in range(32):
            blk = rd*U + 16*(lane&7)//QB
            for i in range(4):
                m = (lane>>3)+4*i
                if blk < mine:
                    off = (b0+rd*U)*QB + 16*(lane&7)
                    sm[m*WS+16*(lane&7): m*WS+16*(lane&7)+16] = W[m, off:off+16].tobytes()
            if lane < 16:
                n = HB*min(U, mine-rd*U); src = nb*QB + HB*(b0+rd*U)
                sm[HOFF+16*lane: HOFF+16*lane+n] = W[lane, src:src+n].tobytes()
            CPR = 2*U*GPB
            for i in range(8*CPR//32):
                j = lane+32*i; t, ch = divmod(j, CPR)
                if t < NT and rd*U + ch//(2*GPB) < mine:
                    src = (b0+rd*U)*32*GPB + 16*ch
                    a = 16*WS + t*XS + 16*ch
                    sm[a:a+16] = xq[t, src:src+16].tobytes()
            for i in range(8*U*GPB//32):
                j = lane+32*i; u, t = divmod(j, 8)
                if t < NT and rd*U + u//GPB < mine:
                    sm[DOFF+8*j: DOFF+8*j+8] = xds[t, (b0+rd*U)*GPB+u, :2].tobytes()
        sm = np.frombuffer(bytes(sm), dtype=np.uint8)
        def ldsm(addr_of_lane):
            addrs = [addr_of_lane(l) for l in range(32)]
            out = [[0]*4 for _ in range(32)]
            for l in range(32):
                g, c = l>>2, l&3
                for i in range(4):
                    a = addrs[8*i+g] + 4*c
                    out[l][i] = sm[a:a+4].copy()
            return out
        # mma m16n8k32: A[m][k]: m = g (a0, a2), g + 8 (a1, a3); k = 4c + i (a0 / a1), 16 + 4c + i (a2 / a3)
        def mma_check(A, xbi, sub, tag):  # A(l): lane's a0..a3 (4 bytes each); x's b0, b1 from xb[l][xbi], [xbi + 1]
            Am = np.zeros((16,32),dtype=np.int64); Bm = np.zeros((32,8),dtype=np.int64)
            for l in range(32):
                g, c = l>>2, l&3; a = A(l)
                for i in range(4):
                    Am[g][4*c+i] = int(a[0][i]); Am[g+8][4*c+i] = int(a[1][i])
                    Am[g][16+4*c+i] = int(a[2][i]); Am[g+8][16+4*c+i] = int(a[3][i])
                    Bm[4*c+i][g] = int(xb[l][xbi][i].view(np.int8)); Bm[16+4*c+i][g] = int(xb[l][xbi+1][i].view(np.int8))
            C = Am @ Bm
            want = np.array([[sum(elem(r, 32*sub+e)*int(xq[t,32*sub+e]) for e in range(32)) if t < NT else 0 for t in range(8)] for r in range(16)])
            assert (C[:, :NT] == want[:, :NT]).all(), tag
            assert (C[:, NT:] == 0).all(), tag
        def xd_check(grp_in_round, grp, tag):  # lane's float4 at xd + 8 grp + 2c: (d, sum) of rows 2c, 2c + 1
            for l in range(32):
                c = l&3; a = DOFF + 8*(8*grp_in_round + 2*c)
                e = sm[a: a+16].view(np.float32)
                for k, t in enumerate((2*c, 2*c+1)):
                    want = xds[t, grp, :2] if t < NT else np.zeros(2, np.float32)
                    assert (e[2*k:2*k+2] == want).all(), tag
        if QT == 'q4_K':  # one block a round: four units, each two mma (low / high nibbles)
            b = b0 + rd
            for j in range(4):
                xb = ldsm(lambda l: 16*WS + (l&7)*XS + 32*(2*j+(l>>4)) + 16*((l>>3)&1))
                q = ldsm(lambda l: ((l&7)+8*((l>>3)&1))*WS + 32*j + 16*(l>>4))
                mma_check(lambda l: [q[l][i] & 15 for i in range(4)], 0, 8*b + 2*j, (QT, rd, j, 'lo'))
                mma_check(lambda l: [q[l][i] >> 4 for i in range(4)], 2, 8*b + 2*j + 1, (QT, rd, j, 'hi'))
                xd_check(2*j, 8*b + 2*j, (QT, rd, j, 'xd lo')); xd_check(2*j+1, 8*b + 2*j + 1, (QT, rd, j, 'xd hi'))
            for g in range(16):
                assert (sm[HOFF+16*g: HOFF+16*g+16] == heads[g, 16*b: 16*b+16]).all(), (QT, rd, 'head', g)
            continue
        for p in range(0, U, 2):
            if rd*U+p >= mine: break
            xb = ldsm(lambda l: 16*WS + (l&7)*XS + 32*(p+(l>>4)) + 16*((l>>3)&1))
            for j in range(2):
                if rd*U+p+j >= mine: break
                b = b0+rd*U+p+j
                if QT=='q4_0':
                    q = ldsm(lambda l: ((l&7)+8*((l>>3)&1))*WS + 16*(p+(l>>4)))
                    A = lambda l: [q[l][2*j]&15, q[l][2*j+1]&15, q[l][2*j]>>4, q[l][2*j+1]>>4]
                else:
                    q = ldsm(lambda l: ((l&7)+8*((l>>3)&1))*WS + 32*(p+j) + 16*(l>>4))
                    A = lambda l: [q[l][0].view(np.int8), q[l][1].view(np.int8), q[l][2].view(np.int8), q[l][3].view(np.int8)]
                mma_check(A, 2*j, b, (QT, rd, p, j))
                xd_check(p+j, b, (QT, rd, p, j))
                # heads
                d = heads.view(np.uint16)
                for g in range(8):
                    fa = sm[HOFF+16*g+2*(p+j): HOFF+16*g+2*(p+j)+2].view(np.uint16)[0]
                    fb = sm[HOFF+16*(g+8)+2*(p+j): HOFF+16*(g+8)+2*(p+j)+2].view(np.uint16)[0]
                    assert fa == d[g, b] and fb == d[g+8, b]
    return mine

# ---- Q6_K ---------------------------------------------------------------
Q6B, Q6QB, Q6WS, Q6HS = 210, 192, 208, 320   # stored block; codes a block; stage row stride; heads a stage

def q6k_split_rows(st, nb):
    """split_rows.cu's split_map<Q6_K> on stored rows st[rows][nb * 210]"""
    rows = st.shape[0]; blk = st.reshape(rows, nb, Q6B)
    codes = np.zeros((rows, nb, Q6QB), np.uint8); codes[:, :, :128] = blk[:, :, :128]
    for u in range(4):
        sh = 2*(u & 1); qh = blk[:, :, 128 + 32*(u >> 1): 160 + 32*(u >> 1)]
        codes[:, :, 128 + 16*u: 144 + 16*u] = ((qh[:, :, :16] >> sh) & 0x33) | (((qh[:, :, 16:] >> sh) & 0x33) << 2)
    sc = np.zeros((rows, nb, 16), np.uint8)
    for u in range(4):
        for k in range(4):
            sc[:, :, 4*u + k] = blk[:, :, 192 + 8*(u >> 1) + 2*(u & 1) + (k & 1) + 4*(k >> 1)]
    return np.concatenate([codes.reshape(rows, -1), sc.reshape(rows, -1), blk[:, :, 208:210].reshape(rows, -1)], 1)

def q6k_decode(st, nb):
    """codes less 32 and int8 scales of every element, as deq_group32<Q6_K> reads the stored block"""
    rows = st.shape[0]; blk = st.reshape(rows, nb, Q6B).astype(np.int64)
    q = np.zeros((rows, nb, 8, 32), np.int64); sc = np.zeros((rows, nb, 8, 32), np.int64)
    for G in range(8):
        n, k = G >> 2, G & 3
        ql = blk[:, :, 64*n + 32*(k & 1): 64*n + 32*(k & 1) + 32]; qh = blk[:, :, 128 + 32*n: 160 + 32*n]
        q[:, :, G] = (((ql >> (4*(k >> 1))) & 15) | (((qh >> (2*k)) & 3) << 4)) - 32
        s8 = blk[:, :, 192 + 8*n + 2*k: 194 + 8*n + 2*k].astype(np.uint8).view(np.int8).astype(np.int64)
        sc[:, :, G, :16] = s8[:, :, :1]; sc[:, :, G, 16:] = s8[:, :, 1:]
    return q.reshape(rows, -1), sc.reshape(rows, -1)

def word(sm, a):
    return int.from_bytes(bytes(sm[a:a+4]), 'little')

def ldsm(sm, addr):
    """ldmatrix.x4: addr[l] the row address lane l gives; lane l gets word l % 4 of row l / 4 of each matrix"""
    for a in addr: assert a % 16 == 0, 'ldmatrix row not 16-byte aligned'
    return [[word(sm, addr[8*i + (l >> 2)] + 4*(l & 3)) for i in range(4)] for l in range(32)]

def q6k_s8(lo, hi):  # mmv_tc.cu's q6k_s8, on 32-bit words
    return ((((lo & 0x0F0F0F0F) | (hi & 0x30303030)) + 0x60606060) & 0xFFFFFFFF) ^ 0x80808080

def sbytes(w):
    return [int(np.uint8((w >> (8*i)) & 255).view(np.int8)) for i in range(4)]

def mma_k16(a0, a1, b):
    """m16n8k16 s8: a0 / a1 row g / g + 8, k 4c..4c+3; b k 4c..4c+3, column g (per lane)"""
    Am = np.zeros((16, 16), np.int64); Bm = np.zeros((16, 8), np.int64)
    for l in range(32):
        g, c = l >> 2, l & 3
        Am[g, 4*c: 4*c+4] = sbytes(a0[l]); Am[g+8, 4*c: 4*c+4] = sbytes(a1[l]); Bm[4*c: 4*c+4, g] = sbytes(b[l])
    return Am @ Bm

def q6k_round(sm, ws, hd, xl, xd, dh):
    """tcq_round_q6k: per unit u, the four region products C[h] (16 x 8) and, per lane, its four outputs'
    (integer scaled sum, the d's f16 bits, x's d)"""
    wm = [(l & 7) + 8*((l >> 3) & 1) for l in range(32)]
    p = [ldsm(sm, [ws + wm[l]*Q6WS + 128 + 32*i + 16*(l >> 4) for l in range(32)]) for i in range(2)]
    out = []
    for u in range(4):
        A = 2*(u & ~1) + (u & 1)
        xb = ldsm(sm, [xl[l] + 32*(A + 2*(l >> 4)) for l in range(32)])
        q = ldsm(sm, [ws + wm[l]*Q6WS + 32*u + 16*(l >> 4) for l in range(32)])
        pa = [p[u >> 1][l][2*(u & 1)] for l in range(32)]; pb = [p[u >> 1][l][2*(u & 1) + 1] for l in range(32)]
        frag = [([q6k_s8(q[l][0], pa[l] << 4) for l in range(32)], [q6k_s8(q[l][1], pb[l] << 4) for l in range(32)]),
                ([q6k_s8(q[l][2], pa[l] << 2) for l in range(32)], [q6k_s8(q[l][3], pb[l] << 2) for l in range(32)]),
                ([q6k_s8(q[l][0] >> 4, pa[l]) for l in range(32)], [q6k_s8(q[l][1] >> 4, pb[l]) for l in range(32)]),
                ([q6k_s8(q[l][2] >> 4, pa[l] >> 2) for l in range(32)], [q6k_s8(q[l][3] >> 4, pb[l] >> 2) for l in range(32)])]
        C = [mma_k16(frag[h][0], frag[h][1], [xb[l][h] for l in range(32)]) for h in range(4)]
        lanes = []
        for l in range(32):
            g, c = l >> 2, l & 3
            e = np.frombuffer(bytes(sm[xd + 8*(8*A + 2*c): xd + 8*(8*A + 2*c) + 16]), np.float32)
            o = []
            for m, col, dx in ((g, 2*c, e[0]), (g, 2*c+1, e[2]), (g+8, 2*c, e[0]), (g+8, 2*c+1, e[2])):
                sc = sbytes(word(sm, hd + 16*m + 4*u))
                d = int.from_bytes(bytes(sm[hd + 256 + 4*m + 2*dh: hd + 256 + 4*m + 2*dh + 2]), 'little')
                o.append((m, col, sum(sc[h]*int(C[h][m, col]) for h in range(4)), d, dx))
            lanes.append(o)
        out.append((C, lanes))
    return out

class Q6Case:
    def __init__(self, NT, nb, N, seed):
        rng = np.random.default_rng(seed)
        self.NT, self.nb, self.N, self.K, self.rb = NT, nb, N, 256*nb, Q6B*nb
        st = rng.integers(0, 256, (N, nb*Q6B), dtype=np.uint8)
        d = rng.uniform(-2, 2, (N, nb)).astype(np.float16).view(np.uint8).reshape(N, nb, 2)
        st.reshape(N, nb, Q6B)[:, :, 208:210] = d
        self.st, self.dbits = st, d.view(np.uint16).reshape(N, nb)
        self.mem = np.concatenate([q6k_split_rows(st, nb).reshape(-1), np.zeros(16, np.uint8)])  # rows, then slack
        self.q, self.sc = q6k_decode(st, nb)
        self.xq = rng.integers(-127, 128, (NT, self.K)).astype(np.int8)
        self.xds = rng.standard_normal((NT, 8*nb, 4)).astype(np.float32)   # x's (d, sum, ., .) a group

    def src(self, r, off, n):  # n bytes of split row r at off, as the kernel's cp.async reads them
        a = r*self.rb + off
        if self.rb % 16 == 0: assert a % n == 0, 'cp.async source misaligned'
        if self.nb % 2 == 0: assert off + n <= self.rb, 'read past the row'
        return self.mem[a: a + n]

    def check_round(self, sm, ws, hd, xl, xd, rows, b):
        """the round's values against the stored blocks of rows (A row m: logical row rows[m]), block b"""
        nb, NT = self.nb, self.NT
        for u, (C, lanes) in enumerate(q6k_round(sm, ws, hd, xl, xd, b & 1)):
            A = 2*(u & ~1) + (u & 1)
            for h in range(4):
                G = A + 2*(h >> 1); k0 = 256*b + 32*G + 16*(h & 1)
                for m in range(16):
                    want = [int(np.dot(self.q[rows[m], k0:k0+16], self.xq[t, k0:k0+16].astype(np.int64))) if t < NT else 0
                            for t in range(8)]
                    assert list(C[h][m]) == want, ('q6_K region', b, u, h, m)
            for l in range(32):
                for m, col, v, d, dx in lanes[l]:
                    r = rows[m]; ks = list(range(256*b + 32*A, 256*b + 32*A + 32)) + list(range(256*b + 32*A + 64, 256*b + 32*A + 96))
                    want = int(sum(self.sc[r, k]*self.q[r, k]*int(self.xq[col, k]) for k in ks)) if col < NT else 0
                    assert v == want, ('q6_K unit sum', b, u, l, m, col)
                    assert d == self.dbits[r, b], ('q6_K d', b, u, l, m)
                    assert dx == (self.xds[col, 8*b + A, 0] if col < NT else 0), ('q6_K x d', b, u, l, col)

def q6k_cp(sm, dst, data, n, size):
    """cp.async of size bytes into sm at dst, the first n from data, the rest zero"""
    sm[dst: dst + size] = 0
    if n: sm[dst: dst + n] = data[:n]

def q6k_rows(lane, tile, N, nb):
    """tcq_rows for Q6_K (rows not swiglu): the rows of A rows lane / 8 + 4i, the row of the lane's heads and
    their offset in it (lanes 16..31: the d's, after the codes and the scales)"""
    wrow = [min(16*tile + (lane >> 3) + 4*i, N - 1) for i in range(4)]
    return wrow, min(16*tile + (lane & 15), N - 1), nb*Q6QB + (16*nb if lane >= 16 else 0)

def q6k_copy_w(c, cp, ws, hd, lane, wrow, hr, hoff, blk0, left):
    """tcq_copy_w<Q6_K>: one lane's copies of block blk0 of its rows into the stage (left <= 0: zeros)"""
    ok = left > 0
    for i in range(4):
        m = (lane >> 3) + 4*i
        cp(ws + m*Q6WS + 16*(lane & 7), c.src(wrow[i], blk0*Q6QB + 16*(lane & 7), 16) if ok else None, 16 if ok else 0, 16)
    for i in range(2):
        m = (lane >> 3) + 4*(i + 2*((lane >> 2) & 1)); r = wrow[2 + i] if lane & 4 else wrow[i]
        cp(ws + m*Q6WS + 128 + 16*(lane & 3), c.src(r, blk0*Q6QB + 128 + 16*(lane & 3), 16) if ok else None, 16 if ok else 0, 16)
    if lane < 16: cp(hd + 16*lane, c.src(hr, hoff + 16*blk0, 16) if ok else None, 16 if ok else 0, 16)
    else: cp(hd + 256 + 4*(lane - 16), c.src(hr, hoff + 4*(blk0 >> 1), 4) if ok else None, 4 if ok else 0, 4)

def run_q6k(NT, nb, KS, ks):
    """mmv_tcq_kernel's warp of slice ks over tile 0 (16 rows), its stages starting as garbage"""
    c = Q6Case(NT, nb, 16, 7); K = c.K
    XS = 32*8 + 16; HOFF = 16*Q6WS + 8*XS; DOFF = HOFF + Q6HS; STAGE = DOFF + 8*8*8
    per = (nb + KS - 1)//KS; b0 = ks*per; mine = min(per, nb - b0) if b0 < nb else 0; rounds = mine
    sm = np.random.default_rng(ks).integers(0, 256, 2*STAGE, dtype=np.uint8)
    def cp(dst, data, n, size): q6k_cp(sm, dst, data, n, size)
    def copy_w(rd):
        s = (rd & 1)*STAGE
        for lane in range(32):
            q6k_copy_w(c, cp, s, s + HOFF, lane, *q6k_rows(lane, 0, 16, nb), b0 + rd, mine - rd)
    def copy_x(rd):
        s = (rd & 1)*STAGE
        for lane in range(32):
            for i in range(4):
                j = lane + 32*i; t, ch = divmod(j, 16); ok = t < NT and rd + ch//16 < mine
                cp(s + 16*Q6WS + t*XS + 16*ch, c.xq[t, (b0 + rd)*256 + 16*ch:].view(np.uint8) if ok else None, 16 if ok else 0, 16)
            for i in range(2):
                j = lane + 32*i; u, t = divmod(j, 8); ok = t < NT and rd + u//8 < mine
                cp(s + DOFF + 8*j, c.xds[t, (b0 + rd)*8 + u, :2].view(np.uint8) if ok else None, 8 if ok else 0, 8)
    if rounds > 0: copy_w(0); copy_x(0)
    for rd in range(rounds):
        if rd + 1 < rounds: copy_w(rd + 1); copy_x(rd + 1)
        ws = (rd & 1)*STAGE
        xl = [ws + 16*Q6WS + (l & 7)*XS + 16*((l >> 3) & 1) for l in range(32)]
        c.check_round(sm, ws, ws + HOFF, xl, ws + DOFF, list(range(16)), b0 + rd)
    return mine

def run_q6kx(NT, nb, KS, ks):
    """mmv_tcqx_kernel's warp ks (tile0 0) of a one-block grid over two tiles (the second partial): its S
    stage slots, x resident in shared memory, the zero bytes for x's rows past NT"""
    S, TPB = 3, 16//KS; stride = TPB; N = 16*(stride + 1) - 5; ntiles = (N + 15)//16
    c = Q6Case(NT, nb, N, 11); K = c.K; ng = 8*nb; XR = K + 16
    WST = 16*Q6WS + Q6HS; XOFF = 16*S*WST + 512; ZERO = XOFF - 512; XD = XOFF + NT*XR
    per = (nb + KS - 1)//KS; b0 = ks*per; mine = min(per, nb - b0) if b0 < nb else 0
    rounds = max(1, mine); iters = (ntiles + stride - 1)//stride; nitems = iters*rounds
    assert iters == 2
    sm = np.random.default_rng(ks).integers(0, 256, XD + 8*8*ng, dtype=np.uint8)
    stg = ks*S*WST   # warp w = ks: tile w / KS = 0
    def cp(dst, data, n, size): q6k_cp(sm, dst, data, n, size)
    st = {'ct': 0, 'crd': 0, 'cslot': 0}
    def copy_next():
        ct, crd = st['ct'], st['crd']; s = stg + st['cslot']*WST
        for lane in range(32):
            q6k_copy_w(c, cp, s, s + 16*Q6WS, lane, *q6k_rows(lane, ct, N, nb), b0 + crd, mine - crd if ct < ntiles else 0)
        st['cslot'] = (st['cslot'] + 1) % S; st['crd'] += 1
        if st['crd'] == rounds: st['crd'] = 0; st['ct'] += stride
    for i in range(S - 1):
        if i < nitems: copy_next()
    for t in range(NT): sm[XOFF + t*XR: XOFF + t*XR + K] = c.xq[t].view(np.uint8)
    for j in range(8*ng):
        g, t = divmod(j, 8)
        cp(XD + 8*j, c.xds[t, g, :2].view(np.uint8) if t < NT else None, 8 if t < NT else 0, 8)
    sm[ZERO: XOFF] = 0
    xl0 = [XOFF + (l & 7)*XR + 16*((l >> 3) & 1) + 32*8*b0 if (l & 7) < NT else ZERO for l in range(32)]
    xstep = [256 if (l & 7) < NT else 0 for l in range(32)]
    tile, rd, slot = 0, 0, 0
    for item in range(nitems):
        if item + S - 1 < nitems: copy_next()
        ws = stg + slot*WST
        if rd < mine:
            rows = [min(16*tile + m, N - 1) for m in range(16)]
            c.check_round(sm, ws, ws + 16*Q6WS, [xl0[l] + rd*xstep[l] for l in range(32)], XD + 8*8*8*(b0 + rd), rows, b0 + rd)
        slot = (slot + 1) % S; rd += 1
        if rd == rounds: rd = 0; tile += stride
    return mine

for QT in ['q4_0','q8_0']:
    for NT in [3,8]:
        for nb, KS in [(16,1),(136,8),(3,1),(128,8)]:
            for ks in range(KS):
                run(QT, NT, nb, KS, ks)
for NT in [3,8]:  # Q4_K: nb blocks of 256 (K = 4352: 17 blocks over 8 slices, two of them empty; K = 512)
    for nb, KS in [(17,8),(2,1),(16,8)]:
        for ks in range(KS):
            run('q4_K', NT, nb, KS, ks)
for NT in [3, 8]:  # Q6_K: K = 4352 (17 blocks over 8 slices, two empty), 512 (one slice of 2), 4096 (8 of 2)
    for nb, KS in [(17, 8), (2, 1), (16, 8)]:
        got = [run_q6k(NT, nb, KS, ks) for ks in range(KS)]
        assert sum(got) == nb and (nb != 17 or got.count(0) == 2), got
        assert [run_q6kx(NT, nb, KS, ks) for ks in range(KS)] == got
print("ok")
