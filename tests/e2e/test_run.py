"""`hearth run` and `hearth bench` through the real binary."""
import json
import pathlib
import re

import pytest

from conftest import DEFAULT_MODEL, ROOT, run_hearth

TINY = ROOT / "tests" / "fixtures" / "tiny"


def test_run_default_model_greedy_text():
    r = run_hearth("run", DEFAULT_MODEL, "The capital of France is", "-n", "12", "--temp", "0")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip()) > 0
    assert re.search(r"decode \d+ tokens, [\d.]+ tok/s", r.stderr)
    # greedy is deterministic
    r2 = run_hearth("run", DEFAULT_MODEL, "The capital of France is", "-n", "12", "--temp", "0")
    assert r2.stdout == r.stdout


def test_run_same_seed_same_text():
    args = ("run", DEFAULT_MODEL, "Once upon a time", "-n", "16", "--temp", "0.9", "--ignore-eos")
    a = run_hearth(*args, "--seed", "7")
    b = run_hearth(*args, "--seed", "7")
    c = run_hearth(*args, "--seed", "8")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    assert a.stdout != c.stdout


def test_run_prompt_ids_prints_ids():
    r = run_hearth("run", DEFAULT_MODEL, "--prompt-ids", "1,504,3458", "-n", "8", "--temp", "0", "--ids",
                   "--ignore-eos")
    assert r.returncode == 0, r.stderr
    ids = r.stdout.split()
    assert len(ids) == 8 and all(i.isdigit() for i in ids)


@pytest.mark.parametrize("name", ["llama3-f32", "qwen2-f32"])
def test_run_ids_on_model_without_tokenizer_matches_golden(name):
    d = TINY / name
    if not d.exists():
        pytest.fail(f"{d} missing: tools/oracle/make_tiny_models.py writes it")
    g = json.loads((d / "golden.json").read_text())["greedy"][0]
    r = run_hearth("run", d, "--prompt-ids", ",".join(map(str, g["prompt_ids"])), "-n",
                   str(len(g["output_ids"])), "--temp", "0", "--ids", "--ignore-eos")
    assert r.returncode == 0, r.stderr
    assert [int(x) for x in r.stdout.split()] == g["output_ids"]


PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                         "city": {"enum": ["Paris", "London", "Tokyo"]}},
          "required": ["name", "age", "city"], "additionalProperties": False}


def test_run_json_and_schema(tmp_path):
    schema = tmp_path / "person.json"
    schema.write_text(json.dumps(PERSON))
    for seed in (1, 2, 3):
        r = run_hearth("run", DEFAULT_MODEL, "A person described as JSON:", "--json-schema", schema, "-n", "200",
                       "--temp", "0.7", "--seed", seed)
        assert r.returncode == 0, r.stderr
        v = json.loads(r.stdout)  # the object closed within 200 tokens, and it is the schema's
        assert set(v) == {"name", "age", "city"} and isinstance(v["name"], str) and type(v["age"]) is int
        assert v["city"] in ("Paris", "London", "Tokyo")
    r = run_hearth("run", DEFAULT_MODEL, "Three fruits as JSON:", "--json", "-n", "200", "--temp", "0")
    assert r.returncode == 0 and isinstance(json.loads(r.stdout), dict), r.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}))
    r = run_hearth("run", DEFAULT_MODEL, "x", "--json-schema", bad, "-n", "4")
    assert r.returncode == 1 and "'pattern' is not supported" in r.stderr
    r = run_hearth("run", DEFAULT_MODEL, "x", "--json", "--ignore-eos", "-n", "4")
    assert r.returncode == 2 and "--ignore-eos" in r.stderr


def test_run_missing_model_is_reported():
    r = run_hearth("run", "/nonexistent/model.gguf", "hi")
    assert r.returncode == 1
    assert "/nonexistent/model.gguf" in r.stderr


