"""llama-server's sampling fields on hearth's OpenAI routes, through the official SDK
(extra_body) and raw requests: DRY's penalties as llama.cpp computes them
(tests/fixtures/smollm2/sampler_golden.json, tools/oracle/make_sampler_goldens.py),
repeat_penalty's window, typical_p / top_n_sigma / XTC / mirostat / dynamic temperature
draws, and the errors."""
import json
import os

import pytest

from test_server import Server, refused_on_both_routes

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "../.."))
GOLDEN = json.load(open(os.path.join(ROOT, "tests/fixtures/smollm2/sampler_golden.json")))
DEFAULT_BREAKERS = ["\n", ":", "\"", "*"]


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 2)
    yield s
    assert s.stop() == 0, s.output()


def top5(server, prompt_ids, **fields):
    status, body, _ = server.post("/v1/completions", dict(fields, prompt=prompt_ids, max_tokens=1, temperature=0,
                                                          logprobs=5))
    assert status == 200, body
    lp = json.loads(body)["choices"][0]["logprobs"]
    return lp["top_logprobs"][0]


def token_text(server, tid):
    status, body, _ = server.post("/detokenize", {"tokens": [tid]})
    assert status == 200, body
    return json.loads(body)["prompt"]


# the golden cases whose penalties a logit_bias of 10 keeps inside the top 5
CASES = [i for i, c in enumerate(GOLDEN["dry"])
         if c["logits"] and all(-10 < v < 0 for _, v in c["logits"]) and len(c["logits"]) <= 3]


@pytest.mark.parametrize("case", CASES)
def test_dry_penalties_are_llamacpps(server, case):
    """The golden history as the prompt, the next token's logprobs with and without DRY: every listed token
    moves by llama.cpp's penalty (relative to the others), whatever the model's logits are."""
    c = GOLDEN["dry"][case]
    pen = {tid: v for tid, v in c["logits"]}
    bias = {str(tid): 10 for tid in pen}  # the penalized tokens stay in the top 5 of both runs
    dry = {"dry_multiplier": c["multiplier"], "dry_base": c["base"], "dry_allowed_length": c["allowed_length"],
           "dry_penalty_last_n": c["last_n"]}
    if c["breakers"] != DEFAULT_BREAKERS:
        dry["dry_sequence_breakers"] = c["breakers"]
    plain = top5(server, c["history"], logit_bias=bias)
    held = top5(server, c["history"], logit_bias=bias, **dry)
    texts = {token_text(server, tid): tid for tid in pen}
    assert set(texts) <= set(plain) and set(texts) <= set(held), (texts, plain, held)
    common = [t for t in plain if t in held]
    shift = {t: held[t] - plain[t] for t in common}
    free = [t for t in common if t not in texts]
    assert free, (plain, held)
    for t, tid in texts.items():  # relative to an unpenalized token: exactly the penalty
        assert abs((shift[t] - shift[free[0]]) - pen[tid]) < 2e-3, (t, shift, pen)
    for t in free:
        assert abs(shift[t] - shift[free[0]]) < 2e-3, shift


def test_dry_changes_a_repetitive_answer(server):
    c = server.client()
    kw = dict(model="default", prompt="one two three four one two three four one two three four one two three",
              max_tokens=16, temperature=0)
    plain = c.completions.create(**kw).choices[0].text
    held = c.completions.create(**kw, extra_body={"dry_multiplier": 0.8}).choices[0].text
    assert plain.startswith(" four one two three four")
    assert not held.startswith(" four one two three four"), held
    streamed = "".join(ch.choices[0].text for ch in c.completions.create(**kw, stream=True,
                                                                        extra_body={"dry_multiplier": 0.8}))
    assert streamed == held


def test_repeat_penalty_window(server):
    """llama-server's repeat_penalty looks at the last 64 tokens; repeat_last_n widens or narrows that."""
    ids = GOLDEN["dry"][6]["history"]  # "apples, pears, plums, ..."
    plain = top5(server, ids)
    near = top5(server, ids, repeat_penalty=1.5, repeat_last_n=2)
    wide = top5(server, ids, repeat_penalty=1.5)
    assert near != plain and wide != near
    assert top5(server, ids, repeat_penalty=1.5, repeat_last_n=0) == plain  # 0: off, as llama-server


def test_seeded_filters_are_reproducible(server):
    c = server.client()
    extra = {"typical_p": 0.9, "top_n_sigma": 1.5, "xtc_probability": 0.5, "xtc_threshold": 0.1, "seed": 7}
    kw = dict(model="default", messages=[{"role": "user", "content": "Name three fruits."}], max_tokens=24,
              temperature=0.9)
    a = c.chat.completions.create(**kw, extra_body=extra).choices[0].message.content
    b = c.chat.completions.create(**kw, extra_body=extra).choices[0].message.content
    assert a == b and a


@pytest.mark.parametrize("extra", [{"mirostat": 2, "mirostat_tau": 3.0}, {"mirostat": 1},
                                   {"dynatemp_range": 0.5, "dynatemp_exponent": 2.0}])
def test_mirostat_and_dynatemp_draws(server, extra):
    c = server.client()
    kw = dict(model="default", prompt="Once upon a time", max_tokens=24, temperature=0.8)
    a = c.completions.create(**kw, extra_body=dict(extra, seed=11)).choices[0].text
    b = c.completions.create(**kw, extra_body=dict(extra, seed=11)).choices[0].text
    other = c.completions.create(**kw, extra_body=dict(extra, seed=12)).choices[0].text
    assert a == b and a and other != a


