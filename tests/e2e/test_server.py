"""`hearth serve` through the official OpenAI Python SDK: chat and text
completions, streamed and not, stop strings, seeds, logprobs, usage, tool
calls, the reasoning split, and the admin routes. The real binary on
loopback with the default model; token budgets are small on purpose."""
import json
import os
import pathlib
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import openai
import pytest

from conftest import BIN, DEFAULT_MODEL, run_hearth

# ASan builds are several times slower: give every wait room.
SLOW = 4 if "asan" in os.path.basename(BIN) else 1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A `hearth serve` process on a free loopback port."""

    def __init__(self, *args, env=None, wait=True, model=DEFAULT_MODEL):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", prefix="hearth-serve-", suffix=".log")
        self.proc = subprocess.Popen([BIN, "serve", str(model), "--port", str(self.port), *map(str, args)],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout * SLOW
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hearth serve exited {self.proc.returncode}:\n{self.output()}")
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.01)
        raise RuntimeError("hearth serve did not become ready:\n" + self.output())

    def output(self):
        if self.log.closed:
            return self.final_output
        self.log.flush()
        return pathlib.Path(self.log.name).read_text()

    def request(self, method, path, body=None, headers=None, timeout=60):
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout * SLOW) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def stats(self):
        return json.loads(self.get("/stats")[1])

    def client(self, api_key="none"):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0, timeout=120 * SLOW)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout * SLOW)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if not self.log.closed:
                self.final_output = self.output()
                self.log.close()


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 4)
    yield s
    assert s.stop() == 0, s.output()


def chat(client, content, **kw):
    return client.chat.completions.create(model="default", messages=[{"role": "user", "content": content}], **kw)


def refused_on_both_routes(server, body, param):
    """body's fields are a 400 naming param on the text and the chat route."""
    for path, extra in (("/v1/completions", {"prompt": "Hi"}),
                        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]})):
        status, raw, _ = server.post(path, dict(body, max_tokens=4, **extra))
        assert status == 400, raw
        err = json.loads(raw)["error"]
        assert err["param"] == param and param in err["message"], err


def smollm_chatml(*turns):
    """The default model's own template, rendered by hand (no system message given)."""
    out = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    for role, content in turns:
        out += f"<|im_start|>{role}\n{content}<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


def token_ids(text, add_special=True):
    args = ["tokenize", DEFAULT_MODEL, text, "--ids"] + ([] if add_special else ["--no-add-special"])
    r = run_hearth(*args)
    assert r.returncode == 0, r.stderr
    return [int(x) for x in r.stdout.split()]


# ---- chat ----

def test_chat_non_streaming(server):
    r = chat(server.client(), "What is the capital of France?", max_tokens=8, temperature=0)
    ch = r.choices[0]
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert ch.message.role == "assistant"
    assert isinstance(ch.message.content, str) and ch.message.content.strip()
    assert ch.finish_reason in ("stop", "length")
    assert 1 <= r.usage.completion_tokens <= 8
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.usage.prompt_tokens_details.cached_tokens >= 0


