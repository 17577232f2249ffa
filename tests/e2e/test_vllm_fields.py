"""vLLM's extra request fields through the official OpenAI SDK (extra_body) and raw requests:
bad_words, allowed_token_ids, include_stop_str_in_output, skip_special_tokens,
truncate_prompt_tokens and cache_salt, and their errors."""
import json
import re

import pytest

from test_server import Server, refused_on_both_routes

PROMPT = "The capital of France is Paris. The capital of Italy is"


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 2)
    yield s
    assert s.stop() == 0, s.output()


def complete(server, **kw):
    extra = {k: kw.pop(k) for k in list(kw) if k not in ("prompt", "max_tokens", "stop", "stream")}
    return server.client().completions.create(model="default", temperature=0, extra_body=extra,
                                               **dict(dict(prompt=PROMPT, max_tokens=16), **kw))


def test_bad_words(server):
    plain = complete(server).choices[0].text
    assert " Rome" in plain and "capital of" in plain, plain
    one = complete(server, bad_words=["Rome"]).choices[0].text
    assert "Rome" not in one and one != plain
    # a word of two tokens: its last one is out only where the first ends the output
    two = complete(server, bad_words=["capital of"], max_tokens=24).choices[0].text
    assert "capital of" not in two, two
    assert two.startswith(plain[:plain.index("capital of")]), (plain, two)


def test_allowed_token_ids(server):
    ids = json.loads(server.post("/tokenize", {"prompt": " Rome Milan"})[1])["tokens"]
    text = complete(server, allowed_token_ids=ids, max_tokens=6).choices[0].text
    assert re.fullmatch(r"( Rome| Milan){6}", text), text


def test_include_stop_str_in_output(server):
    cut = complete(server, stop=["."]).choices[0]
    kept = complete(server, stop=["."], include_stop_str_in_output=True).choices[0]
    assert cut.finish_reason == kept.finish_reason == "stop"
    assert kept.text == cut.text + "."
    streamed = "".join(c.choices[0].text for c in complete(server, stop=["."], include_stop_str_in_output=True,
                                                           stream=True))
    assert streamed == kept.text


def test_skip_special_tokens(server):
    c = server.client()
    kw = dict(model="default", messages=[{"role": "user", "content": "Say hi."}], max_tokens=24, temperature=0)
    shown = c.chat.completions.create(**kw, extra_body={"ignore_eos": True, "skip_special_tokens": False})
    hidden = c.chat.completions.create(**kw, extra_body={"ignore_eos": True})
    assert "<|im_end|>" in shown.choices[0].message.content
    assert "<|im_end|>" not in hidden.choices[0].message.content
    assert shown.choices[0].message.content.startswith(hidden.choices[0].message.content[:20])


def test_truncate_prompt_tokens(server):
    ids = json.loads(server.post("/tokenize", {"prompt": PROMPT})[1])["tokens"]
    cut = complete(server, truncate_prompt_tokens=5)
    assert cut.usage.prompt_tokens == 5
    assert cut.choices[0].text == complete(server, prompt=ids[-5:]).choices[0].text
    assert complete(server, truncate_prompt_tokens=1000).choices[0].text == complete(server).choices[0].text


def test_cache_salt(server):
    """vLLM's cache_salt: a request shares prefix-cache blocks only with requests of the same salt (and an
    unsalted one only with unsalted ones); the answer is the same whichever blocks it got."""
    long = " ".join(f"Note {i}: the salted cache keeps tenants apart." for i in range(30))

    def run(**kw):
        r = complete(server, prompt=long, max_tokens=6, **kw)
        return r.choices[0].text, r.usage.prompt_tokens_details.cached_tokens, r.usage.prompt_tokens

    text, cached, n = run(cache_salt="tenant-a")
    full = (n - 1) // 16 * 16  # every block before the last token
    assert cached == 0
    assert run(cache_salt="tenant-a") == (text, full, n)
    assert run(cache_salt="tenant-b") == (text, 0, n)
    assert run() == (text, 0, n)  # unsalted requests share only with unsalted ones
    assert run() == (text, full, n)
    assert run(cache_salt="tenant-b") == (text, full, n)  # its own blocks from before
    chat = server.client().chat.completions.create(
        model="default", messages=[{"role": "user", "content": long}], max_tokens=4, temperature=0,
        extra_body={"cache_salt": "tenant-c"})
    assert chat.usage.prompt_tokens_details.cached_tokens == 0


@pytest.mark.parametrize("body, param", [
    ({"cache_salt": ""}, "cache_salt"),
    ({"cache_salt": 7}, "cache_salt"),
    ({"bad_words": "Rome"}, "bad_words"),
    ({"bad_words": ["  "]}, "bad_words"),
    ({"bad_words": [3]}, "bad_words"),
    ({"allowed_token_ids": []}, "allowed_token_ids"),
    ({"allowed_token_ids": [-1]}, "allowed_token_ids"),
    ({"allowed_token_ids": [10 ** 8]}, "allowed_token_ids"),
    ({"include_stop_str_in_output": "yes"}, "include_stop_str_in_output"),
    ({"skip_special_tokens": 0}, "skip_special_tokens"),
    ({"truncate_prompt_tokens": 0}, "truncate_prompt_tokens"),
    ({"truncate_prompt_tokens": -2}, "truncate_prompt_tokens"),
])
def test_bad_values_are_named(server, body, param):
    refused_on_both_routes(server, body, param)


def test_continuous_usage_stats(server):
    """vLLM's stream_options.continuous_usage_stats: every chunk carries its choice's usage so far."""
    c = server.client()
    chunks = list(c.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Count to five."}], max_tokens=12, temperature=0,
        stream=True, stream_options={"include_usage": True, "continuous_usage_stats": True}))
    body = [ch for ch in chunks if ch.choices]
    assert all(ch.usage is not None for ch in body)
    done = [ch.usage.completion_tokens for ch in body]
    assert done == sorted(done) and done[-1] >= 1
    final = chunks[-1].usage
    assert not chunks[-1].choices and final.completion_tokens == done[-1]
    assert all(ch.usage.prompt_tokens == final.prompt_tokens for ch in body)
    status, raw, _ = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "stream": True,
        "stream_options": {"continuous_usage_stats": "yes"}})
    assert status == 400 and json.loads(raw)["error"]["param"] == "stream_options.continuous_usage_stats", raw
