"""Grammar-constrained decoding (GBNF), hearth against llama-server, on the CPU.

Both servers (`hearth serve MODEL --parallel 1`; llama-server from
tools/bench/build_llamacpp_cpu.sh, `-np 1 --no-repack`) get the same streamed
/v1/completions requests, greedy, without a grammar (ignore_eos, so that
both write the whole budget) and with each grammar below in the `grammar`
field, which both take. Decode tok/s = (tokens - 1) / (last token's arrival -
first's), so prefill is left out; the cost of a grammar is its rate against
the same engine's unconstrained rate. Prints one line a run and a table of
medians, and whether the two engines wrote the same text (greedy: they
should under a grammar unless a near-tie of their logits parts them).

usage: .venv/bin/python tools/bench/grammar_peer.py --llama-server BIN [--gen 128] [--reps 3] [--threads 2]
       python3 tools/bench/grammar_peer.py --only hearth --bin /tmp/b/hearth   (the GPU machine: device_run.sh grammar)
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spec_peer import ROOT, Server  # noqa: E402

GRAMMARS = {
    "none": None,
    "lines": 'root ::= line+\nline ::= [A-Za-z] [a-zA-Z ,.\']{0,78} "\\n"\n',
    "json": r'''root   ::= object
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ":" ws value
value  ::= object | array | string | number | "true" | "false" | "null"
array  ::= "[" ws ( value ( "," ws value )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )?
ws     ::= [ \n]{0,4}
''',
}
PROMPT = "Write a detailed description of a small town, its people and its history, as requested.\n\n"


def run(server, grammar, gen):
    """A grammar in the `grammar` field, or none (then ignore_eos, so that both engines write the budget)."""
    text, _, t = server.run(PROMPT, gen, {"grammar": grammar} if grammar else {"ignore_eos": True})
    return text, t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=str(ROOT / "hearth"))
    ap.add_argument("--llama-server", help="llama-server binary (tools/bench/build_llamacpp_cpu.sh)")
    ap.add_argument("--only", choices=["hearth"], help="no peer (the GPU machine has none)")
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    if not a.llama_server and not a.only:
        ap.error("--llama-server BIN, or --only hearth")
    cmds = {
        "hearth": [a.bin, "serve", a.model, "--threads", str(a.threads), "--parallel", "1"],
        "llama-server": [a.llama_server, "-m", a.model, "-t", str(a.threads), "-tb", str(a.threads), "-c", "2048",
                         "-np", "1", "--no-warmup", "--no-repack"],
    }
    if a.only:
        del cmds["llama-server"]
    rates, texts = {}, {}
    for rep in range(a.reps):
        for engine, cmd in cmds.items():
            s = Server(cmd)
            try:
                run(s, None, 8)  # warm
                for name, g in GRAMMARS.items():
                    text, t = run(s, g, a.gen)
                    rate = (len(t) - 1) / (t[-1] - t[0]) if len(t) > 2 else float("nan")
                    rates.setdefault((engine, name), []).append(rate)
                    texts[(engine, name)] = text
                    print(f"rep {rep} {engine:12s} {name:5s} {len(t):4d} pieces {rate:7.1f} tok/s  "
                          f"{text[:60]!r}", flush=True)
            finally:
                s.close()
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"\ndecode tok/s, median of {a.reps} (threads {a.threads}, {a.gen} tokens at most, greedy)")
    if a.only:
        for name in GRAMMARS:
            h = med[("hearth", name)]
            print(f"| {name} | {h:.1f} tok/s | {h / med[('hearth', 'none')]:.2f} of unconstrained |")
        return
    print("| grammar | hearth | of unconstrained | llama-server | of unconstrained | hearth / llama-server |")
    print("|---|---|---|---|---|---|")
    for name in GRAMMARS:
        h, l = med[("hearth", name)], med[("llama-server", name)]
        print(f"| {name} | {h:.1f} | {h / med[('hearth', 'none')]:.2f} | {l:.1f} | "
              f"{l / med[('llama-server', 'none')]:.2f} | {h / l:.2f}x |")
    for name in GRAMMARS:
        same = texts[("hearth", name)] == texts[("llama-server", name)]
        print(f"{name}: hearth's text {'equals' if same else 'differs from'} llama-server's")


if __name__ == "__main__":
    main()
