"""`hearth serve`: every refusal status, auth, the queue bound, client
disconnects, concurrency, loading and shutdown; `hearth chat`."""
import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import threading
import time

import openai
import pytest

from conftest import BIN, DEFAULT_MODEL, run_hearth
from test_server import SLOW, Server, chat


@pytest.fixture(scope="module")
def small():
    """A server with a small context and body limit, for the refusals."""
    s = Server("--ctx", 48, "--max-body", 4096, "--parallel", 2)
    yield s
    assert s.stop() == 0, s.output()


def error_of(status_body):
    status, body, _ = status_body
    return status, json.loads(body)["error"]


def test_refusals_before_any_header(small):
    c = small.client()
    # bad JSON
    st, e = error_of(small.post("/v1/chat/completions", b"{not json"))
    assert st == 400 and e["type"] == "invalid_request_error" and "JSON" in e["message"]
    assert set(e) == {"message", "type", "param", "code"}
    # a bad field is named
    with pytest.raises(openai.BadRequestError) as ex:
        chat(c, "hi", temperature=5)
    assert ex.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as ex:
        c.chat.completions.create(model="m", messages=[{"role": "user"}])
    assert ex.value.body["param"] == "messages"
    with pytest.raises(openai.BadRequestError) as ex:
        chat(c, "hi", n=65)
    assert ex.value.body["param"] == "n" and "64" in ex.value.body["message"]
    with pytest.raises(openai.BadRequestError) as ex:
        chat(c, "hi", response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}}})
    assert ex.value.body["param"] == "response_format" and "'pattern' is not supported" in ex.value.body["message"]
    with pytest.raises(openai.BadRequestError) as ex:
        c.completions.create(model="m", prompt=[1, 2, 10 ** 9], max_tokens=2)
    assert ex.value.body["param"] == "prompt" and "vocabulary" in ex.value.body["message"]
    with pytest.raises(openai.BadRequestError) as ex:
        c.completions.create(model="m", prompt="x", max_tokens=2, logit_bias={"999999": 5})
    assert ex.value.body["param"] == "logit_bias"
    # the prompt does not fit the context
    with pytest.raises(openai.BadRequestError) as ex:
        c.completions.create(model="m", prompt="word " * 200, max_tokens=2)
    assert ex.value.body["code"] == "context_length_exceeded" and ex.value.body["param"] == "prompt"
    # unknown route, wrong method
    st, e = error_of(small.get("/v1/nothing"))
    assert st == 404 and e["code"] == "not_found"
    st, e = error_of(small.get("/v1/chat/completions"))
    assert st == 405
    # body too large
    st, e = error_of(small.post("/v1/completions", {"prompt": "x" * 5000, "max_tokens": 1}))
    assert st == 413 and "4096" in e["message"]
    # all counted
    codes = small.stats()["requests"]["by_status"]
    assert codes["400"] >= 8 and codes["404"] >= 1 and codes["405"] >= 1 and codes["413"] >= 1
    assert small.get("/health")[0] == 200  # the server is fine afterwards