def test_chat_streaming_is_the_same_answer(server):
    c = server.client()
    full = chat(c, "Name a color.", max_tokens=10, temperature=0)
    chunks = list(chat(c, "Name a color.", max_tokens=10, temperature=0, stream=True,
                       stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert text == full.choices[0].message.content
    assert finishes == [full.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    u, fu = chunks[-1].usage, full.usage
    assert (u.prompt_tokens, u.completion_tokens, u.total_tokens) == \
        (fu.prompt_tokens, fu.completion_tokens, fu.total_tokens)
    # the second time the prompt is served from the prefix cache (whole blocks)
    assert u.prompt_tokens_details.cached_tokens >= fu.prompt_tokens_details.cached_tokens
    assert 0 < u.prompt_tokens_details.cached_tokens < u.prompt_tokens
    assert len({ch.id for ch in chunks}) == 1
    # without include_usage there is no usage chunk
    plain = list(chat(c, "Name a color.", max_tokens=3, temperature=0, stream=True))
    assert all(ch.choices and ch.usage is None for ch in plain)


def test_sse_wire_format(server):
    """The raw bytes: data: lines, role first, finish, then [DONE]."""
    status, body, headers = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "temperature": 0, "stream": True})
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = [e for e in body.split("\n\n") if e and not e.startswith(":")]  # ':' lines are keep-alive comments
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    docs = [json.loads(e[6:]) for e in events[:-1]]
    assert docs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert docs[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    assert all(d["object"] == "chat.completion.chunk" for d in docs)


# ---- text completions ----

def test_text_completion_and_stream_agree(server):
    c = server.client()
    r = c.completions.create(model="default", prompt="The capital of France is", max_tokens=6, temperature=0)
    assert r.object == "text_completion" and r.choices[0].text.strip()
    s = list(c.completions.create(model="default", prompt="The capital of France is", max_tokens=6, temperature=0,
                                  stream=True, stream_options={"include_usage": True}))
    assert "".join(ch.choices[0].text for ch in s if ch.choices) == r.choices[0].text
    assert s[-1].usage.completion_tokens == r.usage.completion_tokens
    # token ids as the prompt give the same continuation
    ids = token_ids("The capital of France is")
    r2 = c.completions.create(model="default", prompt=ids, max_tokens=6, temperature=0)
    assert r2.choices[0].text == r.choices[0].text


def test_usage_counts_are_real_token_counts(server):
    c = server.client()
    prompt = "One two three four five"
    r = c.completions.create(model="default", prompt=prompt, max_tokens=5, temperature=0,
                             extra_body={"ignore_eos": True}, logprobs=0)
    assert r.usage.prompt_tokens == len(token_ids(prompt))
    assert r.usage.completion_tokens == 5 == len(r.choices[0].logprobs.tokens)
    assert r.choices[0].finish_reason == "length"
    # chat: the prompt is the rendered template, tokenized without added specials
    q = chat(c, "Count to three.", max_tokens=4, temperature=0, logprobs=True, extra_body={"ignore_eos": True})
    assert q.usage.prompt_tokens == len(token_ids(smollm_chatml(("user", "Count to three.")), add_special=False))
    assert q.usage.completion_tokens == 4 == len(q.choices[0].logprobs.content)


# ---- stop strings ----

def test_stop_strings_spanning_tokens_never_leak(server):
    c = server.client()
    base = c.completions.create(model="default", prompt="The history of Rome", max_tokens=24, temperature=0,
                                logprobs=0, extra_body={"ignore_eos": True})
    text, toks = base.choices[0].text, base.choices[0].logprobs.tokens
    assert "".join(toks) == text
    # stops that start inside one token and end inside a later one
    stops, off = [], 0
    for i, t in enumerate(toks[:-1]):
        nxt = toks[i + 1]
        if len(t) >= 2 and len(nxt) >= 2 and len(stops) < 3 and off > 0:
            s = t[-2:] + nxt[:2]
            if text.find(s) == off + len(t) - 2:  # its first occurrence is this one
                stops.append(s)
        off += len(t)
    assert stops, f"no boundary-spanning stop found in {toks}"
    for s in stops:
        want = text[:text.index(s)]
        r = c.completions.create(model="default", prompt="The history of Rome", max_tokens=24, temperature=0,
                                 stop=[s, "\u00a7never"])
        assert r.choices[0].text == want and r.choices[0].finish_reason == "stop"
        pieces = [ch.choices[0].text for ch in c.completions.create(
            model="default", prompt="The history of Rome", max_tokens=24, temperature=0, stop=s, stream=True)
            if ch.choices]
        assert "".join(pieces) == want
        streamed = ""
        for p in pieces:  # no prefix of the stop string is ever sent ahead
            streamed += p
            assert s not in streamed


# ---- sampling ----

def test_same_seed_same_text(server):
    c = server.client()
    kw = dict(max_tokens=12, temperature=1.0, extra_body={"ignore_eos": True})
    a = c.completions.create(model="default", prompt="Once upon a time", seed=42, **kw).choices[0].text
    b = c.completions.create(model="default", prompt="Once upon a time", seed=42, **kw).choices[0].text
    d = c.completions.create(model="default", prompt="Once upon a time", seed=43, **kw).choices[0].text
    assert a == b
    assert a != d


def test_logit_bias_changes_the_token(server):
    c = server.client()
    base = c.completions.create(model="default", prompt="The capital of France is", max_tokens=1, temperature=0,
                                logprobs=1)
    first = base.choices[0].logprobs.tokens[0]
    tid = token_ids(first, add_special=False)
    assert len(tid) == 1
    r = c.completions.create(model="default", prompt="The capital of France is", max_tokens=1, temperature=0,
                             logit_bias={str(tid[0]): -100})
    assert r.choices[0].text != first


def test_logprobs_shape(server):
    c = server.client()
    r = chat(c, "Say hello.", max_tokens=5, temperature=0, logprobs=True, top_logprobs=3,
             extra_body={"ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens == 5
    assert "".join(e.token for e in content) == r.choices[0].message.content
    for e in content:
        assert e.logprob <= 0 and bytes(e.bytes) == e.token.encode()
        assert len(e.top_logprobs) == 3
        lps = [t.logprob for t in e.top_logprobs]
        assert lps == sorted(lps, reverse=True)
        assert e.top_logprobs[0].token == e.token  # greedy: the chosen token is the most likely
        assert abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6
    t = c.completions.create(model="default", prompt="Hello", max_tokens=4, temperature=0, logprobs=2,
                             extra_body={"ignore_eos": True})
    lp = t.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 4
    assert lp.text_offset[0] == 0 and all(len(d) == 2 for d in lp.top_logprobs)
    # streamed logprobs add up to the same records
    s = list(chat(c, "Say hello.", max_tokens=5, temperature=0, logprobs=True, top_logprobs=3, stream=True,
                  extra_body={"ignore_eos": True}))
    streamed = [e for ch in s if ch.choices and ch.choices[0].logprobs for e in ch.choices[0].logprobs.content]
    assert [(e.token, round(e.logprob, 5)) for e in streamed] == [(e.token, round(e.logprob, 5)) for e in content]


# ---- tool calls and reasoning, with fixture templates ----

# A compact Hermes-style template (the shape Qwen2.5 and Hermes use): tool
# calls as <tool_call>{json}</tool_call>, tool results as a "tool" turn.
HERMES = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' and m.tool_calls -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- for tc in m.tool_calls -%}"
    "{{- '<tool_call>{\"name\": \"' + tc.function.name + '\", \"arguments\": ' + (tc.function.arguments | tojson)"
    " + '}</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def weather_shot(city, result, call_id):
    return [
        {"role": "user", "content": f"Weather in {city}?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps({"city": city})}}]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
        {"role": "assistant", "content": f"It is {result} in {city}."},
    ]


@pytest.fixture(scope="module")
def template_dir():
    with tempfile.TemporaryDirectory() as d:
        yield pathlib.Path(d)


def test_tool_call_round_trip(template_dir):
    t = template_dir / "hermes.jinja"
    t.write_text(HERMES)
    s = Server("--chat-template-file", t, "--parallel", 1)
    try:
        c = s.client()
        msgs = ([{"role": "system", "content": "You can call get_weather."}]
                + weather_shot("London", "15C", "call_1") + weather_shot("Berlin", "9C", "call_2")
                + [{"role": "user", "content": "Weather in Paris?"}])
        r = c.chat.completions.create(model="m", messages=msgs, tools=TOOLS, max_tokens=30, temperature=0)
        ch = r.choices[0]
        assert ch.finish_reason == "tool_calls", ch
        assert ch.message.content is None
        (call,) = ch.message.tool_calls
        assert call.type == "function" and call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        assert call.id.startswith("call_")
        # the same, streamed: one tool_calls delta, finish_reason tool_calls
        chunks = list(c.chat.completions.create(model="m", messages=msgs, tools=TOOLS, max_tokens=30,
                                                temperature=0, stream=True))
        deltas = [tc for x in chunks if x.choices and x.choices[0].delta.tool_calls for tc in x.choices[0].delta.tool_calls]
        assert [(d.index, d.function.name, json.loads(d.function.arguments)) for d in deltas] == \
            [(0, "get_weather", {"city": "Paris"})]
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
        # the tool's result goes back in and the model continues from it
        msgs += [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                 {"role": "tool", "tool_call_id": call.id, "content": "18C"}]
        r2 = c.chat.completions.create(model="m", messages=msgs, tools=TOOLS, max_tokens=20, temperature=0)
        assert r2.choices[0].finish_reason == "stop"
        assert not r2.choices[0].message.tool_calls
        assert "18C" in r2.choices[0].message.content
        # tool_choice none: the tools are not offered and nothing is parsed
        r3 = c.chat.completions.create(model="m", messages=msgs[:-2], tools=TOOLS, tool_choice="none",
                                       max_tokens=30, temperature=0)
        assert not r3.choices[0].message.tool_calls and r3.choices[0].finish_reason != "tool_calls"
    finally:
        assert s.stop() == 0, s.output()


# A thinking template: earlier answers carry their reasoning in <think>, and
# the generation prompt opens <think> (as Qwen3 / DeepSeek-R1 templates do).
THINK = (
    "{%- for m in messages -%}"
    "{{- '<|im_start|>' + m.role + '\\n' -}}"
    "{%- if m.role == 'assistant' and m.reasoning_content -%}"
    "{{- '<think>\\n' + m.reasoning_content + '\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{{- m.content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n<think>\\n' -}}{%- endif -%}")


def test_reasoning_split(template_dir):
    t = template_dir / "think.jinja"
    t.write_text(THINK)
    s = Server("--chat-template-file", t, "--parallel", 1)
    try:
        c = s.client()
        shots = [("2+2?", "Two plus two.", "4"), ("3+3?", "Three plus three.", "6"), ("5+5?", "Five plus five.", "10")]
        msgs = []
        for q, why, a in shots:
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a, "reasoning_content": why}]
        msgs.append({"role": "user", "content": "4+4?"})
        r = c.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0)
        m = r.choices[0].message
        reasoning = m.model_extra.get("reasoning_content")
        # the raw text of the same prompt, split by hand
        prompt = ""
        for mm in msgs:
            prompt += f"<|im_start|>{mm['role']}\n"
            if mm.get("reasoning_content"):
                prompt += f"<think>\n{mm['reasoning_content']}\n</think>\n\n"
            prompt += f"{mm['content']}<|im_end|>\n"
        prompt += "<|im_start|>assistant\n<think>\n"
        raw = c.completions.create(model="m", prompt=prompt, max_tokens=16, temperature=0)
        assert raw.usage.prompt_tokens == r.usage.prompt_tokens
        text = raw.choices[0].text
        assert "</think>" in text, f"the model did not close its reasoning: {text!r}"
        before, after = text.split("</think>", 1)
        assert reasoning == before.lstrip()
        assert m.content == after.lstrip()
        assert "<think>" not in m.content and "</think>" not in m.content
        # streamed: reasoning deltas first, then content, the same texts
        chunks = list(c.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0, stream=True))
        rs = "".join(x.choices[0].delta.model_extra.get("reasoning_content") or "" for x in chunks if x.choices)
        cs = "".join(x.choices[0].delta.content or "" for x in chunks if x.choices)
        assert (rs, cs) == (reasoning, m.content)
    finally:
        assert s.stop() == 0, s.output()


# ---- admin routes ----

def test_models_health_stats_metrics(server):
    c = server.client()
    models = c.models.list().data
    assert [m.id for m in models] == ["SmolLM2-135M-Instruct.Q4_1"]
    assert models[0].max_model_len == 4096 and models[0].root == models[0].id  # vLLM's fields
    assert c.models.retrieve(models[0].id).id == models[0].id
    with pytest.raises(openai.NotFoundError):
        c.models.retrieve("no-such-model")
    assert server.get("/health")[:2] == (200, '{"status":"ok"}')
    st = server.stats()
    assert st["state"] == "ready" and st["uptime_s"] > 0
    assert st["requests"]["ok"] >= 1 and st["tokens"]["completion"] >= 1
    assert {"running", "waiting"} <= st["queue"].keys() and "prefix_hits" in st["cache"]
    status, text, headers = server.get("/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    assert samples['hearth_requests_total{outcome="ok"}'] >= 1
    assert samples["hearth_ready"] == 1
    # a CPU engine reads each step's tokens before it issues the next (steps ahead are a device engine's)
    assert samples["hearth_engine_steps_total"] >= 1 and samples["hearth_engine_steps_ahead_total"] == 0
    assert st["engine"]["steps_ahead"] == 0
    assert "# TYPE hearth_requests_total counter" in text
