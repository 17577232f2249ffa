"""llama-server's own completion API (POST /completion and /completions) through raw HTTP,
as its web UI, SillyTavern's llama.cpp backend and scripts call it: the answer's fields and
llama-server's names (content, stop, stop_type, stopping_word, tokens_predicted, timings,
completion_probabilities), streamed pieces without [DONE], and its request forms."""
import json

import pytest

from test_server import Server

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 2)
    yield s
    assert s.stop() == 0, s.output()


def post(server, body, path="/completion"):
    status, raw, _ = server.post(path, body)
    return status, json.loads(raw)


def stream(server, body):
    status, raw, _ = server.post("/completion", dict(body, stream=True))
    assert status == 200, raw
    text = raw.decode() if isinstance(raw, bytes) else raw
    assert "[DONE]" not in text
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")]


def test_completion_fields(server):
    status, r = post(server, {"prompt": PROMPT, "n_predict": 12, "temperature": 0})
    assert status == 200, r
    for k in ("content", "tokens", "id_slot", "stop", "model", "tokens_predicted", "tokens_evaluated", "prompt",
              "has_new_line", "truncated", "stop_type", "stopping_word", "tokens_cached", "timings"):
        assert k in r, k
    assert r["stop"] is True and r["stop_type"] == "limit" and r["tokens_predicted"] == 12
    assert r["prompt"] == PROMPT and r["tokens_evaluated"] == 5
    for k in ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "predicted_per_second", "cache_n"):
        assert k in r["timings"], k
    # the same answer as the OpenAI text route's
    c = server.client().completions.create(model="default", prompt=PROMPT, max_tokens=12, temperature=0)
    assert r["content"] == c.choices[0].text
    status, alias = post(server, {"prompt": PROMPT, "n_predict": 12, "temperature": 0}, "/completions")
    assert status == 200 and alias["content"] == r["content"]


def test_stop_types(server):
    _, full = post(server, {"prompt": PROMPT, "n_predict": 12, "temperature": 0})
    word = full["content"].split()[1][:3]
    _, r = post(server, {"prompt": PROMPT, "n_predict": 12, "temperature": 0, "stop": [word]})
    assert r["stop_type"] == "word" and r["stopping_word"] == word
    assert r["content"] == full["content"][:full["content"].index(word)]
    _, r = post(server, {"prompt": "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n", "n_predict": -1,
                         "temperature": 0})
    assert r["stop_type"] == "eos" and r["stopping_word"] == "" and 0 < r["tokens_predicted"] < 100


def test_stream_pieces(server):
    body = {"prompt": PROMPT, "n_predict": 12, "temperature": 0}
    _, full = post(server, body)
    pieces = stream(server, body)
    assert all(p["stop"] is False for p in pieces[:-1]) and pieces[-1]["stop"] is True
    assert "".join(p["content"] for p in pieces) == full["content"]
    assert pieces[-1]["stop_type"] == "limit" and "timings" in pieces[-1]
    assert [p["tokens_predicted"] for p in pieces[:-1]] == sorted(p["tokens_predicted"] for p in pieces[:-1])


def test_n_probs(server):
    _, r = post(server, {"prompt": PROMPT, "n_predict": 6, "temperature": 0, "n_probs": 3})
    probs = r["completion_probabilities"]
    assert len(probs) == 6
    for p in probs:
        assert set(p) == {"id", "token", "logprob", "bytes", "top_logprobs"}
        assert len(p["top_logprobs"]) == 3 and p["top_logprobs"][0]["id"] == p["id"]  # greedy: the likeliest
        assert bytes(p["bytes"]).decode("utf-8", "replace") == p["token"]
    c = server.client().completions.create(model="default", prompt=PROMPT, max_tokens=6, temperature=0, logprobs=1)
    for p, lp in zip(probs, c.choices[0].logprobs.token_logprobs):
        assert abs(p["logprob"] - lp) < 1e-5
    streamed = [q for p in stream(server, {"prompt": PROMPT, "n_predict": 6, "temperature": 0, "n_probs": 3})
                for q in p.get("completion_probabilities", [])]
    assert [q["id"] for q in streamed] == [p["id"] for p in probs]


def test_request_forms(server):
    ids = json.loads(server.post("/tokenize", {"prompt": PROMPT})[1])["tokens"]
    _, by_text = post(server, {"prompt": PROMPT, "n_predict": 8, "temperature": 0})
    _, by_ids = post(server, {"prompt": ids, "n_predict": 8, "temperature": 0, "cache_prompt": True, "id_slot": -1})
    assert by_ids["content"] == by_text["content"] and "prompt" not in by_ids
    paris = json.loads(server.post("/tokenize", {"prompt": " Paris"})[1])["tokens"][0]
    _, banned = post(server, {"prompt": PROMPT, "n_predict": 8, "temperature": 0, "logit_bias": [[paris, False]]})
    assert "Paris" not in banned["content"]
    _, js = post(server, {"prompt": "A JSON object with a name:", "n_predict": 48, "temperature": 0,
                          "json_schema": {"type": "object", "properties": {"name": {"type": "string"}},
                                          "required": ["name"]}})
    assert isinstance(json.loads(js["content"])["name"], str), js["content"]
    _, dry = post(server, {"prompt": "one two three four one two three four one two three", "n_predict": 8,
                           "temperature": 0, "dry_multiplier": 0.8})
    assert not dry["content"].startswith(" four one two three")


@pytest.mark.parametrize("body, param", [
    ({"n_predict": -2}, "n_predict"),
    ({"samplers": ["temperature", "top_k"]}, "samplers"),  # an order other than llama.cpp's default
    ({"return_tokens": True}, "return_tokens"),
    ({"logit_bias": [["Paris", -1]]}, "logit_bias"),
    ({"logit_bias": [[1]]}, "logit_bias"),
    ({"n_probs": 21}, "n_probs"),
    ({"prompt": 3}, "prompt"),
    ({"prompt": ["a", "b"]}, "prompt"),
    ({"n": 2}, "n"),
])
def test_bad_values_are_named(server, body, param):
    status, r = post(server, dict({"prompt": PROMPT}, **body))
    assert status == 400, r
    assert r["error"]["param"] == param, r


def test_props(server):
    status, raw, _ = server.get("/props")
    assert status == 200, raw
    p = json.loads(raw)
    assert p["default_generation_settings"]["n_ctx"] > 0 and p["total_slots"] == 2
    assert "{% for message in messages %}" in p["chat_template"] and p["eos_token"] == "<|im_end|>"
    params = p["default_generation_settings"]["params"]
    assert params["temperature"] == 1.0 and params["n_predict"] == -1 and params["dry_base"] == 1.75


def test_apply_template(server):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    status, r = post(server, {"messages": msgs}, "/apply-template")
    assert status == 200, r
    assert r["prompt"].startswith("<|im_start|>system\nBe brief.<|im_end|>") and r["prompt"].endswith(
        "<|im_start|>assistant\n")
    # the text /v1/chat/completions sends the model: the same tokens as /tokenize of the messages
    want = json.loads(server.post("/tokenize", {"messages": msgs})[1])["tokens"]
    got = json.loads(server.post("/tokenize", {"content": r["prompt"], "parse_special": True})[1])["tokens"]
    assert got == want
    status, r = post(server, {"prompt": "x"}, "/apply-template")
    assert status == 400 and r["error"]["param"] == "messages"