def test_max_tokens_clamped_to_the_room_left(small):
    c = small.client()
    r = c.completions.create(model="m", prompt="one two three", max_tokens=5000, temperature=0,
                             extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens + r.usage.completion_tokens == 48


def test_api_key():
    s = Server("--api-key", "sekrit", "--parallel", 1)
    try:
        assert s.get("/health")[0] == 200  # health is open
        st, e = error_of(s.get("/v1/models"))
        assert st == 401 and e["code"] == "invalid_api_key"
        st, e = error_of(s.get("/stats", headers={"Authorization": "Bearer wrong"}))
        assert st == 401
        with pytest.raises(openai.AuthenticationError):
            s.client("wrong").models.list()
        with pytest.raises(openai.AuthenticationError):
            chat(s.client("sekri"), "hi", max_tokens=1)
        r = chat(s.client("sekrit"), "hi", max_tokens=2)
        assert r.choices[0].message.content is not None
        assert s.get("/metrics", headers={"Authorization": "Bearer sekrit"})[0] == 200
    finally:
        assert s.stop() == 0, s.output()


def test_queue_full_is_429():
    s = Server("--parallel", 1, "--max-queue", 1)
    try:
        c = s.client()
        long_kw = dict(model="m", prompt="Once", max_tokens=4000, temperature=0, extra_body={"ignore_eos": True})
        running = c.completions.create(stream=True, **long_kw)
        next(iter(running))  # it holds the only slot
        waiting_done = threading.Event()

        def waiter():  # fills the one queue place
            try:
                c.completions.create(model="m", prompt="Hi", max_tokens=1)
            except openai.APIError:
                pass
            waiting_done.set()

        th = threading.Thread(target=waiter)
        th.start()
        deadline = time.time() + 10 * SLOW
        while s.stats()["queue"]["waiting"] < 1 and time.time() < deadline:
            time.sleep(0.01)
        with pytest.raises(openai.RateLimitError) as ex:
            c.completions.create(model="m", prompt="Hi", max_tokens=1)
        assert ex.value.body["code"] == "queue_full"
        assert ex.value.response.headers.get("Retry-After")
        running.close()  # frees the slot: the waiting one runs
        assert waiting_done.wait(30 * SLOW)
        th.join()
        assert s.stats()["requests"]["by_status"]["429"] == 1
    finally:
        assert s.stop() == 0, s.output()


@pytest.fixture
def roomy():
    """A server with the full context, so that a generation outlasts the test's steps."""
    s = Server("--parallel", 2)
    yield s
    assert s.stop() == 0, s.output()


def test_disconnect_cancels_within_a_second(roomy):
    small = roomy
    before = small.stats()
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 5000, "temperature": 0, "ignore_eos": True,
                       "stream": True}).encode()
    sock = socket.create_connection(("127.0.0.1", small.port))
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    got = b""
    while got.count(b"data: ") < 3:  # it is streaming
        got += sock.recv(65536)
    sock.close()
    t0 = time.time()
    while True:
        st = small.stats()
        if st["requests"]["client_disconnected"] > before["requests"]["client_disconnected"] and \
                st["engine"]["requests_cancelled"] > before["engine"]["requests_cancelled"] and \
                st["requests"]["active"] == 0:
            break
        assert time.time() - t0 < 1.0 * SLOW, f"not cancelled after {time.time() - t0:.2f} s: {st}"
        time.sleep(0.01)
    assert st["requests"]["cancelled"] == before["requests"]["cancelled"] + 1
    # tokens stopped: the engine's count no longer moves
    out = st["engine"]["tokens_out"]
    time.sleep(0.3)
    assert small.stats()["engine"]["tokens_out"] == out
    # the same for a client that leaves while waiting for a whole (non-streamed) answer
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 5000, "temperature": 0,
                       "ignore_eos": True}).encode()
    sock = socket.create_connection(("127.0.0.1", small.port))
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    while not small.stats()["requests"]["active"]:  # it is being served
        time.sleep(0.01)
    time.sleep(0.2)
    sock.close()
    t0 = time.time()
    while small.stats()["requests"]["client_disconnected"] < st["requests"]["client_disconnected"] + 1 or \
            small.stats()["requests"]["active"]:
        assert time.time() - t0 < 1.0 * SLOW, "a non-streamed request was not cancelled"
        time.sleep(0.01)


def test_sixteen_concurrent_clients():
    s = Server("--parallel", 4)
    try:
        c = s.client()
        prompts = [f"Fact number {i}:" for i in range(16)]
        kw = dict(model="m", max_tokens=6, temperature=0, extra_body={"ignore_eos": True})
        alone = [c.completions.create(prompt=p, **kw).choices[0].text for p in prompts]

        def one(i):
            if i % 2:  # half of them streamed
                return "".join(ch.choices[0].text for ch in c.completions.create(prompt=prompts[i], stream=True, **kw)
                               if ch.choices)
            return c.completions.create(prompt=prompts[i], **kw).choices[0].text

        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            together = list(ex.map(one, range(16)))
        assert together == alone
        st = s.stats()
        assert st["requests"]["ok"] == 32 and st["requests"]["active"] == 0
    finally:
        assert s.stop() == 0, s.output()


def test_sigterm_while_streaming_drains_then_exits_0():
    s = Server("--parallel", 2, "--drain-timeout", 60)
    c = s.client()
    stream = c.completions.create(model="m", prompt="Once upon a time", max_tokens=80, temperature=0,
                                  stream=True, extra_body={"ignore_eos": True})
    it = iter(stream)
    first = next(it)
    s.proc.send_signal(signal.SIGTERM)
    while s.get("/health")[0] != 503:  # admission stops at once
        time.sleep(0.005)
    st, e = error_of(s.post("/v1/completions", {"prompt": "x", "max_tokens": 1}))
    assert st == 503 and e["code"] == "server_shutting_down"
    rest = list(it)  # the running stream still finishes, whole
    texts = [first.choices[0].text] + [x.choices[0].text for x in rest if x.choices]
    assert rest[-1].choices[0].finish_reason == "length"
    assert len("".join(texts)) > 0
    assert s.stop() == 0, s.output()
    assert "stopped" in s.output()


def test_sigterm_past_the_drain_bound_cancels_and_exits_0():
    s = Server("--parallel", 1, "--drain-timeout", 0.3)
    c = s.client()
    stream = c.completions.create(model="m", prompt="Once upon a time", max_tokens=5000, temperature=0,
                                  stream=True, extra_body={"ignore_eos": True})
    it = iter(stream)
    next(it)
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    with pytest.raises(openai.APIError) as ex:  # the stream ends with an error event
        for _ in it:
            pass
    assert "shutting down" in str(ex.value)
    assert s.stop() == 0, s.output()
    assert time.time() - t0 < 10 * SLOW


