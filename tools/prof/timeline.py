#!/usr/bin/env python3
"""timeline.py TRACE.csv [--window N] [--host] : what a cupti_trace.c timeline says.

Activities are grouped in phases (split where the GPU idles over --gap us).
Kernels of one stream run in order, but with programmatic dependent launch a
kernel starts (and waits) before the one ahead ends, so its duration
overstates it; what it adds to the step is its end minus the previous end
("adds"). For the largest phases: each kernel name's count, summed duration
and summed "adds", then --window activities from the middle of the phase.

--host (a trace taken with HEARTH_TRACE_API=1): for the same phases (or those
named by --phase), the CUDA runtime API calls beside the GPU activities. API
calls never split phases. The phase's host window runs from the first API call
after the previous sync (the launch, as a rule) to the end of the sync call
that returns after the phase's last GPU activity; listed are its API calls and
GPU activities in time order (runs of GPU activities with no API call or gap
between them on one line, unless --host-all), each GPU idle gap over --gap-us
with the API calls the host was in meanwhile, then the lead-in, the tail and
the time per API name. Calls of every host thread are merged."""
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


# Calls that return only when the GPU has done the work asked of it.
SYNC = re.compile(r'Synchroni[sz]e|Query|^cudaMemcpy(2D|3D|Peer)?(_ptds)?$|^cudaMemcpy(To|From)Symbol(_ptds)?$')


def by_name(calls, lo, hi):
    """{name: (count, us)} of the calls' time inside [lo, hi]."""
    agg = {}
    for s, e, n in calls:
        if min(e, hi) <= max(s, lo): continue
        c, t = agg.get(n, (0, 0))
        agg[n] = (c + 1, t + min(e, hi) - max(s, lo))
    return agg


