"""Pausing generation (vLLM's POST /pause?mode=keep, POST /resume, GET
/is_paused): while paused no token comes out, requests in flight are kept and
go on after the resume with the same greedy text, new requests wait, and the
modes hearth does not have are refused by name."""
import json
import signal
import threading
import time

import pytest

from test_server import SLOW, Server

PROMPT = "Write a long story about a lighthouse keeper and the sea."


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    assert s.stop() == 0, s.output()


def stream_in_thread(server, n, times, texts, usage=None):
    """Stream n tokens; the arrival time and text of each chunk that brings text (a chunk can bring more
    than one token's: the text of a token that ends inside a character waits for the next)."""
    def run():
        st = server.client().completions.create(model="m", prompt=PROMPT, max_tokens=n, temperature=0, stream=True,
                                                stream_options={"include_usage": True},
                                                extra_body={"ignore_eos": True})
        for chunk in st:
            if chunk.choices and chunk.choices[0].text:
                times.append(time.monotonic())
                texts.append(chunk.choices[0].text)
            if chunk.usage and usage is not None:
                usage.append(chunk.usage.completion_tokens)
    t = threading.Thread(target=run)
    t.start()
    return t


def paused(server):
    st, body, _ = server.get("/is_paused")
    assert st == 200, body
    return json.loads(body)["is_paused"]


def post(server, path):
    st, body, _ = server.post(path, b"")
    return st, json.loads(body)


def test_pause_keeps_requests_in_flight(server):
    n = 300
    want = server.client().completions.create(model="m", prompt=PROMPT, max_tokens=n, temperature=0,
                                              extra_body={"ignore_eos": True}).choices[0].text
    assert not paused(server)
    times, texts, usage = [], [], []
    t = stream_in_thread(server, n, times, texts, usage)
    deadline = time.monotonic() + 30
    while len(times) < 5 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert post(server, "/pause?mode=keep") == (200, {"status": "paused"})
    t_pause = time.monotonic()
    assert paused(server)
    stats = server.stats()
    assert stats["engine"]["paused"] is True and stats["queue"]["running"] == 1
    assert "hearth_paused 1" in server.get("/metrics")[1]
    time.sleep(0.3 * SLOW)  # a step that was running when the pause came hands its token out
    seen = len(times)
    time.sleep(1.0)
    assert len(times) == seen, "tokens came out while paused"
    assert 0 < len("".join(texts[:seen])) < len(want)
    assert post(server, "/resume") == (200, {"status": "resumed"})
    t.join(60)
    assert not t.is_alive()
    assert "".join(texts) == want
    assert usage == [n] and times[seen] - t_pause >= 1.3
    assert not paused(server) and "hearth_paused 0" in server.get("/metrics")[1]


def test_a_request_made_while_paused_waits(server):
    assert post(server, "/pause")[0] == 200  # keep is the mode hearth has, so it needs no naming
    times, texts, usage = [], [], []
    t = stream_in_thread(server, 8, times, texts, usage)
    time.sleep(0.8)
    assert times == [] and t.is_alive()
    assert server.stats()["queue"]["running"] == 1  # admitted to a slot, not run
    assert post(server, "/resume")[0] == 200
    t.join(60)
    assert usage == [8] and texts


def test_modes_hearth_does_not_have_are_refused(server):
    for mode in ("abort", "wait"):
        st, body = post(server, f"/pause?mode={mode}")
        assert st == 400
        assert body["error"]["param"] == "mode" and mode in body["error"]["message"]
    assert not paused(server)
    assert post(server, "/resume") == (200, {"status": "resumed"})  # resuming what runs is no error
    st, _, _ = server.request("GET", "/pause")
    assert st == 405


def test_shutdown_resumes_to_drain():
    """SIGTERM drains what runs: a request kept by a pause finishes rather than waiting out the drain."""
    s = Server("--drain-timeout", 30)
    try:
        assert post(s, "/pause")[0] == 200
        times, texts, usage = [], [], []
        t = stream_in_thread(s, 8, times, texts, usage)
        deadline = time.monotonic() + 30
        while s.stats()["queue"]["running"] != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        t.join(60)
        assert usage == [8] and time.monotonic() - t0 < 10 * SLOW
    finally:
        assert s.stop() == 0, s.output()


def test_slots_show_what_runs():
    """llama-server's GET /slots: a request held by a pause is in its slot, processing, its prompt not yet
    computed, nothing decoded; the other slot is free; ?fail_on_no_slot=1 is a 503 once none is."""
    s = Server("--parallel", 2)
    try:
        st, body, _ = s.get("/slots")
        idle = json.loads(body)
        assert st == 200 and len(idle) == 2 and not any(x["is_processing"] for x in idle)
        assert idle[0]["n_ctx"] > 0 and idle[0]["next_token"][0]["n_decoded"] == 0
        assert s.get("/slots?fail_on_no_slot=1")[0] == 200
        assert post(s, "/pause")[0] == 200
        threads = []
        for k in range(2):
            times, texts, usage = [], [], []
            threads.append((stream_in_thread(s, 8, times, texts, usage), usage))
            deadline = time.monotonic() + 30
            while s.stats()["queue"]["running"] != k + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            slots = json.loads(s.get("/slots")[1])
            busy = [x for x in slots if x["is_processing"]]
            assert len(busy) == k + 1, slots
            b = busy[-1] if k == 0 else max(busy, key=lambda x: x["id_task"])
            assert b["n_prompt_tokens"] > 0 and b["n_prompt_tokens_processed"] == 0
            assert b["next_token"][0] == {"has_next_token": True, "has_new_line": False, "n_remain": 8,
                                          "n_decoded": 0}
        assert len({x["id_task"] for x in slots}) == 2
        st, body, _ = s.get("/slots?fail_on_no_slot=1")
        assert st == 503 and json.loads(body)["error"]["code"] == "no_slot_available"
        assert post(s, "/resume")[0] == 200
        for t, usage in threads:
            t.join(60)
            assert usage == [8]
        deadline = time.monotonic() + 10
        while any(x["is_processing"] for x in json.loads(s.get("/slots")[1])) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not any(x["is_processing"] for x in json.loads(s.get("/slots")[1]))
    finally:
        assert s.stop() == 0, s.output()
