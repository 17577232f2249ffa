"""A batch of prompts on /v1/completions (OpenAI's `prompt` as a list of
strings or of token-id arrays, which lm-evaluation-harness sends with a batch
size above 1), through the official OpenAI SDK: choice i * n + k is prompt i's
k-th; each is what that prompt alone gives (seed + k, as n's rule); usage
counts each prompt once and every choice's tokens; a stream carries each
choice under its index; echo returns each choice's own prompt."""
import json

import openai
import pytest

from test_batching import kv_idle
from test_server import Server

PROMPTS = ["The capital of France is", "Two plus two equals", "The color of the sky is"]


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 4)
    yield s
    assert s.stop() == 0, s.output()


def n_tokens(server, text):
    status, body, _ = server.post("/tokenize", {"prompt": text})
    return json.loads(body)["count"]


@pytest.mark.parametrize("n", [1, 2])
def test_batch_is_each_prompt_alone(server, n):
    c = server.client()
    kw = dict(model="default", max_tokens=10, temperature=0.9, seed=5, n=n)
    r = c.completions.create(prompt=PROMPTS, **kw)
    assert [ch.index for ch in r.choices] == list(range(len(PROMPTS) * n))
    completion = 0
    for i, p in enumerate(PROMPTS):
        alone = c.completions.create(prompt=p, **kw)
        completion += alone.usage.completion_tokens
        for k in range(n):
            got, want = r.choices[i * n + k], alone.choices[k]
            assert got.text == want.text and got.finish_reason == want.finish_reason, (i, k)
    assert r.usage.prompt_tokens == sum(n_tokens(server, p) for p in PROMPTS)
    assert r.usage.completion_tokens == completion
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert kv_idle(server.stats())


def test_batch_of_token_ids_and_echo(server):
    c = server.client()
    ids = [json.loads(server.post("/tokenize", {"prompt": p})[1])["tokens"] for p in PROMPTS]
    r = c.completions.create(model="default", prompt=ids, max_tokens=6, temperature=0, echo=True, logprobs=1)
    for i, p in enumerate(PROMPTS):
        text = c.completions.create(model="default", prompt=p, max_tokens=6, temperature=0).choices[0].text
        assert r.choices[i].text.endswith(text) and r.choices[i].text.startswith(p), r.choices[i].text
        assert r.choices[i].logprobs.token_logprobs[0] is None  # the prompt's first token: no logprob


def test_streamed_batch(server):
    c = server.client()
    kw = dict(model="default", prompt=PROMPTS, max_tokens=8, temperature=0, n=2)
    whole = c.completions.create(**kw)
    texts = {}
    usage = None
    for ch in c.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
        for choice in ch.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
        usage = ch.usage or usage
    assert [texts[i] for i in range(6)] == [ch.text for ch in whole.choices]
    assert usage.prompt_tokens == whole.usage.prompt_tokens
    assert usage.completion_tokens == whole.usage.completion_tokens


@pytest.mark.parametrize("prompt, n, words", [
    (["a", 5], 1, "prompt[1]"),
    (["a", []], 1, "the array is empty"),
    ([[1, 2], [3, -1]], 1, "prompt[1][1]"),
    (["p"] * 33, 2, "66 choices"),
])
def test_bad_batches_are_named(server, prompt, n, words):
    c = server.client()
    with pytest.raises(openai.BadRequestError) as e:
        c.completions.create(model="default", prompt=prompt, n=n, max_tokens=4)
    assert e.value.body["param"] == "prompt" and words in e.value.body["message"], e.value.body
