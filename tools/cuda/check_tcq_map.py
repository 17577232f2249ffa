#!/usr/bin/env python3
"""Host emulation of mmv_tc.cu's mmv_tcq_kernel for one warp: its cp.async
copies of a round (codes, d's, x) into the stage, the ldmatrix.x4 fragments
and the m16n8k32 s8 products, checked against the direct integer dot of
every block or sub-block (Q4_0, Q8_0 and Q4_K, T = 3 and 8, full and
partial rounds, every slice, empty ones included), the heads, and the x
(d, sum) pairs each lane reads for its scaling.
mmv_tcqx_kernel runs the same round (tcq_round) on x kept whole in shared
memory; its x addressing is checked on the device only (cuda_matmul). A
transcription of the device indexing: keep it in step with the kernel.
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
for QT in ['q4_0','q8_0']:
    for NT in [3,8]:
        for nb, KS in [(16,1),(136,8),(3,1),(128,8)]:
            for ks in range(KS):
                run(QT, NT, nb, KS, ks)
for NT in [3,8]:  # Q4_K: nb blocks of 256 (K = 4352: 17 blocks over 8 slices, two of them empty; K = 512)
    for nb, KS in [(17,8),(2,1),(16,8)]:
        for ks in range(KS):
            run('q4_K', NT, nb, KS, ks)
print("ok")