def test_loading_is_503_then_ready():
    s = Server("--parallel", 1, env={"HEARTH_SERVE_TEST_LOAD_DELAY_MS": "1500"}, wait=False)
    try:
        deadline = time.time() + 10
        while True:  # the port answers at once, before the model is in
            try:
                st, body, _ = s.get("/health")
                break
            except OSError:
                assert time.time() < deadline
                time.sleep(0.01)
        assert st == 503 and json.loads(body)["error"]["code"] == "model_loading"
        st, e = error_of(s.post("/v1/completions", {"prompt": "x", "max_tokens": 1}))
        assert st == 503 and e["code"] == "model_loading"
        assert s.stats()["state"] == "loading"
        st, e = error_of(s.get("/v1/models"))  # no adapters' table yet: a 503, not a crash
        assert st == 503 and e["code"] == "model_loading"
        s.wait_ready()
        assert s.client().models.list().data[0].max_model_len > 0
        assert s.get("/health")[0] == 200
    finally:
        assert s.stop() == 0, s.output()


def test_serve_start_errors():
    r = run_hearth("serve", "/no/such/model.gguf", "--port", "0")
    assert r.returncode == 1 and "/no/such/model.gguf" in r.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        r = run_hearth("serve", DEFAULT_MODEL, "--port", busy.getsockname()[1])
    assert r.returncode == 1 and "Address already in use" in r.stderr
    r = run_hearth("serve", "--port", "70000")
    assert r.returncode == 2
    r = run_hearth("serve", "--bogus")
    assert r.returncode == 2 and "--bogus" in r.stderr
    # a step must hold a decode row of every sequence
    r = run_hearth("serve", DEFAULT_MODEL, "--port", "0", "--batch", 3, "--max-batch", 4)
    assert r.returncode == 1 and "4 sequences at once need steps of at least 4 tokens, and a step holds 3" in r.stderr
    r = run_hearth("bench", DEFAULT_MODEL, "--parallel", 8, "--batch", 4, "--prompt", 8, "--gen", 2)
    assert r.returncode != 0 and "raise --batch or lower --max-batch" in r.stderr


def test_chat_verb_keeps_history_and_resets():
    p = subprocess.run([BIN, "chat", DEFAULT_MODEL, "--temp", "0", "--max-tokens", "12"],
                       input="My name is Ada. Say hi.\nWhat is my name?\n/reset\nHi\n/quit\nnever read\n",
                       capture_output=True, text=True, timeout=120 * SLOW)
    assert p.returncode == 0, p.stderr
    answers = [a for a in p.stdout.split("\n") if a.strip()]
    assert len(answers) >= 3
    assert "(history cleared)" in p.stderr
    assert "never read" not in p.stdout


def test_settings_precedence_request_over_server_flags():
    s = Server("--parallel", 1, "--temp", "0", "--max-tokens", "3")
    try:
        c = s.client()
        kw = dict(model="m", prompt="Once upon a time", extra_body={"ignore_eos": True})
        flags = c.completions.create(**kw)  # the server's defaults: greedy, 3 tokens
        assert flags.usage.completion_tokens == 3
        greedy = c.completions.create(temperature=0, max_tokens=3, **kw)
        assert flags.choices[0].text == greedy.choices[0].text
        assert c.completions.create(max_tokens=5, **kw).usage.completion_tokens == 5  # the request wins
        hot = {c.completions.create(temperature=1.5, seed=i, **kw).choices[0].text for i in range(4)}
        assert hot != {greedy.choices[0].text}  # and its temperature too
    finally:
        assert s.stop() == 0, s.output()


def test_queued_stream_outlives_the_idle_timeout():
    """A stream that waits in the queue after its first event (silent for
    longer than the idle timeout) is not cut by it."""
    s = Server("--parallel", 1, "--idle-timeout", 1)
    try:
        c = s.client()
        holder = c.completions.create(model="m", prompt="Once", max_tokens=4000, temperature=0, stream=True,
                                      extra_body={"ignore_eos": True})
        next(iter(holder))  # holds the only slot
        done = []

        def queued():
            chunks = list(chat(c, "Hi", max_tokens=3, temperature=0, stream=True))
            done.append(chunks[-1].choices[0].finish_reason)

        th = threading.Thread(target=queued)
        th.start()
        time.sleep(2.5)  # the queued stream has sent its role chunk and is silent
        holder.close()
        th.join(60 * SLOW)
        assert done and done[0] in ("stop", "length")
    finally:
        assert s.stop() == 0, s.output()
