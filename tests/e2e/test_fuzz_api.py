"""Malformed request bodies against every JSON route (completions, messages,
responses, embeddings, rerank, score, tokenize; the chat seed carries a JSON Schema): each answer is a
200 or a 4xx whose body says what is wrong in the route's own error shape,
and the server stays up. The bodies are valid requests with fields replaced
by values of every JSON type, dropped, nested or duplicated, from a fixed
seed, so a failure replays. Under `make asan` this runs on the sanitized
binary, where a bad read in a parser fails the run."""
import json
import random

import pytest

from test_server import Server

ROUTES = {
    "/v1/chat/completions": {"model": "m", "max_tokens": 2, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": "Hello", "reasoning_content": "hm"}, {"role": "user", "content": "Go on"}],
        "stop": ["x"], "logprobs": True, "top_logprobs": 2, "logit_bias": {"5": 1},
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "required": ["a"], "additionalProperties": False, "properties": {
                "a": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "b": {"type": "array", "items": {"$ref": "#/$defs/B"}}},
            "$defs": {"B": {"enum": ["x", True, None]}}}}},
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
    "/v1/completions": {"model": "m", "prompt": "Hello", "max_tokens": 2, "logprobs": 1, "stop": "x"},
    "/v1/messages": {"model": "m", "max_tokens": 2, "system": [{"type": "text", "text": "Be brief."}],
                     "stop_sequences": ["x"], "thinking": {"type": "enabled", "budget_tokens": 1024},
                     "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "auto"},
                     "messages": [
                         {"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": ""},
                                                           {"type": "tool_use", "id": "t1", "name": "f",
                                                            "input": {"a": 1}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                       "content": [{"type": "text", "text": "ok"}]},
                                                      {"type": "text", "text": "Go on"}]}]},
    "/completion": {"prompt": "def f(x):\n", "n_predict": 3, "n_indent": 4, "t_max_predict_ms": 500, "top_k": 40,
                    "samplers": ["top_k", "top_p", "infill"], "response_fields": ["content", "timings/prompt_n"],
                    "n_probs": 2, "stop": ["x"]},
    "/v1/messages/count_tokens": {"model": "m", "messages": [{"role": "user", "content": "Hi"}]},
    "/v1/embeddings": {"model": "m", "input": ["Hi", "there"], "encoding_format": "float"},
    "/embedding": {"content": ["Hi", "there"], "embd_normalize": 2},
    "/invocations": {"model": "m", "prompt": "Hello", "max_tokens": 2, "priority": 0},
    "/v2/rerank": {"model": "m", "query": "cat", "documents": ["a cat", {"text": "a dog"}], "top_n": 1,
                   "max_tokens_per_doc": 4, "return_documents": True},
    "/score": {"model": "m", "text_1": ["a", "b"], "text_2": ["c", "d"], "truncate_prompt_tokens": 3},
    "/tokenize": {"model": "m", "prompt": "Hi", "add_special_tokens": True, "with_pieces": True},
    "/detokenize": {"model": "m", "tokens": [1, 2, 3]},
    "/v1/responses": {"model": "m", "max_output_tokens": 2, "instructions": "Be brief.",
                      "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
                      "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
                                {"type": "reasoning", "summary": [], "content": [
                                    {"type": "reasoning_text", "text": "hm"}]},
                                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                                {"type": "function_call_output", "call_id": "c1", "output": "ok"},
                                {"role": "user", "content": "Go on"}]},
}


def junk(rng, depth=0):
    pick = rng.randrange(9 if depth < 2 else 6)
    return [None, True, -1, 2 ** 63, 1.5e308, "", "\u00e9\U0001F600\u0000x", [], {},
            ][pick] if pick < 6 else [
        lambda: [junk(rng, depth + 1) for _ in range(rng.randrange(3))],
        lambda: {rng.choice(["type", "role", "content", "text", "name", "id"]): junk(rng, depth + 1)},
        lambda: "x" * rng.randrange(300),
    ][pick - 6]()


def paths(v, at=()):
    """Every (container, key) in a JSON value."""
    if isinstance(v, dict):
        for k in v:
            yield v, k
            yield from paths(v[k], at + (k,))
    elif isinstance(v, list):
        for i in range(len(v)):
            yield v, i
            yield from paths(v[i], at + (i,))