def host_view(i, ph, prev_end, apis, a):
    """Print phase i's GPU activities ph merged with the API calls apis (both
    (start, end, name), sorted); prev_end: the previous phase's last GPU end."""
    g0, g1 = ph[0][0], max(e for _, e, _ in ph)
    syncs = [x for x in apis if SYNC.search(x[2])]
    after = max([e for _, e, _ in syncs if e <= g0] + [prev_end])
    lead = next((x for x in apis if after <= x[0] < g0), None)
    tail = min((x for x in syncs if x[1] >= g1), key=lambda x: x[1], default=None)
    w0, w1 = lead[0] if lead else g0, tail[1] if tail else g1
    calls = [x for x in apis if x[1] > w0 and x[0] < w1]
    gaps, m = [], ph[0][1]
    for s, e, _ in ph[1:]:
        if s - m > a.gap_us * 1e3: gaps.append((m, s))
        m = max(m, e)
    events = sorted([(s, 0, e, n) for s, e, n in ph] + [(s, 1, e, n) for s, e, n in calls] +
                    [(s, 2, e, '') for s, e in gaps])
    print(f"=== host, phase {i}: us from its first GPU activity; api / gpu / GAP (GPU idle over {a.gap_us:g} us)")
    run = []

    def flush():
        if len(run) == 1:
            print(f"{(run[0][0] - g0) / 1e3:10.2f} {(run[0][2] - run[0][0]) / 1e3:9.2f}        gpu  {run[0][3]}")
        elif run:
            print(f"{(run[0][0] - g0) / 1e3:10.2f} {(max(x[2] for x in run) - run[0][0]) / 1e3:9.2f}        gpu  "
                  f"{len(run)} activities: {run[0][3]} .. {run[-1][3]}")
        run.clear()
    for s, kind, e, n in events:
        if kind == 0:
            run.append((s, kind, e, n))
            if a.host_all: flush()
            continue
        flush()
        if kind == 1:
            print(f"{(s - g0) / 1e3:10.2f} {(e - s) / 1e3:9.2f}  api  {n}")
        else:
            agg = by_name(calls, s, e)
            during = ', '.join(f"{n} x{c} {t / 1e3:.1f}" for n, (c, t) in sorted(agg.items(), key=lambda x: -x[1][1]))
            print(f"{(s - g0) / 1e3:10.2f} {(e - s) / 1e3:9.2f}        GAP  host in: {during or 'no CUDA API call'}")
    flush()
    idle, m = 0, ph[0][1]
    for s, e, _ in ph[1:]:
        idle, m = idle + max(0, s - m), max(m, e)
    busy, m = 0, w0  # the window's time inside some API call
    for s, e, _ in calls:
        s, e = max(s, m), min(e, w1)
        if e > s: busy, m = busy + e - s, e
    print(f"--- host window {(w1 - w0) / 1e3:.1f} us = lead-in {(g0 - w0) / 1e3:.1f} + GPU span {(g1 - g0) / 1e3:.1f}"
          f" + tail {(w1 - g1) / 1e3:.1f}; outside any API call {(w1 - w0 - busy) / 1e3:.1f} us")
    print(f"lead-in: " + (f"{lead[2]} starts {(g0 - lead[0]) / 1e3:.1f} us before the first GPU activity "
                          f"({sum(1 for x in calls if x[0] < g0)} API calls before it; "
                          f"{(lead[0] - after) / 1e3:.1f} us after the previous sync or GPU end)" if lead and after else
                          f"{lead[2]} starts {(g0 - lead[0]) / 1e3:.1f} us before the first GPU activity" if lead else
                          "no API call between the previous sync and the first GPU activity"))
    print(f"tail: " + (f"{tail[2]} returns {(tail[1] - g1) / 1e3:.1f} us after the last GPU activity" if tail else
                       "no sync call returns after the last GPU activity"))
    print(f"GPU idle in the span: {sum(e - s for s, e in gaps) / 1e3:.1f} us in {len(gaps)} gaps over "
          f"{a.gap_us:g} us, {idle / 1e3:.1f} us in all")
    print(f"{'api us':>10} {'count':>6} {'us/call':>9}  api (time inside the host window)")
    for n, (c, t) in sorted(by_name(calls, w0, w1).items(), key=lambda x: -x[1][1]):
        print(f"{t / 1e3:10.1f} {c:6d} {t / c / 1e3:9.2f}  {n}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('trace')
    ap.add_argument('--window', type=int, default=40)
    ap.add_argument('--gap', type=float, default=200.0)
    ap.add_argument('--phases', type=int, default=3)
    ap.add_argument('--big-copy', type=int, default=1 << 20, help='copies of this many bytes or more are left out')
    ap.add_argument('--host', action='store_true', help='API calls beside the GPU activities (HEARTH_TRACE_API=1)')
    ap.add_argument('--host-all', action='store_true', help='with --host: one line per GPU activity')
    ap.add_argument('--gap-us', type=float, default=5.0, help='with --host: GPU idle gaps over this are annotated')
    ap.add_argument('--phase', type=int, action='append', help='with --host: this phase, not the largest (repeatable)')
    ap.add_argument('--last', type=int, default=0, help='also the mean over the last N phases (engine steps, say)')
    a = ap.parse_args()
    rows, apis = [], []
    with open(a.trace) as f:
        for r in csv.reader(f):
            if len(r) < 4: continue
            if r[2] == 'api':  # "cudaLaunchKernel_v7000": the version suffix is noise
                apis.append((int(r[0]), int(r[1]), re.sub(r'_v\d+$', '', ','.join(r[3:]))))
                continue
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
    def table(ph):
        agg, prev_end, inc = {}, ph[0][0], []
        for s, e, n in ph:
            add = max(0, e - prev_end)
            prev_end = max(prev_end, e)
            inc.append(add)
            c, d, ad = agg.get(n, (0, 0, 0))
            agg[n] = (c + 1, d + e - s, ad + add)
        return agg, prev_end - ph[0][0], inc

    def print_table(agg, span, per=1):
        print(f"{'adds us':>10} {'share':>6} {'count':>6} {'dur/call':>9} {'adds/call':>9}  kernel")
        for n, (c, d, ad) in sorted(agg.items(), key=lambda x: -x[1][2])[:16]:
            print(f"{ad / per / 1e3:10.1f} {100 * ad / span:5.1f}% {c / per:6.0f} {d / c / 1e3:9.2f} {ad / c / 1e3:9.2f}  {n}")

    if a.last:
        last = [ph for ph in phases if len(ph) >= 8][-a.last:]
        tot, span = {}, 0
        for ph in last:
            agg, sp, _ = table(ph)
            span += sp
            for n, (c, d, ad) in agg.items():
                t = tot.get(n, (0, 0, 0))
                tot[n] = (t[0] + c, t[1] + d, t[2] + ad)
        print(f"=== the last {len(last)} phases: {span / len(last) / 1e3:.1f} us a phase (means a phase)")
        print_table(tot, span, len(last))
    for i in sorted(sorted(range(len(phases)), key=lambda i: -len(phases[i]))[:a.phases]):
        ph = phases[i]
        agg, span, inc = table(ph)
        print(f"=== phase {i}: {span / 1e3:.1f} us")
        print_table(agg, span)
        m = len(ph) // 2
        print(f"--- window: start, end (us from the first), duration, adds")
        t0 = ph[max(0, m - a.window // 2)][0]
        for j in range(max(0, m - a.window // 2), min(len(ph), m + a.window // 2)):
            s, e, n = ph[j]
            print(f"{(s - t0) / 1e3:9.2f} {(e - t0) / 1e3:9.2f} {(e - s) / 1e3:8.2f} {inc[j] / 1e3:8.2f}  {n}")
    if a.host:
        if not apis:
            print(f"--host: {a.trace} has no api records (trace with HEARTH_TRACE_API=1)")
            return
        apis.sort()
        chosen = a.phase or sorted(sorted(range(len(phases)), key=lambda i: -len(phases[i]))[:a.phases])
        for i in chosen:
            if not 0 <= i < len(phases): ap.error(f"--phase {i}: the trace has phases 0..{len(phases) - 1}")
            host_view(i, phases[i], max(e for _, e, _ in phases[i - 1]) if i else 0, apis, a)


if __name__ == '__main__':
    main()
