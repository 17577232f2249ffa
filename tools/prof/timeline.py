#!/usr/bin/env python3
"""timeline.py TRACE.csv [--window N] : what a cupti_trace.c timeline says.

Activities are grouped in phases (split where the GPU idles over --gap us).
Kernels of one stream run in order, but with programmatic dependent launch a
kernel starts (and waits) before the one ahead ends, so its duration
overstates it; what it adds to the step is its end minus the previous end
("adds"). For the largest phases: each kernel name's count, summed duration
and summed "adds", then --window activities from the middle of the phase."""
import argparse, csv, re, shutil, subprocess


def short_names(names):
    names = sorted(set(names))
    dem = {}
    if shutil.which('c++filt'):
        outp = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True).stdout.split('\n')
        dem = dict(zip(names, outp))
    res = {}
    for n in names:
        d = dem.get(n, n)
        if d == n and n.startswith('_Z'):  # crude: the first identifier
            m = re.match(r'_ZN?(\d+)', n)
            d = n[len(m.group(0)):len(m.group(0)) + int(m.group(1))] if m else n
        d = re.sub(r'^void ', '', d)
        d = re.sub(r'\(.*$', '', d) if '<' not in d.split('(')[0] else d.split('(')[0]
        d = d.replace('hearth_dtype', 'dt').replace('(dt)', '')
        res[n] = d[:70]
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('trace')
    ap.add_argument('--window', type=int, default=40)
    ap.add_argument('--gap', type=float, default=200.0)
    ap.add_argument('--phases', type=int, default=3)
    ap.add_argument('--big-copy', type=int, default=1 << 20, help='copies of this many bytes or more are left out')
    a = ap.parse_args()
    rows = []
    with open(a.trace) as f:
        for r in csv.reader(f):
            if len(r) < 4: continue
            if r[2] == 'memcpy' and int(r[3].split()[0]) >= a.big_copy: continue  # uploads at load
            rows.append((int(r[0]), int(r[1]), r[2], ','.join(r[3:])))
    rows.sort()
    sn = short_names([r[3] for r in rows if r[2] == 'kernel'])
    rows = [(s, e, sn.get(n, n) if k == 'kernel' else 'memcpy ' + n) for s, e, k, n in rows]
    print(f"{len(rows)} activities")
    phases, cur = [], [rows[0]]
    for p, q in zip(rows, rows[1:]):
        if q[0] - max(x[1] for x in cur[-4:]) > a.gap * 1e3:
            phases.append(cur)
            cur = []
        cur.append(q)
    phases.append(cur)
    for i, ph in enumerate(phases):
        if len(ph) < 8: continue
        print(f"phase {i}: {len(ph)} activities, {(max(e for _, e, _ in ph) - ph[0][0]) / 1e3:.1f} us")
    for i in sorted(sorted(range(len(phases)), key=lambda i: -len(phases[i]))[:a.phases]):
        ph = phases[i]
        agg, prev_end, inc = {}, ph[0][0], []
        for s, e, n in ph:
            add = max(0, e - prev_end)
            prev_end = max(prev_end, e)
            inc.append(add)
            c, d, ad = agg.get(n, (0, 0, 0))
            agg[n] = (c + 1, d + e - s, ad + add)
        span = prev_end - ph[0][0]
        print(f"=== phase {i}: {span / 1e3:.1f} us")
        print(f"{'adds us':>10} {'share':>6} {'count':>6} {'dur/call':>9} {'adds/call':>9}  kernel")
        for n, (c, d, ad) in sorted(agg.items(), key=lambda x: -x[1][2])[:16]:
            print(f"{ad / 1e3:10.1f} {100 * ad / span:5.1f}% {c:6d} {d / c / 1e3:9.2f} {ad / c / 1e3:9.2f}  {n}")
        m = len(ph) // 2
        print(f"--- window: start, end (us from the first), duration, adds")
        t0 = ph[max(0, m - a.window // 2)][0]
        for j in range(max(0, m - a.window // 2), min(len(ph), m + a.window // 2)):
            s, e, n = ph[j]
            print(f"{(s - t0) / 1e3:9.2f} {(e - t0) / 1e3:9.2f} {(e - s) / 1e3:8.2f} {inc[j] / 1e3:8.2f}  {n}")


if __name__ == '__main__':
    main()
