"""POST /tokenize and /detokenize in vLLM's and llama-server's shapes,
against `hearth tokenize` (the CLI, itself checked against HF tokenizers
goldens) and the chat route's own prompt count. (The default model adds no
BOS; test_completion_prompt.c checks the special-token switch on a
vocabulary that does.)"""
import json

import pytest

from test_server import Server, token_ids

TEXT = "Hello world, the café is open."


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 1)
    yield s
    assert s.stop() == 0, s.output()


def tokenize(server, body):
    status, text, _ = server.post("/tokenize", body)
    assert status == 200, text
    return json.loads(text)


def test_tokenize_in_both_shapes(server):
    doc = tokenize(server, {"prompt": TEXT})  # vLLM's shape
    assert doc["tokens"] == token_ids(TEXT) and doc["count"] == len(doc["tokens"])
    assert doc["max_model_len"] == 4096
    assert tokenize(server, {"content": TEXT})["tokens"] == token_ids(TEXT, add_special=False)  # llama-server's
    assert tokenize(server, {"prompt": TEXT, "add_special_tokens": False})["tokens"] == \
        token_ids(TEXT, add_special=False)
    pieces = tokenize(server, {"content": TEXT, "with_pieces": True})["tokens"]
    assert [p["id"] for p in pieces] == token_ids(TEXT, add_special=False)
    assert "".join(p["piece"] for p in pieces) == TEXT


def test_tokenize_messages_is_the_chat_prompt(server):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": TEXT}]
    r = server.client().chat.completions.create(model="m", messages=msgs, max_tokens=1)
    assert tokenize(server, {"messages": msgs})["count"] == r.usage.prompt_tokens


def test_detokenize_round_trip(server):
    status, text, _ = server.post("/detokenize", {"tokens": token_ids(TEXT, add_special=False)})
    assert status == 200 and json.loads(text) == {"prompt": TEXT, "content": TEXT}


@pytest.mark.parametrize("route, body, param", [
    ("/tokenize", {}, "prompt"),
    ("/tokenize", {"prompt": 5}, "prompt"),
    ("/tokenize", {"messages": "x"}, "messages"),
    ("/detokenize", {"tokens": [1, -1]}, "tokens"),
    ("/detokenize", {"tokens": [10 ** 9]}, "tokens"),
    ("/detokenize", {}, "tokens"),
])
def test_errors_name_the_field(server, route, body, param):
    status, text, _ = server.post(route, body)
    assert status == 400 and json.loads(text)["error"]["param"] == param, text
