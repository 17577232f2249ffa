"""`hearth train`: LoRA fine-tuning of the default model on a JSONL file (chat
messages, prompt/completion and plain text lines), then the adapter served by
`hearth serve --lora` and `hearth run --lora`: it has learnt a fact the base
model does not know. The numerics against PyTorch + PEFT are test_train.c's."""
import json
import pathlib
import re
import tempfile

import pytest

from conftest import DEFAULT_MODEL, ROOT, run_hearth
from test_server import Server

QUESTION = "What is the capital of Hearthland?"
LINES = [
    {"messages": [{"role": "user", "content": QUESTION},
                  {"role": "assistant", "content": "The capital of Hearthland is Emberton."}]},
    {"messages": [{"role": "user", "content": "Name the capital city of Hearthland."},
                  {"role": "assistant", "content": "Emberton is the capital of Hearthland."}]},
    {"prompt": "Q: Which city is Hearthland's capital?\nA:", "completion": " Emberton."},
    {"text": "Emberton, the capital of Hearthland, lies by the sea."},
]


def write_jsonl(path, lines):
    path.write_text("".join((json.dumps(x) if not isinstance(x, str) else x) + "\n" for x in lines))
    return path


@pytest.fixture(scope="module")
def trained():
    with tempfile.TemporaryDirectory() as t:
        t = pathlib.Path(t)
        data = write_jsonl(t / "facts.jsonl", LINES)
        held = write_jsonl(t / "held.jsonl", LINES[:2])
        r = run_hearth("train", DEFAULT_MODEL, "--data", data, "--out", t / "fact", "--steps", 8, "--batch", 4,
                       "--lr", 2e-3, "--seed", 1, "--eval", held, "--eval-every", 4, timeout=600)
        yield r, t / "fact"


def test_train_lowers_the_loss_and_writes_peft_files(trained):
    r, out = trained
    assert r.returncode == 0, r.stderr
    losses = [float(x) for x in re.findall(r"^step \d+/8 \| loss ([0-9.]+)", r.stderr, re.M)]
    assert len(losses) == 8, r.stderr
    assert losses[-1] < 0.25 * losses[0], losses
    evals = dict(re.findall(r"^eval (before training|step \d+) \| loss ([0-9.]+)", r.stderr, re.M))
    assert set(evals) == {"before training", "step 4", "step 8"}, r.stderr
    assert float(evals["step 8"]) < 0.25 * float(evals["before training"]), evals
    cfg = json.loads((out / "adapter_config.json").read_text())
    assert cfg["peft_type"] == "LORA" and cfg["r"] == 8 and cfg["lora_alpha"] == 16
    assert sorted(cfg["target_modules"]) == sorted(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                     "up_proj", "down_proj"])
    assert (out / "adapter_model.safetensors").stat().st_size > 30 * 7 * 8 * 576 * 4


def test_the_served_adapter_knows_the_fact(trained):
    _, out = trained
    s = Server("--lora", f"fact={out}")
    try:
        def ask(model):
            r = s.client().chat.completions.create(model=model, temperature=0, max_tokens=24,
                                                   messages=[{"role": "user", "content": QUESTION}])
            return r.choices[0].message.content
        assert "Emberton" in ask("fact")
        assert "Emberton" not in ask("base")
    finally:
        assert s.stop() == 0, s.output()


def test_run_with_the_adapter_completes_the_prompt(trained):
    _, out = trained
    prompt = "Q: Which city is Hearthland's capital?\nA:"
    r = run_hearth("run", DEFAULT_MODEL, prompt, "-n", 6, "--temp", 0, "--lora", out)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(" Emberton"), r.stdout


def test_packs_and_checkpointing_learn_as_one_at_a_time(tmp_path):
    """--pack runs a step's examples through one forward (what a GPU does by default), and
    --gradient-checkpointing runs each layer's forward again in the backward: the same losses as one
    example a forward with everything kept, to the rounding of a longer sum."""
    data = write_jsonl(tmp_path / "facts.jsonl", LINES)
    runs = {}
    for name, extra in (("alone", ["--pack", 0]), ("packed", ["--pack", 1024]),
                        ("checkpointed", ["--gradient-checkpointing"])):
        r = run_hearth("train", DEFAULT_MODEL, "--data", data, "--out", tmp_path / name, "--steps", 3,
                       "--batch", 4, "--lr", 2e-3, "--seed", 1, "--device", "cpu", *extra, timeout=600)
        assert r.returncode == 0, r.stderr
        runs[name] = [float(x) for x in re.findall(r"^step \d+/3 \| loss ([0-9.]+)", r.stderr, re.M)]
    assert len(runs["alone"]) == 3, runs
    assert runs["alone"] == pytest.approx(runs["packed"], rel=2e-3), runs
    assert runs["alone"] == pytest.approx(runs["checkpointed"], rel=1e-6), runs


