"""/v1/embeddings through the official OpenAI SDK on the default model:
last-token pooling against llama.cpp's (tests/fixtures/smollm2/embed_golden.json,
tools/oracle/make_embed_golden.py), the same bits alone and in a batch, token
ids and text alike, float and base64 alike, usage, and the errors; llama-server's
own /embedding (its answer's shape, content or input) and embd_normalize."""
import json

import numpy as np
import pytest

from conftest import ROOT
from test_server import Server

GOLDEN = json.loads((ROOT / "tests/fixtures/smollm2/embed_golden.json").read_text())


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 4)
    yield s
    assert s.stop() == 0, s.output()


def embed(server, inp, **kw):
    return server.client().embeddings.create(model="m", input=inp, **kw)


def test_matches_llama_cpp(server):
    texts = [c["text"] for c in GOLDEN["cases"]]
    r = embed(server, texts)
    assert [d.index for d in r.data] == list(range(len(texts)))
    assert r.usage.prompt_tokens == r.usage.total_tokens == sum(len(c["prompt_ids"]) for c in GOLDEN["cases"])
    for d, c in zip(r.data, GOLDEN["cases"]):
        got, want = np.array(d.embedding), np.array(c["embedding"])
        assert got.shape == want.shape == (576,)
        assert abs(np.linalg.norm(got) - 1) < 1e-5
        cos = float(got @ want)
        # two implementations of a Q4_1 model (their logits agree to ~1e-2, test_parity.c)
        assert cos > 0.999 and np.abs(got - want).max() < 0.01, (c["text"], cos, np.abs(got - want).max())
    sims = np.array([d.embedding for d in r.data]) @ np.array([d.embedding for d in r.data]).T
    assert sims[0, 1] > sims[0, 2]  # the cat is nearer the feline than the revenue


def test_batch_invariant_ids_and_formats(server):
    texts = [c["text"] for c in GOLDEN["cases"]]
    batch = [d.embedding for d in embed(server, texts + [texts[0]]).data]
    alone = embed(server, texts[0]).data[0].embedding
    assert alone == batch[0] == batch[-1]  # bit for bit, whatever runs beside it
    ids = embed(server, [GOLDEN["cases"][0]["prompt_ids"]]).data[0].embedding
    assert ids == alone
    assert embed(server, texts[0], encoding_format="float").data[0].embedding == alone


@pytest.mark.parametrize("body, param", [
    ({}, "input"),
    ({"input": ""}, "input"),
    ({"input": ["a", 5]}, "input"),
    ({"input": "a", "encoding_format": "hex"}, "encoding_format"),
    ({"input": "a", "dimensions": 64}, "dimensions"),
    ({"input": [[1, -2]]}, "input"),
])
def test_errors_name_the_field(server, body, param):
    status, text, _ = server.post("/v1/embeddings", {"model": "m", **body})
    assert status == 400 and json.loads(text)["error"]["param"] == param, text


def native(server, body, path="/embedding"):
    status, text, _ = server.post(path, body)
    assert status == 200, text
    return json.loads(text)


def test_llama_server_route_answers_in_its_shape(server):
    texts = [c["text"] for c in GOLDEN["cases"]]
    want = [d.embedding for d in embed(server, texts).data]
    got = native(server, {"input": texts})
    # llama-server's shape: a list of {"index", "embedding": [[...]]} (one pooled vector each)
    assert [sorted(d) for d in got] == [["embedding", "index"]] * len(texts)
    assert [d["index"] for d in got] == list(range(len(texts)))
    assert [d["embedding"] for d in got] == [[w] for w in want]
    assert native(server, {"content": texts[0]}, "/embeddings") == [{"index": 0, "embedding": [want[0]]}]
    status, text, _ = server.post("/embedding", {})
    assert status == 400 and '"input" or "content"' in json.loads(text)["error"]["message"]


@pytest.mark.parametrize("path", ["/embedding", "/v1/embeddings"])
def test_embd_normalize(server, path):
    def vec(norm):
        body = {"input": GOLDEN["cases"][1]["text"], "embd_normalize": norm}
        if path == "/embedding":
            return np.array(native(server, body)[0]["embedding"][0])
        return np.array(json.loads(server.post(path, body)[1])["data"][0]["embedding"])

    raw = vec(-1)
    assert np.linalg.norm(raw) > 2  # the hidden state as it is, not unit length
    np.testing.assert_allclose(vec(2), raw / np.linalg.norm(raw), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(vec(2), GOLDEN["cases"][1]["embedding"], atol=0.01)  # llama.cpp's, as above
    assert abs(np.abs(vec(0)).max() - 32760) < 0.05  # llama.cpp's int16 range
    assert abs(np.abs(vec(1)).sum() - 1) < 1e-5
    assert abs((np.abs(vec(3)) ** 3).sum() - 1) < 1e-4
    status, text, _ = server.post(path, {"input": "a", "embd_normalize": "l2"})
    assert status == 400 and json.loads(text)["error"]["param"] == "embd_normalize"


def test_truncate_prompt_tokens_keeps_the_last_tokens(server):
    ids = GOLDEN["cases"][2]["prompt_ids"]
    cut = embed(server, GOLDEN["cases"][2]["text"], extra_body={"truncate_prompt_tokens": 5})
    assert cut.usage.prompt_tokens == 5
    assert cut.data[0].embedding == embed(server, [ids[-5:]]).data[0].embedding
    assert cut.data[0].embedding != embed(server, [ids]).data[0].embedding
    status, text, _ = server.post("/v1/embeddings", {"input": "a", "priority": 1})
    assert status == 400 and json.loads(text)["error"]["param"] == "priority"  # no --scheduling-policy priority