def test_run_truncated_gguf_is_reported_not_crash(tmp_path):
    data = DEFAULT_MODEL.read_bytes()
    for cut in (3, 100, 5000, len(data) // 2):
        p = tmp_path / f"cut{cut}.gguf"
        p.write_bytes(data[:cut])
        r = run_hearth("run", p, "hi", "-n", "2")
        assert r.returncode == 1, (cut, r.returncode, r.stderr)
        assert str(p) in r.stderr


def test_run_usage_errors():
    assert run_hearth("run").returncode == 2
    r = run_hearth("run", DEFAULT_MODEL, "hi", "-n", "abc")
    assert r.returncode == 2 and "-n expects an integer" in r.stderr
    r = run_hearth("run", DEFAULT_MODEL, "--prompt-ids", "1,x")
    assert r.returncode == 2 and "--prompt-ids" in r.stderr
    r = run_hearth("run", DEFAULT_MODEL, "hi", "--temp", "-1")
    assert r.returncode == 1 and "temperature" in r.stderr


def test_bench_prints_rates():
    r = run_hearth("bench", DEFAULT_MODEL, "--prompt", "32", "--gen", "8")
    assert r.returncode == 0, r.stderr
    assert re.search(r"prefill 32: [\d.]+ tok/s \| decode 8: [\d.]+ tok/s", r.stdout)


def test_bench_parallel_streams_through_engine():
    r = run_hearth("bench", DEFAULT_MODEL, "--prompt", "16", "--gen", "4", "--parallel", "3")
    assert r.returncode == 0, r.stderr
    assert re.search(r"engine \| 3 streams x \(16 in, 4 out\) \| output [\d.]+ tok/s \| TTFT p50", r.stdout)
    assert re.search(r"\| 12 tokens$", r.stdout, re.M)
    # the engine thread's time besides its steps: the last turn is counted before its tokens go out
    m = re.search(r"([-\d.]+) planning, ([-\d.]+) handing out tokens, ([-\d.]+) in all", r.stdout)
    assert m and float(m.group(1)) >= 0 and float(m.group(3)) >= 0, r.stdout


def test_bench_more_requests_than_streams_serves_them_all():
    # 7 requests through 2 slots: the others wait for a slot, and every one gets its tokens
    r = run_hearth("bench", DEFAULT_MODEL, "--prompt", "16", "--gen", "3", "--parallel", "2", "--requests", "7")
    assert r.returncode == 0, r.stderr
    assert re.search(r"engine \| 7 requests, 2 streams x \(16 in, 3 out\) \| output [\d.]+ tok/s .*\| 21 tokens$",
                     r.stdout, re.M)
    # the TTFT's parts: 2 of the 4 clients' first requests wait for a slot; each part is a time, none negative
    m = re.search(r"TTFT's parts, p50 / p99: submission to admission ([\d.]+) / ([\d.]+) s, admission to the token "
                  r"chosen ([\d.]+) / ([\d.]+) s, chosen to the client ([\d.]+) / ([\d.]+) s", r.stdout)
    assert m, r.stdout
    wait50, wait99, adm50, adm99, out50, out99 = map(float, m.groups())
    assert wait99 > 0 and adm50 > 0 and wait50 <= wait99 and adm50 <= adm99 and out50 <= out99, r.stdout
    r = run_hearth("bench", DEFAULT_MODEL, "--parallel", "3", "--requests", "2")
    assert r.returncode == 2 and "--requests 2 is fewer than --parallel 3" in r.stderr
    r = run_hearth("bench", DEFAULT_MODEL, "--requests", "2")
    assert r.returncode == 2 and "--requests needs --parallel" in r.stderr


def test_run_gguf_without_vocabulary_takes_ids(tmp_path):
    # the tiny GGUF fixtures carry no vocabulary (no tokenizer.ggml.model key)
    m = ROOT / "tests" / "fixtures" / "tiny-gguf" / "llama3-q8_0.gguf"
    r = run_hearth("run", m, "--prompt-ids", "1,2,3", "-n", "4", "--temp", "0", "--ids", "--ignore-eos")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.split()) == 4
    r = run_hearth("run", m, "hello", "-n", "2")
    assert r.returncode == 1 and "has no tokenizer" in r.stderr
