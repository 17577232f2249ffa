"""LoRA adapters loaded and unloaded while the server runs (`serve
--runtime-lora`), as vLLM's runtime LoRA updating serves them: POST
/v1/load_lora_adapter and /v1/unload_lora_adapter. A loaded adapter answers as
the same adapter given with --lora at start (hearth run --lora's greedy text);
an unload lets the requests already running with it finish with it; names and
memory slots come back, so loads and unloads can go on for ever."""
import json
import pathlib
import tempfile
import threading

import pytest

from conftest import DEFAULT_MODEL, run_hearth
from test_lora import complete, write_adapter
from test_server import Server

BASE = "SmolLM2-135M-Instruct.Q4_1"


@pytest.fixture(scope="module")
def adapters():
    with tempfile.TemporaryDirectory() as t:
        d = pathlib.Path(t)
        yield write_adapter(d / "one", 11), write_adapter(d / "two", 12), d


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 4, "--runtime-lora")
    yield s
    assert s.stop() == 0, s.output()


def load(server, name, path):
    return server.post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})


def unload(server, name):
    return server.post("/v1/unload_lora_adapter", {"lora_name": name})


def run_with(path, prompt="The capital of France is", n=24):
    r = run_hearth("run", DEFAULT_MODEL, prompt, "-n", n, "--temp", 0, "--lora", path)
    assert r.returncode == 0, r.stderr
    return r.stdout.rstrip("\n")


def models(server):
    return {m.id for m in server.client().models.list().data}


def test_the_routes_are_off_without_the_flag(adapters):
    s = Server()
    try:
        status, text, _ = load(s, "one", adapters[0])
        assert status == 404 and "--runtime-lora" in json.loads(text)["error"]["message"]
        assert unload(s, "one")[0] == 404
    finally:
        assert s.stop() == 0, s.output()


def test_a_loaded_adapter_answers_as_one_given_at_start(server, adapters):
    status, text, headers = load(server, "one", adapters[0])
    assert status == 200 and text == "Success: LoRA adapter 'one' added successfully.", text
    assert headers["Content-Type"].startswith("text/plain")
    assert models(server) == {BASE, "one"}
    r = complete(server, "one")
    assert r.model == "one"
    assert r.choices[0].text.rstrip("\n") == run_with(adapters[0])
    assert r.choices[0].text != complete(server, BASE).choices[0].text
    status, text, _ = unload(server, "one")
    assert status == 200 and text == "Success: LoRA adapter 'one' removed successfully."
    assert models(server) == {BASE}
    assert complete(server, "one").model == BASE  # any other name runs the base model


@pytest.mark.parametrize("body, status, needle", [
    ({"lora_path": "/x"}, 400, "'lora_name' is required"),
    ({"lora_name": "x"}, 400, "'lora_path' is required"),
    ({"lora_name": 3, "lora_path": "/x"}, 400, "'lora_name' must be a non-empty string"),
    ({"lora_name": "x", "lora_path": "/nonexistent/adapter"}, 404, "not a directory"),
    ({"lora_name": BASE, "lora_path": "/x"}, 400, "the served model's name"),
    ({"lora_name": "x" * 300, "lora_path": "/x"}, 400, "at most 255 bytes"),
])
def test_bad_loads_are_refused_by_name(server, body, status, needle):
    got, text, _ = server.post("/v1/load_lora_adapter", body)
    assert got == status and needle in json.loads(text)["error"]["message"], text
    assert models(server) == {BASE}


def test_a_bad_adapter_and_a_second_load_of_a_name_are_refused(server, adapters):
    bad = write_adapter(adapters[2] / "dora", 13, extra={"use_dora": True})
    status, text, _ = load(server, "dora", bad)
    assert status == 400 and "use_dora" in json.loads(text)["error"]["message"], text
    assert load(server, "one", adapters[0])[0] == 200
    status, text, _ = load(server, "one", adapters[1])
    assert status == 400 and "has already been loaded" in json.loads(text)["error"]["message"]
    assert unload(server, "one")[0] == 200
    status, text, _ = unload(server, "one")
    assert status == 404 and "cannot be found" in json.loads(text)["error"]["message"]


def test_an_unload_lets_running_requests_finish_with_the_adapter(server, adapters):
    want = run_with(adapters[0], "The capital of France is", 48)
    assert load(server, "one", adapters[0])[0] == 200
    got, first = [], threading.Event()

    def stream():
        for c in server.client().completions.create(model="one", prompt="The capital of France is", max_tokens=48,
                                                    temperature=0, stream=True):
            got.append(c.choices[0].text if c.choices else "")
            first.set()

    t = threading.Thread(target=stream)
    t.start()
    assert first.wait(60)
    assert server.post("/pause?mode=keep", None)[0] == 200  # the stream surely runs on past the unload
    try:
        assert unload(server, "one")[0] == 200
        assert models(server) == {BASE}
    finally:
        assert server.post("/resume", None)[0] == 200
    t.join(120)
    assert len(got) > 8 and "".join(got).rstrip("\n") == want, (got, want)


def test_a_name_reloaded_with_other_weights_shares_no_kv(server, adapters):
    prompt = "Once upon a time, " * 40
    assert load(server, "x", adapters[0])[0] == 200
    complete(server, "x", prompt, n=4)
    assert unload(server, "x")[0] == 200
    assert load(server, "x", adapters[1])[0] == 200
    r = complete(server, "x", prompt, n=12)
    assert not (r.usage.prompt_tokens_details and r.usage.prompt_tokens_details.cached_tokens)
    assert r.choices[0].text.rstrip("\n") == run_with(adapters[1], prompt, 12)
    assert unload(server, "x")[0] == 200


def test_loads_and_unloads_go_on_past_the_slots(server, adapters):
    for i in range(20):  # 16 adapters at most at once
        assert load(server, f"a{i}", adapters[i % 2])[0] == 200
        assert unload(server, f"a{i}")[0] == 200
    for i in range(16):
        assert load(server, f"b{i}", adapters[i % 2])[0] == 200
    status, text, _ = load(server, "b16", adapters[0])
    assert status == 400 and "at most 16" in json.loads(text)["error"]["message"], text
    assert complete(server, "b15").model == "b15"
    for i in range(16):
        assert unload(server, f"b{i}")[0] == 200
    assert models(server) == {BASE}


def test_load_inplace_swaps_what_a_name_serves(server, adapters):
    assert load(server, "swap", adapters[0])[0] == 200
    assert complete(server, "swap").choices[0].text.rstrip("\n") == run_with(adapters[0])
    body = {"lora_name": "swap", "lora_path": str(adapters[1]), "load_inplace": True}
    status, text, _ = server.post("/v1/load_lora_adapter", body)
    assert status == 200, text
    assert complete(server, "swap").choices[0].text.rstrip("\n") == run_with(adapters[1])
    assert sorted(models(server)) == sorted({BASE, "swap"})
    # a failed in-place load leaves the adapter that was there
    status, text, _ = server.post("/v1/load_lora_adapter", {**body, "lora_path": "/nonexistent/adapter"})
    assert status == 404
    assert complete(server, "swap").choices[0].text.rstrip("\n") == run_with(adapters[1])
    status, text, _ = server.post("/v1/load_lora_adapter", {**body, "load_inplace": "yes"})
    assert status == 400 and json.loads(text)["error"]["param"] == "load_inplace"
    assert unload(server, "swap")[0] == 200
    assert models(server) == {BASE}
