"""vLLM's prompt_logprobs through the official OpenAI SDK (extra_body): every
prompt token's record (the first null), the token itself with its logprob and
its rank among the whole vocabulary, then the k likeliest alternatives ranked
1..k; the same logprobs that echo reports; on the choice for text
completions, on the response for chat; refused with streaming."""
import json
import math

import openai
import pytest

from test_server import Server, chat

PROMPT = "The capital of France is Paris, and the capital of Italy is Rome."


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 2)
    yield s
    assert s.stop() == 0, s.output()


def check_records(records, ids, k):
    assert records[0] is None
    for pos, rec in enumerate(records[1:], 1):
        assert str(ids[pos]) in rec, (pos, rec)
        own = rec[str(ids[pos])]
        alts = sorted((v for key, v in rec.items() if key != str(ids[pos])), key=lambda v: v["rank"])
        assert len(rec) in (k, k + 1)  # the token, and its k alternatives (one of which it may be)
        top = max(v["logprob"] for v in rec.values())
        assert own["rank"] >= 1 and (own["rank"] == 1) == math.isclose(own["logprob"], top, abs_tol=1e-6)
        for r, v in enumerate(sorted(rec.values(), key=lambda v: -v["logprob"])[:k], 1):
            assert v["rank"] == r or v is own
        assert all(a["logprob"] <= top for a in alts)


def test_completion_prompt_logprobs_are_echos(server):
    c = server.client()
    r = c.completions.create(model="default", prompt=PROMPT, max_tokens=2, temperature=0,
                             extra_body={"prompt_logprobs": 3}).choices[0]
    records = r.model_extra["prompt_logprobs"]
    echo = c.completions.create(model="default", prompt=PROMPT, max_tokens=1, temperature=0, echo=True,
                                logprobs=3).choices[0].logprobs
    ids = json.loads(server.post("/tokenize", {"prompt": PROMPT})[1])["tokens"]
    assert len(records) == len(ids)
    check_records(records, ids, 3)
    for pos in range(1, len(ids)):
        assert records[pos][str(ids[pos])]["logprob"] == pytest.approx(echo.token_logprobs[pos], abs=1e-6)
        assert records[pos][str(ids[pos])]["decoded_token"] == echo.tokens[pos]


def test_chat_prompt_logprobs_cover_the_templated_prompt(server):
    c = server.client()
    r = chat(c, "Say hi.", max_tokens=4, temperature=0, extra_body={"prompt_logprobs": 0})
    records = r.model_extra["prompt_logprobs"]
    assert len(records) == r.usage.prompt_tokens and records[0] is None
    assert all(len(rec) == 1 for rec in records[1:])  # the token alone


def test_batch_prompts_each_get_theirs(server):
    c = server.client()
    prompts = ["One two three four", "Red green blue"]
    r = c.completions.create(model="default", prompt=prompts, max_tokens=1, temperature=0,
                             extra_body={"prompt_logprobs": 1})
    for ch, p in zip(r.choices, prompts):
        alone = c.completions.create(model="default", prompt=p, max_tokens=1, temperature=0,
                                     extra_body={"prompt_logprobs": 1}).choices[0]
        assert ch.model_extra["prompt_logprobs"] == alone.model_extra["prompt_logprobs"]


@pytest.mark.parametrize("body", [{"prompt_logprobs": 21}, {"prompt_logprobs": -1}, {"prompt_logprobs": "2"},
                                  {"prompt_logprobs": 1, "stream": True}])
def test_bad_prompt_logprobs(server, body):
    c = server.client()
    with pytest.raises(openai.BadRequestError) as e:
        c.completions.create(model="default", prompt="x", max_tokens=1, extra_body=body)
    assert e.value.body["param"] == "prompt_logprobs", e.value.body
