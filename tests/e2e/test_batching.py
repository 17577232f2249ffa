"""Continuous batching and the prefix cache through the real server and the
official OpenAI SDK: many concurrent streams, answers unchanged by batching,
multi-turn cache hits, and the KV pool back at its baseline afterwards."""
import concurrent.futures as cf

import pytest

from conftest import DEFAULT_MODEL, run_hearth
from test_server import Server, chat

BLOCK = 16  # KV block size (positions)


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 16, "--ctx", 1024)
    yield s
    assert s.stop() == 0, s.output()


def kv_idle(stats):
    """Every block is free or cached: no sequence holds one."""
    e = stats["engine"] if "engine" in stats else stats
    kv = e.get("kv", e)
    return kv["kv_blocks_free"] + kv["kv_blocks_cached"] == kv["kv_blocks_total"]


def find(d, key):
    if isinstance(d, dict):
        if key in d:
            return d[key]
        for v in d.values():
            r = find(v, key)
            if r is not None:
                return r
    return None


PROMPTS = [f"Write one sentence about the number {i}." for i in range(8)]


def test_batching_never_changes_greedy_answers(server):
    c = server.client()
    alone = [chat(c, p, max_tokens=12, temperature=0).choices[0].message.content for p in PROMPTS]
    with cf.ThreadPoolExecutor(len(PROMPTS)) as ex:
        together = list(ex.map(lambda p: chat(c, p, max_tokens=12, temperature=0).choices[0].message.content,
                               PROMPTS))
    assert together == alone


def test_64_concurrent_streams_all_complete(server):
    c = server.client()
    before = server.stats()

    def one(i):
        text, finish = "", None
        for ch in c.chat.completions.create(model="default", stream=True, max_tokens=6, temperature=0.7, seed=i,
                                            messages=[{"role": "user", "content": f"Say hello to user {i}."}]):
            if ch.choices:
                text += ch.choices[0].delta.content or ""
                finish = ch.choices[0].finish_reason or finish
        return text, finish

    with cf.ThreadPoolExecutor(64) as ex:
        results = list(ex.map(one, range(64)))
    assert all(f in ("stop", "length") for _, f in results), results
    assert sum(1 for t, _ in results if t) >= 60  # a reply may legitimately be an immediate end token
    after = server.stats()
    done = lambda s: find(s, "ok") if find(s, "ok") is not None else find(s, "requests_ok")
    assert done(after) - done(before) >= 64
    assert kv_idle(after), after


def test_multi_turn_reuses_the_cached_prefix(server):
    c = server.client()
    msgs = [{"role": "user", "content": "List three colours of the rainbow, one per line."}]
    r1 = c.chat.completions.create(model="default", messages=msgs, max_tokens=24, temperature=0)
    msgs += [{"role": "assistant", "content": r1.choices[0].message.content},
             {"role": "user", "content": "And three more?"}]
    r2 = c.chat.completions.create(model="default", messages=msgs, max_tokens=8, temperature=0)
    floor = (r1.usage.prompt_tokens + r1.usage.completion_tokens) // BLOCK * BLOCK
    cached = r2.usage.prompt_tokens_details.cached_tokens
    # The last generated token never entered the KV cache, so when prompt + reply is an exact
    # multiple of the block size its last block is not full; this greedy case is 41 + 24 = 65.
    assert (r1.usage.prompt_tokens + r1.usage.completion_tokens) % BLOCK != 0
    assert cached >= floor, (cached, floor)
    assert cached < r2.usage.prompt_tokens
    # the answer with a cache hit is the answer a cold server gives
    cold = Server("--ctx", 1024)
    try:
        r3 = cold.client().chat.completions.create(model="default", messages=msgs, max_tokens=8, temperature=0)
    finally:
        assert cold.stop() == 0
    assert r3.usage.prompt_tokens_details.cached_tokens == 0
    assert r3.choices[0].message.content == r2.choices[0].message.content


def test_step_budget_chunks_prompts_without_changing_answers(server):
    """--batch N: a forward step holds at most N tokens, so prompts longer
    than N are prefilled in chunks over several steps beside the other
    streams' decode rows; the greedy answers are the default budget's."""
    prompts = [f"{p} Answer in the voice of a ship's captain who has sailed every sea." for p in PROMPTS[:4]]
    c = server.client()
    want = [chat(c, p, max_tokens=10, temperature=0).choices[0].message.content for p in prompts]
    s = Server("--batch", 16, "--parallel", 4, "--ctx", 1024)
    try:
        c2 = s.client()
        with cf.ThreadPoolExecutor(len(prompts)) as ex:
            got = list(ex.map(lambda p: chat(c2, p, max_tokens=10, temperature=0), prompts))
        assert [r.choices[0].message.content for r in got] == want
        assert all(r.usage.prompt_tokens > 16 for r in got)  # every prompt took more than one step
        st = s.stats()
        assert 0 < find(st, "rows_a_step") <= 16
        assert kv_idle(st)
    finally:
        assert s.stop() == 0, s.output()
    assert "16 tokens a step" in s.output()  # the start-up line