def mutate(rng, body):
    b = json.loads(json.dumps(body))
    for _ in range(rng.randrange(1, 4)):
        spots = list(paths(b))
        if not spots:
            break
        box, key = rng.choice(spots)
        r = rng.random()
        if r < 0.6:
            box[key] = junk(rng)
        elif r < 0.8 and isinstance(box, dict):
            del box[key]
        elif isinstance(box, list):
            box.append(json.loads(json.dumps(box[key])))
        else:
            box[key] = [box[key]]
    return b


@pytest.fixture(scope="module")
def server():
    # a body that loses max_tokens generates to the server's default: capped, as a sampled run to the context
    # under ASan outlasts the client's timeout (it did, s44)
    s = Server("--parallel", 2, "--max-tokens", 64)
    yield s
    assert s.stop() == 0, s.output()


@pytest.mark.parametrize("route", list(ROUTES))
def test_mutated_bodies_get_named_errors(server, route):
    rng = random.Random(route)
    status, text, _ = server.post(route, ROUTES[route])
    assert status == 200, text  # the seed request itself is valid
    anthropic = route.startswith("/v1/messages")
    for n in range(120):
        body = mutate(rng, ROUTES[route])
        if rng.random() < 0.3 and route.startswith("/v1/") and "embeddings" not in route:
            body["stream"] = True
        status, text, _ = server.post(route, body)
        assert status in (200, 400), (n, body, status, text)
        if status == 400:
            doc = json.loads(text)
            err = doc["error"]
            assert err["message"] and err["type"] == "invalid_request_error", (body, doc)
            assert (doc.get("type") == "error") == anthropic, doc
    assert server.get("/health")[0] == 200


INFILL = {"input_prefix": "def add(a, b):\n", "input_suffix": "\nprint(add(1, 2))\n", "prompt": "    ",
          "input_extra": [{"filename": "u.py", "text": "X = 1\n"}, {"text": "Y = 2\n"}], "n_predict": 3,
          "n_indent": 4, "samplers": ["top_k", "top_p", "infill"], "response_fields": ["content", "timings/prompt_n"]}


def test_mutated_infill_bodies_get_named_errors():
    """The same for POST /infill, on a model with FIM tokens."""
    import pathlib
    s = Server("--parallel", 2, model=pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "infill" /
               "starcoder2-fim.gguf")
    try:
        rng = random.Random("/infill")
        status, text, _ = s.post("/infill", INFILL)
        assert status == 200, text
        for n in range(150):
            body = mutate(rng, INFILL)
            if rng.random() < 0.3:
                body["stream"] = True
            status, text, _ = s.post("/infill", body)
            assert status in (200, 400), (n, body, status, text)
            if status == 400:
                err = json.loads(text)["error"]
                assert err["message"], (n, body, text)
        assert s.get("/health")[0] == 200
    finally:
        assert s.stop() == 0, s.output()



def test_mutated_lora_admin_bodies_get_named_errors(tmp_path):
    """The same for the runtime adapter routes (serve --runtime-lora): mutated loads and unloads of a real
    adapter; each load that succeeds is unloaded again, so the slots never run out."""
    from test_lora import write_adapter
    d = str(write_adapter(tmp_path / "a", 9))
    s = Server("--parallel", 2, "--runtime-lora")
    try:
        rng = random.Random("lora")
        seeds = {"/v1/load_lora_adapter": {"lora_name": "a", "lora_path": d, "load_inplace": False},
                 "/v1/unload_lora_adapter": {"lora_name": "a"}}
        for n in range(160):
            route = rng.choice(list(seeds))
            body = mutate(rng, seeds[route])
            status, text, _ = s.post(route, body)
            assert status in (200, 400, 404), (n, route, body, status, text)
            if status != 200:
                err = json.loads(text)["error"]
                assert err["message"] and err["type"] == "invalid_request_error", (body, err)
            elif route == "/v1/load_lora_adapter":
                assert s.post("/v1/unload_lora_adapter", {"lora_name": body["lora_name"]})[0] == 200
        assert s.get("/health")[0] == 200
    finally:
        assert s.stop() == 0, s.output()
