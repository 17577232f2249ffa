"""`hearth tokenize`: the default model's tokenizer through the real binary."""
import json
import pathlib

from conftest import DEFAULT_MODEL, ROOT, run_hearth

GOLDEN = json.loads((ROOT / "tests/fixtures/tok/smollm2.json").read_text(encoding="utf-8"))


def test_tokenize_ids_match_hf_golden():
    for case in GOLDEN["cases"]:
        if not case["text"] or "\0" in case["text"]:
            continue
        r = run_hearth("tokenize", DEFAULT_MODEL, case["text"], "--ids")
        assert r.returncode == 0, r.stderr
        assert [int(x) for x in r.stdout.split()] == case["ids"], case["text"]


def test_tokenize_lists_tokens_and_decodes(tmp_path):
    r = run_hearth("tokenize", DEFAULT_MODEL, "<|im_start|>user\nHello world", "--decode")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "1\t'<|im_start|>'"
    assert "905\t'\u0120world'" in lines
    assert lines[-1] == "Hello world"
    assert lines[-2] == "<|im_start|>user"
    plain = run_hearth("tokenize", DEFAULT_MODEL, "<|im_start|>", "--ids", "--no-parse-special")
    assert plain.returncode == 0 and "1" not in plain.stdout.split()


def test_tokenize_stdin_and_errors(tmp_path):
    r = run_hearth("tokenize", DEFAULT_MODEL, "-", "--ids", input="Hello world")
    assert r.returncode == 0 and r.stdout.split() == ["19556", "905"]
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}')
    r = run_hearth("tokenize", bad, "abc")
    assert r.returncode == 1
    assert "model.merges[0]: token 'b' is not in the vocabulary" in r.stderr
    r = run_hearth("tokenize", DEFAULT_MODEL)
    assert r.returncode == 2 and "expected MODEL and TEXT" in r.stderr
    r = run_hearth("tokenize", pathlib.Path("/nonexistent/model.gguf"), "x")
    assert r.returncode == 1 and "/nonexistent/model.gguf" in r.stderr
