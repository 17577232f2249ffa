"""/v1/embeddings through the official OpenAI SDK on the default model:
last-token pooling against llama.cpp's (tests/fixtures/smollm2/embed_golden.json,
tools/oracle/make_embed_golden.py), the same bits alone and in a batch, token
ids and text alike, float and base64 alike, usage, and the errors."""
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
