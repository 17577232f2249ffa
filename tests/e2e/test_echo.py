"""/v1/completions with echo through the official OpenAI SDK: the prompt comes
back before the answer, in the text and, with logprobs, as records whose first
is null (what lm-evaluation-harness reads to score a continuation). A prompt
token's logprob is what decoding reports for the same token (bit for bit on the
CPU), and agrees with llama.cpp's logits (tests/fixtures/smollm2/golden.json,
tools/oracle/make_smollm2_golden.py) to the parity test's near-tie bound."""
import json
import pathlib

import openai
import pytest

from conftest import ROOT
from test_server import Server

GOLDEN = json.loads(pathlib.Path(ROOT / "tests" / "fixtures" / "smollm2" / "golden.json").read_text())
NEAR_TIE = 1.0  # test_parity.c's SMOLLM2_NEAR_TIE: how far quantized rounding moves a logit between engines


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 2)
    yield s
    assert s.stop() == 0, s.output()


def complete(server, **kw):
    return server.client().completions.create(model="default", temperature=0, **kw)


def tokenize(server, text):
    status, body, _ = server.post("/tokenize", {"prompt": text})
    assert status == 200, body
    return json.loads(body)["tokens"]


def test_prompt_logprobs_agree_with_llamacpp(server):
    checked = 0
    for p in GOLDEN["prompts"]:
        ids = p["prompt_ids"]
        r = complete(server, prompt=ids, max_tokens=0, echo=True, logprobs=5)
        lp = r.choices[0].logprobs
        assert r.usage.completion_tokens == 0 and r.choices[0].finish_reason == "length"
        assert len(lp.token_logprobs) == len(ids) and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
        assert "".join(lp.tokens) == r.choices[0].text
        for i in range(1, len(ids)):
            top10 = dict((t, x) for t, x in p["top10"][i - 1])
            if ids[i] not in top10:
                continue
            want = top10[ids[i]] - p["top10"][i - 1][0][1]  # the token's logit below llama.cpp's top-1
            got = lp.token_logprobs[i] - max(lp.top_logprobs[i].values())
            assert abs(got - want) <= NEAR_TIE, (p["name"], i, got, want)
            assert lp.token_logprobs[i] <= 0
            checked += 1
    assert checked > 20


def test_echo_then_answer(server):
    prompt = "The capital of France is"
    plain = complete(server, prompt=prompt, max_tokens=8, logprobs=3)
    echo = complete(server, prompt=prompt, max_tokens=8, logprobs=3, echo=True)
    n = len(tokenize(server, prompt))
    assert echo.choices[0].text == prompt + plain.choices[0].text
    lp, plp = echo.choices[0].logprobs, plain.choices[0].logprobs
    assert lp.tokens[n:] == plp.tokens and lp.token_logprobs[n:] == plp.token_logprobs
    assert lp.top_logprobs[n:] == plp.top_logprobs
    assert lp.text_offset[n:] == [o + len(prompt) for o in plp.text_offset]
    assert echo.usage.prompt_tokens == n and echo.usage.completion_tokens == plain.usage.completion_tokens
    assert complete(server, prompt=prompt, max_tokens=2, echo=True).choices[0].logprobs is None


def test_scoring_a_continuation_is_decoding_it(server):
    prompt = "Water boils at"
    gen = complete(server, prompt=prompt, max_tokens=12, logprobs=2)
    ids = tokenize(server, prompt + gen.choices[0].text)
    n = len(tokenize(server, prompt))
    assert len(ids) == n + 12  # the greedy text tokenizes back to the same 12 tokens
    scored = complete(server, prompt=ids, max_tokens=1, echo=True, logprobs=2)  # lm-eval's loglikelihood request
    lp = scored.choices[0].logprobs
    assert len(lp.token_logprobs) == n + 12 + 1
    assert lp.token_logprobs[n:n + 12] == gen.choices[0].logprobs.token_logprobs
    assert lp.top_logprobs[n:n + 12] == gen.choices[0].logprobs.top_logprobs


def test_echo_streamed(server):
    prompt = "One, two, three,"
    text, lps, usage = "", [], None
    for ch in server.client().completions.create(model="default", prompt=prompt, max_tokens=4, temperature=0,
                                                 echo=True, logprobs=1, stream=True,
                                                 stream_options={"include_usage": True}):
        if ch.choices:
            text += ch.choices[0].text
            if ch.choices[0].logprobs:
                lps += ch.choices[0].logprobs.token_logprobs
        if ch.usage:
            usage = ch.usage
    full = complete(server, prompt=prompt, max_tokens=4, echo=True, logprobs=1)
    assert text == full.choices[0].text and text.startswith(prompt)
    assert lps == full.choices[0].logprobs.token_logprobs and lps[0] is None
    assert usage.completion_tokens == 4


def test_max_tokens_zero_needs_echo(server):
    with pytest.raises(openai.BadRequestError) as e:
        complete(server, prompt="x", max_tokens=0)
    assert e.value.body["param"] == "max_tokens"
