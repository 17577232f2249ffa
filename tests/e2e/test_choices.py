"""n choices (`n` on /v1/chat/completions and /v1/completions) through the
official OpenAI SDK: each choice is a sequence of its own, run together in the
engine; choice i of a seeded request is what the same request with seed + i
alone gives (vLLM's rule), greedy choices agree, a stream carries every
choice's chunks under its index, usage sums the choices' tokens, and the KV
pool is back at its baseline afterwards."""
import openai
import pytest

from test_batching import kv_idle
from test_server import Server, chat


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 4)
    yield s
    assert s.stop() == 0, s.output()


def test_seeded_choices_are_single_requests(server):
    c = server.client()
    r = chat(c, "Name a color.", max_tokens=10, n=3, seed=11, temperature=1.0)
    assert [ch.index for ch in r.choices] == [0, 1, 2]
    for i, ch in enumerate(r.choices):
        alone = chat(c, "Name a color.", max_tokens=10, seed=11 + i, temperature=1.0).choices[0]
        assert ch.message.content == alone.message.content and ch.finish_reason == alone.finish_reason
    assert len({ch.message.content for ch in r.choices}) > 1  # different seeds, different samples
    assert r.usage.completion_tokens == sum(
        chat(c, "Name a color.", max_tokens=10, seed=11 + i, temperature=1.0).usage.completion_tokens
        for i in range(3))
    greedy = chat(c, "Name a color.", max_tokens=10, n=2, temperature=0)
    assert greedy.choices[0].message.content == greedy.choices[1].message.content


def test_streamed_choices(server):
    c = server.client()
    kw = dict(model="default", prompt="The three primary colors are", max_tokens=12, n=3, seed=3, temperature=0.9,
              logprobs=1)
    whole = c.completions.create(**kw)
    text, lps, finish, usage = {}, {}, {}, None
    for ch in c.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
        for choice in ch.choices:
            text[choice.index] = text.get(choice.index, "") + choice.text
            if choice.logprobs:
                lps.setdefault(choice.index, []).extend(choice.logprobs.token_logprobs)
            if choice.finish_reason:
                finish[choice.index] = choice.finish_reason
        if ch.usage:
            usage = ch.usage
    assert text == {ch.index: ch.text for ch in whole.choices}
    assert lps == {ch.index: ch.logprobs.token_logprobs for ch in whole.choices}
    assert finish == {ch.index: ch.finish_reason for ch in whole.choices}
    assert usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens
    assert kv_idle(server.stats())


def test_bad_n_is_named(server):
    for n in (0, 65):
        with pytest.raises(openai.BadRequestError) as e:
            chat(server.client(), "hi", max_tokens=2, n=n)
        assert e.value.body["param"] == "n"


def test_choices_beyond_the_queue_are_refused_whole():
    s = Server("--parallel", 1, "--max-queue", 2)
    try:
        with pytest.raises(openai.RateLimitError):
            s.client().completions.create(model="default", prompt="Hello", max_tokens=4, n=6)
        st = s.stats()
        assert st["requests"]["by_status"]["429"] == 1 and st["requests"]["client_disconnected"] == 0
        assert st["requests"]["cancelled"] >= 1  # the choices started before the refusal, stopped
        assert kv_idle(st)
        ok = s.client().completions.create(model="default", prompt="Hello", max_tokens=4, n=2)
        assert len(ok.choices) == 2
    finally:
        assert s.stop() == 0, s.output()
