"""Speculative decoding by prompt lookup (`--spec-ngram K`) through the real
server and the official OpenAI SDK: a server that drafts gives the answers,
logprobs and seeded samples of one that does not, on the completion and chat
routes, streamed and concurrent, with stop strings and JSON mode; drafts are
taken (its /stats and /metrics count them) and the KV pool is back at its
baseline afterwards. `hearth run --spec-ngram` prints the same ids."""
import concurrent.futures as cf

import pytest

from conftest import DEFAULT_MODEL, run_hearth
from test_batching import kv_idle
from test_server import Server, chat

FRUIT = ("apple, banana, cherry, date, elderberry, fig, grape, honeydew, kiwi, lemon, mango, nectarine, orange, "
         "papaya, quince, raspberry, strawberry, tangerine")
COPY = f"Copy the list exactly.\n{FRUIT}\nCopy: apple, banana,"
CODE = ("def area(width, height):\n    return width * height\n\n\n"
        "Rename width to w and height to h:\n\ndef area(")


@pytest.fixture(scope="module")
def servers():
    plain = Server("--parallel", 4, "--ctx", 1024)
    spec = Server("--parallel", 4, "--ctx", 1024, "--spec-ngram", 5)
    yield plain, spec
    for s in (plain, spec):
        assert s.stop() == 0, s.output()


def complete(server, prompt, **kw):
    return server.client().completions.create(model="default", prompt=prompt, **kw)


def test_greedy_answers_and_logprobs_unchanged(servers):
    plain, spec = servers
    before = spec.stats()["engine"]["spec_accepted_tokens"]
    for prompt in (COPY, CODE):
        a = complete(plain, prompt, max_tokens=48, temperature=0, logprobs=3)
        b = complete(spec, prompt, max_tokens=48, temperature=0, logprobs=3)
        assert b.choices[0].text == a.choices[0].text
        assert b.choices[0].logprobs.token_logprobs == a.choices[0].logprobs.token_logprobs
        assert b.choices[0].logprobs.top_logprobs == a.choices[0].logprobs.top_logprobs
        assert b.usage.completion_tokens == a.usage.completion_tokens
    eng = spec.stats()["engine"]
    assert eng["spec_accepted_tokens"] - before > 20, eng  # the copy is drafted, or nothing was checked
    assert 0 < eng["spec_acceptance_rate"] <= 1
    metrics = spec.get("/metrics")[1]
    assert f"hearth_spec_accepted_tokens_total {eng['spec_accepted_tokens']}" in metrics
    assert plain.stats()["engine"]["spec_draft_tokens"] == 0


def test_seeded_samples_unchanged(servers):
    plain, spec = servers
    for kw in ({"temperature": 0.8}, {"temperature": 0.8, "top_p": 0.9, "frequency_penalty": 0.3}):
        a = complete(plain, COPY, max_tokens=40, seed=7, **kw).choices[0].text
        b = complete(spec, COPY, max_tokens=40, seed=7, **kw).choices[0].text
        assert b == a, kw


def test_concurrent_streams_stop_strings_and_json(servers):
    plain, spec = servers

    def streamed(server, i):
        text = ""
        for ch in server.client().chat.completions.create(
                model="default", stream=True, max_tokens=40, temperature=0, stop=["kiwi"] if i % 2 else None,
                messages=[{"role": "user", "content": f"{i}: repeat this list: {FRUIT}"}]):
            if ch.choices:
                text += ch.choices[0].delta.content or ""
        return text

    with cf.ThreadPoolExecutor(6) as ex:
        got = list(ex.map(lambda i: streamed(spec, i), range(6)))
    assert got == [streamed(plain, i) for i in range(6)]
    for i in range(1, 6, 2):
        assert "kiwi" not in got[i]
    fmt = {"type": "json_object"}
    ask = f"Give the fruits {FRUIT} as a JSON object with a key fruits."
    a = chat(plain.client(), ask, max_tokens=60, temperature=0, response_format=fmt).choices[0].message.content
    b = chat(spec.client(), ask, max_tokens=60, temperature=0, response_format=fmt).choices[0].message.content
    assert b == a
    for s in (plain, spec):
        assert kv_idle(s.stats())


def test_run_prints_the_same_ids():
    args = [DEFAULT_MODEL, COPY, "-n", "40", "--temp", "0", "--ids"]
    a = run_hearth("run", *args)
    b = run_hearth("run", *args, "--spec-ngram", "4", "--spec-ngram-max", "3")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert b.stdout == a.stdout
    assert "accepted" in b.stderr


def test_bad_spec_flags_are_named():
    r = run_hearth("run", DEFAULT_MODEL, "x", "--spec-ngram", "-1")
    assert r.returncode == 2 and "--spec-ngram must be in [0, 32]" in r.stderr
    r = run_hearth("serve", DEFAULT_MODEL, "--spec-ngram-min", "0")
    assert r.returncode == 2 and "--spec-ngram-min must be in [1, 32]" in r.stderr
    r = run_hearth("run", DEFAULT_MODEL, "x", "--spec-ngram")
    assert r.returncode == 2 and "--spec-ngram needs a value" in r.stderr