@pytest.mark.parametrize("body, param", [
    ({"typical_p": 0}, "typical_p"),
    ({"typical_p": "x"}, "typical_p"),
    ({"xtc_probability": 1.5}, "xtc_probability"),
    ({"xtc_threshold": -0.1}, "xtc_threshold"),
    ({"dry_multiplier": -1}, "dry_multiplier"),
    ({"dry_allowed_length": -1}, "dry_allowed_length"),
    ({"dry_penalty_last_n": -2}, "dry_penalty_last_n"),
    ({"dry_sequence_breakers": []}, "dry_sequence_breakers"),
    ({"dry_sequence_breakers": [""]}, "dry_sequence_breakers"),
    ({"dry_sequence_breakers": "\n"}, "dry_sequence_breakers"),
    ({"repeat_last_n": -2}, "repeat_last_n"),
    ({"repeat_penalty": 0}, "repeat_penalty"),
    ({"repeat_penalty": 1.1, "repetition_penalty": 1.1}, "repeat_penalty"),
    ({"mirostat": 3}, "mirostat"),
    ({"mirostat_tau": "5"}, "mirostat_tau"),
    ({"dynatemp_exponent": None, "dynatemp_range": "x"}, "dynatemp_range"),
])
def test_bad_values_are_named(server, body, param):
    refused_on_both_routes(server, body, param)


def test_server_flags_are_defaults(server):
    """hearth serve --dry-multiplier (llama-server's flag) holds every request that does not say otherwise."""
    kw = dict(model="default", prompt="one two three four one two three four one two three four one two three",
              max_tokens=16, temperature=0)
    want = server.client().completions.create(**kw, extra_body={"dry_multiplier": 0.8}).choices[0].text
    s = Server("--dry-multiplier", "0.8")
    try:
        c = s.client()
        assert c.completions.create(**kw).choices[0].text == want
        assert c.completions.create(**kw, extra_body={"dry_multiplier": 0}).choices[0].text != want
    finally:
        assert s.stop() == 0, s.output()
    bad = Server("--typical", "2", wait=False)
    assert bad.proc.wait(timeout=30) == 2 and "--typical" in bad.output()


def test_run_takes_the_flags(server):
    """hearth run --dry-multiplier (llama-cli's flag) writes what the server's field does."""
    from conftest import DEFAULT_MODEL, run_hearth
    prompt = "one two three four one two three four one two three four one two three"
    want = server.client().completions.create(model="default", prompt=prompt, max_tokens=16, temperature=0,
                                              extra_body={"dry_multiplier": 0.8}).choices[0].text
    r = run_hearth("run", DEFAULT_MODEL, prompt, "-n", "16", "--temp", "0", "--dry-multiplier", "0.8")
    assert r.returncode == 0, r.stderr
    assert r.stdout == want + "\n", (r.stdout, want)  # run ends its output with a newline
    r = run_hearth("run", DEFAULT_MODEL, prompt, "-n", "4", "--typical", "0.9", "--top-nsigma", "1",
                   "--xtc-probability", "0.5", "--repeat-last-n", "16", "--repeat-penalty", "1.1", "--seed", "3")
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    bad = run_hearth("run", DEFAULT_MODEL, prompt, "-n", "4", "--typical", "0")
    assert bad.returncode != 0 and "typical_p" in bad.stderr, bad.stderr


def test_repeat_penalty_window_from_the_server_flag(server):
    """repeat_penalty without repeat_last_n takes serve --repeat-last-n, else llama-server's 64."""
    ids = GOLDEN["dry"][6]["history"]
    near = top5(server, ids, repeat_penalty=1.5, repeat_last_n=2)
    s = Server("--repeat-last-n", "2")
    try:
        assert top5(s, ids, repeat_penalty=1.5) == near
    finally:
        assert s.stop() == 0, s.output()


def test_chat_takes_the_flags(server):
    """hearth chat --dry-multiplier answers as the chat route with the field."""
    from conftest import DEFAULT_MODEL, run_hearth
    msg = "Repeat after me: one two three four one two three four one two three four"
    want = server.client().chat.completions.create(
        model="default", messages=[{"role": "user", "content": msg}], max_tokens=16, temperature=0,
        extra_body={"dry_multiplier": 0.8}).choices[0].message.content
    plain = server.client().chat.completions.create(
        model="default", messages=[{"role": "user", "content": msg}], max_tokens=16,
        temperature=0).choices[0].message.content
    r = run_hearth("chat", DEFAULT_MODEL, "--temp", 0, "--max-tokens", 16, "--dry-multiplier", 0.8, input=msg + "\n")
    assert r.returncode == 0, r.stderr
    assert want.strip() in r.stdout and want != plain, (r.stdout, want, plain)
    bad = run_hearth("chat", DEFAULT_MODEL, "--mirostat", 3, input="")
    assert bad.returncode == 2 and "--mirostat" in bad.stderr


def test_mirostat_and_dynatemp_reach_the_sampler(server):
    """Settings whose draw is certain: mirostat 2 with a target surprise near 0 keeps only the likeliest token,
    and a dynamic temperature of 1 +- 1 with a steep exponent comes out at 0; both write the greedy answer."""
    c = server.client()
    kw = dict(model="default", prompt="Once upon a time", max_tokens=24)
    greedy = c.completions.create(**kw, temperature=0).choices[0].text
    sampled = c.completions.create(**kw, temperature=1.0, extra_body={"seed": 5}).choices[0].text
    tight = c.completions.create(**kw, temperature=1.0, extra_body={"seed": 5, "mirostat": 2,
                                                                     "mirostat_tau": 0.01}).choices[0].text
    cold = c.completions.create(**kw, temperature=1.0, extra_body={"seed": 5, "dynatemp_range": 1.0,
                                                                    "dynatemp_exponent": 200}).choices[0].text
    assert sampled != greedy and tight == greedy and cold == greedy, (greedy, sampled, tight, cold)
