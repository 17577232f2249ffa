"""vLLM's priority scheduling (`serve --scheduling-policy priority`, the request's
"priority": lower first, then arrival): requests waiting for the one slot are
admitted in that order; without the policy a priority other than 0 is refused by
name, as vLLM refuses it."""
import json
import threading
import time

import pytest

from test_server import SLOW, Server


def complete(server, prompt, priority, done, n=4):
    r = server.client().completions.create(model="m", prompt=prompt, max_tokens=n, temperature=0,
                                           extra_body={"priority": priority})
    done.append((priority, time.monotonic(), r.choices[0].text))


def test_waiting_requests_go_by_priority():
    s = Server("--parallel", 1, "--scheduling-policy", "priority")
    try:
        assert s.post("/pause?mode=keep", None)[0] == 200
        done, threads = [], []
        for k, prio in enumerate([0, 5, 1, -3]):  # the first takes the slot; the others wait
            t = threading.Thread(target=complete, args=(s, f"Say {k}:", prio, done))
            t.start()
            threads.append(t)
            want_waiting = k  # one runs, k wait
            deadline = time.time() + 10 * SLOW
            while time.time() < deadline:
                q = s.stats()["queue"]
                if q["running"] == 1 and q["waiting"] == want_waiting:
                    break
                time.sleep(0.01)
            assert q["running"] == 1 and q["waiting"] == want_waiting, q
        assert s.post("/resume", None)[0] == 200
        for t in threads:
            t.join(60 * SLOW)
        assert [p for p, _, _ in sorted(done, key=lambda d: d[1])] == [0, -3, 1, 5]
        # a priority changes the order, not the answer
        alone = s.client().completions.create(model="m", prompt="Say 1:", max_tokens=4, temperature=0)
        assert alone.choices[0].text == next(t for p, _, t in done if p == 5)
    finally:
        s.post("/resume", None)
        assert s.stop() == 0, s.output()


def test_a_priority_needs_the_policy():
    s = Server()
    try:
        status, text, _ = s.post("/v1/completions", {"model": "m", "prompt": "Hi", "max_tokens": 2, "priority": 2})
        err = json.loads(text)["error"]
        assert status == 400 and err["param"] == "priority" and "--scheduling-policy" in err["message"]
        ok = s.post("/v1/completions", {"model": "m", "prompt": "Hi", "max_tokens": 2, "priority": 0})
        assert ok[0] == 200
        status, text, _ = s.post("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "Hi"}],
                                                          "priority": "high"})
        assert status == 400 and json.loads(text)["error"]["param"] == "priority"
    finally:
        assert s.stop() == 0, s.output()
