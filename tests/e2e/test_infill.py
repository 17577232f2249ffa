"""Fill in the middle (llama-server's POST /infill, what llama.vim and
llama.vscode send) against llama-server's own answers
(tools/oracle/make_infill_goldens.py): the same prompt laid out (FIM tokens,
other files, truncation of a long prefix, suffix and files, --spm-infill), the
same count of prompt tokens and, where llama-server's top-2 margin leaves no
near-tie, the same greedy text; and the requests it refuses."""
import json
import pathlib

import pytest

from test_server import Server

FIX = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "infill"
GOLDEN = json.loads((FIX / "golden.json").read_text())
MODEL = FIX / "starcoder2-fim.gguf"


@pytest.fixture(scope="module")
def servers():
    s = {False: Server("--ctx", 4096, "--parallel", 1, model=MODEL),
         True: Server("--ctx", 4096, "--parallel", 1, "--spm-infill", model=MODEL)}
    yield s
    for srv in s.values():
        assert srv.stop() == 0, srv.output()


def infill(server, body):
    st, text, _ = server.post("/infill", json.dumps(body).encode())
    return st, json.loads(text)


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=[c["name"] for c in GOLDEN["cases"]])
def test_infill_as_llama_server(servers, case):
    body = dict(case["request"], n_predict=case["n_predict"], temperature=0)
    fields = body.pop("response_fields", None)
    st, r = infill(servers[case["spm"]], body)
    assert st == 200, r
    assert r["prompt"] == case["prompt"]
    assert r["tokens_evaluated"] == case["tokens_evaluated"]
    if case["n_predict"] == 0:  # the prompt into the cache alone (llama-server makes one token and shows it)
        assert r["content"] == "" and r["tokens_predicted"] == 0
    elif case["compare_content"]:
        assert r["content"] == case["content"] and r["stop_type"] == case["stop_type"]
    if fields is not None:  # the same answer, cut to the fields asked for, under their paths
        st, cut = infill(servers[case["spm"]], dict(body, response_fields=fields))
        assert st == 200 and sorted(cut) == case["answer_keys"], cut
        same = ("content", "prompt", "stop_type", "tokens_evaluated", "truncated") if case["n_predict"] else ()
        for k in same:
            if k in case["answer"] and (k != "content" or case["compare_content"]):
                assert cut[k] == case["answer"][k], k
        assert all(isinstance(cut[k], int) for k in cut if k.startswith("timings/"))


def test_infill_streams(servers):
    case = GOLDEN["cases"][0]
    body = dict(case["request"], n_predict=case["n_predict"], temperature=0, stream=True)
    st, text, _ = servers[False].post("/infill", json.dumps(body).encode())
    assert st == 200
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert events and events[-1]["stop"] is True
    assert events[-1]["tokens_evaluated"] == case["tokens_evaluated"] and events[-1]["prompt"] == case["prompt"]
    full = infill(servers[False], dict(body, stream=False))[1]["content"]
    assert "".join(e["content"] for e in events) == full


def test_openai_suffix_is_an_infill(servers):
    """OpenAI's insert mode (/v1/completions with suffix, as Ollama serves it) through the official SDK: the
    prompt is the text before the insertion, the same prompt llama-server lays out for /infill."""
    case = next(c for c in GOLDEN["cases"] if c["name"] == "prefix_suffix")
    r = servers[False].client().completions.create(model="m", prompt=case["request"]["input_prefix"],
                                                   suffix=case["request"]["input_suffix"],
                                                   max_tokens=case["n_predict"], temperature=0)
    assert r.usage.prompt_tokens == case["tokens_evaluated"]
    assert r.choices[0].text == case["content"]
    for bad in ({"prompt": ["a", "b"], "suffix": "x"}, {"prompt": [1, 2], "suffix": "x"},
                {"prompt": "a", "suffix": "x", "echo": True}, {"prompt": "a", "suffix": 3}):
        st, text, _ = servers[False].post("/v1/completions", json.dumps(dict(bad, max_tokens=2)).encode())
        assert st == 400 and json.loads(text)["error"]["param"] == "suffix", (bad, text)


@pytest.fixture(scope="module")
def smol():
    s = Server("--parallel", 1)
    yield s
    assert s.stop() == 0, s.output()


@pytest.mark.parametrize("case", GOLDEN["line_cases"], ids=[c["name"] for c in GOLDEN["line_cases"]])
def test_n_indent_as_llama_server(smol, case):
    """llama-server's n_indent on the default model, greedy: the text ends before the first line (after the
    first newline) indented less, an empty line counting as none."""
    st, text, _ = smol.post("/completion", json.dumps(dict(case["request"], temperature=0)).encode())
    r = json.loads(text)
    assert st == 200, r
    assert r["content"] == case["content"] and r["stop_type"] == case["stop_type"]


def test_t_max_predict_ms_ends_at_a_newline(smol):
    body = {"prompt": "List ten fruits, one a line:\n1.", "n_predict": 200, "temperature": 0, "ignore_eos": True}
    full = json.loads(smol.post("/completion", json.dumps(body).encode())[1])
    cut = json.loads(smol.post("/completion", json.dumps(dict(body, t_max_predict_ms=1)).encode())[1])
    assert "\n" in full["content"] and full["tokens_predicted"] == 200
    assert cut["stop_type"] == "limit" and "\n" in cut["content"]  # at the token that brought the first newline
    assert full["content"].startswith(cut["content"]) and cut["tokens_predicted"] < 200


@pytest.mark.parametrize("body, param", [
    ({"input_suffix": "x"}, "input_prefix"),
    ({"input_prefix": "x"}, "input_suffix"),
    ({"input_prefix": 1, "input_suffix": "x"}, "input_prefix"),
    ({"input_prefix": "x", "input_suffix": "y", "prompt": [1, 2]}, "prompt"),
    ({"input_prefix": "x", "input_suffix": "y", "input_extra": {"text": "z"}}, "input_extra"),
    ({"input_prefix": "x", "input_suffix": "y", "input_extra": [{"filename": "a"}]}, "input_extra"),
    ({"input_prefix": "x", "input_suffix": "y", "input_extra": [{"text": "z", "filename": 3}]}, "input_extra"),
    ({"input_prefix": "x", "input_suffix": "y", "suffix": "z"}, "suffix"),
    ({"input_prefix": "x", "input_suffix": "y", "samplers": ["temperature", "top_k"]}, "samplers"),
    ({"input_prefix": "x", "input_suffix": "y", "samplers": ["top_k", "adaptive_p"]}, "samplers"),
    ({"input_prefix": "x", "input_suffix": "y", "samplers": "kz"}, "samplers"),
    ({"input_prefix": "x", "input_suffix": "y", "samplers": 3}, "samplers"),
    ({"input_prefix": "x", "input_suffix": "y", "response_fields": "content"}, "response_fields"),
    ({"input_prefix": "x", "input_suffix": "y", "n_indent": -1}, "n_indent"),
])
def test_bad_infill_requests(servers, body, param):
    st, r = infill(servers[False], body)
    assert st == 400 and r["error"]["param"] == param, r


def test_a_model_without_fim_tokens_is_refused():
    s = Server()  # SmolLM2's vocabulary has no <fim_prefix>
    try:
        st, r = infill(s, {"input_prefix": "def f():", "input_suffix": "\n"})
        assert st == 400 and "prefix" in r["error"]["message"], r
        st, text, _ = s.post("/v1/completions", json.dumps({"prompt": "def f():", "suffix": "\n"}).encode())
        assert st == 400 and "fill in the middle" in json.loads(text)["error"]["message"], text
    finally:
        assert s.stop() == 0, s.output()