@pytest.mark.parametrize("kv_type,elem_bytes,name", [("f16", 2, "f16"), ("fp8", 1, "e4m3")])
def test_kv_flags_size_the_pool_and_cache_serves(kv_type, elem_bytes, name):
    """--kv-type f16|fp8 / --kv-budget / --max-batch: the pool holds what the
    budget pays for at 2 (f16) or 1 (fp8 e4m3) bytes an element, the start-up
    line names the type, greedy answers and sampled answers with logprobs come
    back, and the pool is idle afterwards."""
    # SmolLM2-135M: 30 layers x 3 kv heads x 64 dims; a 16-position block of K and V
    per_block = 2 * elem_bytes * 30 * 3 * 64 * BLOCK
    s = Server("--kv-type", kv_type, "--kv-budget", 64, "--max-batch", 3, "--ctx", 1024)
    try:
        st = s.stats()
        assert find(st, "kv_blocks_total") == 64 * 1048576 // per_block
        c = s.client()
        msgs = [{"role": "user", "content": "Name a fruit."}]
        with cf.ThreadPoolExecutor(6) as ex:
            greedy = list(ex.map(lambda _: c.chat.completions.create(
                model="default", messages=msgs, max_tokens=12, temperature=0).choices[0].message.content, range(6)))
        assert len(set(greedy)) == 1 and greedy[0]
        r = c.chat.completions.create(model="default", messages=msgs, max_tokens=8, temperature=0.8, seed=7,
                                      logprobs=True, top_logprobs=3)
        lp = r.choices[0].logprobs.content
        assert len(lp) == r.usage.completion_tokens and all(len(t.top_logprobs) == 3 for t in lp)
        assert all(t.logprob <= 0 and t.top_logprobs[0].logprob >= t.top_logprobs[2].logprob for t in lp)
        again = c.chat.completions.create(model="default", messages=msgs, max_tokens=8, temperature=0.8, seed=7)
        assert again.choices[0].message.content == r.choices[0].message.content  # same seed, same draws
        assert kv_idle(s.stats())
    finally:
        assert s.stop() == 0, s.output()
    assert f"KV {name} x " in s.output()  # the start-up line


def test_kv_type_error_lists_the_types():
    r = run_hearth("run", DEFAULT_MODEL, "hi", "-n", 1, "--kv-type", "q8")
    assert r.returncode != 0
    assert "KV cache type 'q8': expected f32, f16 or fp8 (e4m3)" in r.stderr, r.stderr


def test_every_protocol_at_once_answers_as_alone(server):
    """Anthropic streams, Responses, JSON mode, forced calls and embeddings all
    in one batch: each answer is what it is alone, and the pool goes back."""
    import anthropic

    c = server.client()
    a = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0)
    weather = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
        "additionalProperties": False}}}]

    def messages(p):
        with a.messages.stream(model="m", max_tokens=12, extra_body={"temperature": 0},
                               messages=[{"role": "user", "content": p}]) as st:
            return "".join(st.text_stream)

    def responses(p):
        return c.responses.create(model="m", input=p, max_output_tokens=12, temperature=0).output_text

    def json_mode(p):
        return chat(c, p, max_tokens=40, temperature=0, response_format={"type": "json_object"}).choices[0] \
            .message.content

    def forced(p):
        ch = chat(c, p, max_tokens=40, temperature=0, tools=weather, tool_choice="required").choices[0]
        return ch.finish_reason, ch.message.content, [t.function.arguments for t in ch.message.tool_calls or []]

    def embed(p):
        return c.embeddings.create(model="m", input=p).data[0].embedding

    work = [(f, p) for f in (messages, responses, json_mode, forced, embed) for p in PROMPTS[:4]]
    alone = [f(p) for f, p in work]
    with cf.ThreadPoolExecutor(len(work)) as ex:
        together = list(ex.map(lambda w: w[0](w[1]), work))
    assert together == alone
    assert kv_idle(server.stats())