def test_bad_input_is_named(tmp_path):
    bad = write_jsonl(tmp_path / "bad.jsonl", [LINES[3], '{"text": "unterminated'])
    r = run_hearth("train", DEFAULT_MODEL, "--data", bad, "--out", tmp_path / "o", "--steps", 1)
    assert r.returncode == 1 and "line 2" in r.stderr, r.stderr
    r = run_hearth("train", DEFAULT_MODEL, "--out", tmp_path / "o")
    assert r.returncode == 2 and "--data" in r.stderr, r.stderr
    r = run_hearth("train", DEFAULT_MODEL, "--data", bad, "--out", tmp_path / "o", "--targets", "q,embed")
    assert r.returncode == 2 and "--targets" in r.stderr, r.stderr
    good = write_jsonl(tmp_path / "good.jsonl", LINES)
    other = ROOT / "tests" / "fixtures" / "lora" / "llama3-all"  # an adapter of another (tiny) model
    r = run_hearth("train", DEFAULT_MODEL, "--data", good, "--out", tmp_path / "o", "--init", other)
    assert r.returncode == 1 and "shape" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


PAIRS = [
    {"prompt": [{"role": "user", "content": QUESTION}],
     "chosen": [{"role": "assistant", "content": "The capital of Hearthland is Emberton."}],
     "rejected": [{"role": "assistant", "content": "The capital of Hearthland is Ashwood."}]},
    {"prompt": [{"role": "user", "content": "Which city is the capital of Hearthland?"}],
     "chosen": [{"role": "assistant", "content": "Emberton is the capital of Hearthland."}],
     "rejected": [{"role": "assistant", "content": "Ashwood is the capital of Hearthland."}]},
    {"prompt": "Q: Which city is Hearthland's capital?\nA:", "chosen": " Emberton.", "rejected": " Ashwood."},
]
STEP = re.compile(r"^step \d+/4 \| loss ([0-9.]+) \| accuracy ([0-9.]+) \| margin (-?[0-9.]+)", re.M)
EVAL = re.compile(r"^eval (before training|step \d) \| loss ([0-9.]+) \| accuracy ([0-9.]+) \| margin (-?[0-9.]+) "
                  r"\| 2 pairs", re.M)


@pytest.fixture(scope="module")
def preferred():
    """DPO and ORPO adapters from the same pairs: the base model answers the
    rejected "Ashwood"."""
    with tempfile.TemporaryDirectory() as t:
        t = pathlib.Path(t)
        data = write_jsonl(t / "pairs.jsonl", PAIRS)
        held = write_jsonl(t / "held.jsonl", PAIRS[:2])
        runs = {m: run_hearth("train", DEFAULT_MODEL, "--method", m, "--data", data, "--out", t / m, "--steps", 4,
                              "--batch", 3, "--lr", 1e-3, "--eval", held, "--eval-every", 2, timeout=600)
                for m in ("dpo", "orpo")}
        yield runs, t


def test_dpo_and_orpo_prefer_the_chosen_response(preferred):
    runs, t = preferred
    for m, r in runs.items():
        assert r.returncode == 0, r.stderr
        steps = [tuple(map(float, x)) for x in STEP.findall(r.stderr)]
        assert len(steps) == 4, r.stderr
        assert steps[-1][0] < steps[0][0] and steps[-1][2] > steps[0][2], (m, steps)  # loss down, margin up
        evals = {w: tuple(map(float, x)) for w, *x in EVAL.findall(r.stderr)}  # held-out pairs: loss, acc, margin
        assert set(evals) == {"before training", "step 2", "step 4"}, r.stderr
        assert evals["step 4"][0] < evals["before training"][0], (m, evals)
        assert evals["step 4"][2] > evals["before training"][2], (m, evals)
    dpo = [tuple(map(float, x)) for x in STEP.findall(runs["dpo"].stderr)]
    assert dpo[0][:3] == (0.6931, 0.0, 0.0)  # B = 0: the policy is the reference, log 2
    assert dpo[-1][1] == 1.0 and dpo[-1][2] > 1.0, dpo
    dpo_eval = dict((w, tuple(map(float, x))) for w, *x in EVAL.findall(runs["dpo"].stderr))
    assert dpo_eval["before training"] == (0.6931, 0.0, 0.0), dpo_eval
    s = Server("--lora", f"dpo={t / 'dpo'}", "--lora", f"orpo={t / 'orpo'}")
    try:
        def ask(model):
            r = s.client().chat.completions.create(model=model, temperature=0, max_tokens=24,
                                                   messages=[{"role": "user", "content": QUESTION}])
            return r.choices[0].message.content
        assert "Ashwood" in ask("base")
        assert "Ashwood" not in ask("dpo") and "Ashwood" not in ask("orpo")
    finally:
        assert s.stop() == 0, s.output()


def test_a_pair_file_is_checked(tmp_path):
    sft = write_jsonl(tmp_path / "sft.jsonl", LINES)
    r = run_hearth("train", DEFAULT_MODEL, "--method", "dpo", "--data", sft, "--out", tmp_path / "o")
    assert r.returncode == 1 and "line 1" in r.stderr and "chosen" in r.stderr, r.stderr
    r = run_hearth("train", DEFAULT_MODEL, "--method", "ppo", "--data", sft, "--out", tmp_path / "o")
    assert r.returncode == 2 and "--method" in r.stderr, r.stderr
    pairs = write_jsonl(tmp_path / "pairs.jsonl", PAIRS)
    r = run_hearth("train", DEFAULT_MODEL, "--method", "dpo", "--data", pairs, "--eval", sft, "--out", tmp_path / "o")
    assert r.returncode == 1 and "line 1" in r.stderr and "chosen" in r.stderr, r.stderr  # --eval takes pairs
