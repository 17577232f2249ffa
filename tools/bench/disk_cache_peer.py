"""A long prompt's time to first token after a restart: hearth's disk tier of the prefix cache against
llama-server's slot files, on the CPU.

hearth: `hearth serve MODEL --parallel 1 --cache-dir DIR`: the prompt cold, again (from memory), then the
server is stopped (SIGTERM: the cache is flushed to DIR) and started again, and the prompt sent a third time
(from disk). llama-server (--llama-server BIN, tools/bench/build_llamacpp_cpu.sh): `-np 1 --slot-save-path
DIR`: the prompt cold, again (its slot's cache), `POST /slots/0?action=save`, a restart, `POST
/slots/0?action=restore`, then the prompt. Both greedy, 8 tokens, streamed; TTFT is the first token's arrival
from the request's start; llama-server's restore time is printed beside it (a client must make that call
first; hearth needs none). The server's start-up is not counted for either.

usage: .venv/bin/python tools/bench/disk_cache_peer.py --llama-server BIN [--reps 2] [--threads 2] [--lines 280]
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spec_peer import ROOT, Server  # noqa: E402


def ttft(server, prompt):
    t0 = time.perf_counter()
    text, n, t = server.run(prompt, 8)
    return t[0] - t0, text


def post(server, path, body):
    rq = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(rq, timeout=600) as r:
        r.read()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=str(ROOT / "hearth"))
    ap.add_argument("--llama-server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--lines", type=int, default=280, help="prompt lines of ~14 tokens")
    a = ap.parse_args()
    prompt = " ".join(f"The quick brown fox jumps over the lazy dog number {i}." for i in range(a.lines))
    rows = {}
    for rep in range(a.reps):
        for engine in ["hearth"] + (["llama-server"] if a.llama_server else []):
            d = tempfile.mkdtemp(prefix="kvpeer-")
            try:
                if engine == "hearth":
                    args = [a.bin, "serve", a.model, "--threads", str(a.threads), "--parallel", "1", "--cache-dir", d]
                else:
                    args = [a.llama_server, "-m", a.model, "-t", str(a.threads), "-tb", str(a.threads), "-c", "4608",
                            "-np", "1", "--no-warmup", "--no-repack", "--slot-save-path", d]
                s = Server(args)
                cold, text = ttft(s, prompt)
                warm, text2 = ttft(s, prompt)
                save = post(s, "/slots/0?action=save", {"filename": "p.bin"}) if engine != "hearth" else 0.0
                s.close()
                s = Server(args)
                restore = post(s, "/slots/0?action=restore", {"filename": "p.bin"}) if engine != "hearth" else 0.0
                disk, text3 = ttft(s, prompt)
                s.close()
                same = text == text2 == text3
                print(f"{engine:12s} rep {rep}: cold {cold:.3f} s, again {warm:.3f} s, after restart {disk:.3f} s"
                      f" (restore call {restore:.3f} s, save call {save:.3f} s), same text {same}", flush=True)
                rows.setdefault(engine, []).append((cold, warm, disk, restore))
            finally:
                shutil.rmtree(d, ignore_errors=True)
    print("\nmedians, s:")
    print(f"{'engine':12s} {'cold':>8s} {'again':>8s} {'restart':>8s} {'restore':>8s} {'restart/cold':>13s}")
    for engine, r in rows.items():
        c, w, d, rs = (statistics.median(x[i] for x in r) for i in range(4))
        print(f"{engine:12s} {c:8.3f} {w:8.3f} {d:8.3f} {rs:8.3f} {(d + rs) / c:12.1%}")


if __name__ == "__main__":
    main()
