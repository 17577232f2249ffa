"""vLLM's and SageMaker's small routes: GET /version, /ping (GET or POST, the
health check), llama-server's /v1/health, and POST /invocations, which answers a
chat request, a completion or an embedding as its own route would."""
import json

import pytest

from test_server import Server


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 2, "--api-key", "k")
    yield s
    assert s.stop() == 0, s.output()


AUTH = {"Authorization": "Bearer k"}


def test_health_routes_and_version(server):
    for method in ("GET", "POST"):
        status, text, _ = server.request(method, "/ping", headers=AUTH)
        assert status == 200 and json.loads(text) == {"status": "ok"}
    assert server.get("/v1/health")[:2] == (200, '{"status":"ok"}')  # public, as /health
    status, text, _ = server.get("/version", headers=AUTH)
    assert status == 200 and json.loads(text)["version"]
    assert server.get("/version")[0] == 401


@pytest.mark.parametrize("route, body, pick", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8},
     lambda r: r["choices"][0]["message"]["content"]),
    ("/v1/completions", {"prompt": "The capital of France is", "max_tokens": 8}, lambda r: r["choices"][0]["text"]),
    ("/v1/embeddings", {"input": "hello"}, lambda r: r["data"][0]["embedding"]),
])
def test_invocations_answer_as_the_route(server, route, body, pick):
    body = {"model": "m", "temperature": 0, **body} if "input" not in body else {"model": "m", **body}
    direct = server.post(route, body, headers=AUTH)
    via = server.post("/invocations", body, headers=AUTH)
    assert direct[0] == via[0] == 200, via[1]
    assert pick(json.loads(via[1])) == pick(json.loads(direct[1]))


def test_invocations_without_a_kind_is_refused(server):
    status, text, _ = server.post("/invocations", {"model": "m"}, headers=AUTH)
    assert status == 400 and "messages" in json.loads(text)["error"]["message"]
    assert server.post("/invocations", {"prompt": "x"})[0] == 401
