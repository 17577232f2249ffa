"""Scores and reranking from embeddings on the default model: vLLM's /score and
the rerank routes (vLLM's /rerank, /v1/rerank, /v2/rerank; llama-server's
/reranking, /v1/reranking) through Cohere's official SDK and by hand. A score
is the cosine of the two texts' embeddings, checked against llama.cpp's
embeddings (tests/fixtures/smollm2/embed_golden.json) and against hearth's own
/v1/embeddings; then the order, top_n, truncation, usage and the errors."""
import json

import cohere
import numpy as np
import pytest

from conftest import ROOT
from test_server import Server

GOLDEN = json.loads((ROOT / "tests/fixtures/smollm2/embed_golden.json").read_text())
TEXTS = [c["text"] for c in GOLDEN["cases"]]
QUERY, DOCS = TEXTS[0], TEXTS[1:]  # the cat; the feline, the revenue, the code


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 4)
    yield s
    assert s.stop() == 0, s.output()


def post(server, path, body, status=200):
    got, text, _ = server.post(path, body)
    assert got == status, text
    return json.loads(text)


def embeddings(server, texts):
    return np.array([d["embedding"] for d in post(server, "/v1/embeddings", {"input": texts})["data"]])


def test_scores_are_cosines_of_the_embeddings(server):
    r = post(server, "/score", {"model": "m", "text_1": QUERY, "text_2": DOCS})
    assert r["object"] == "list" and r["id"].startswith("score-")
    assert [(d["index"], d["object"]) for d in r["data"]] == [(i, "score") for i in range(len(DOCS))]
    got = np.array([d["score"] for d in r["data"]])
    e = embeddings(server, TEXTS)
    np.testing.assert_allclose(got, e[1:] @ e[0], rtol=0, atol=1e-6)  # the same bits as /v1/embeddings'
    g = np.array([c["embedding"] for c in GOLDEN["cases"]])
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    np.testing.assert_allclose(got, g[1:] @ g[0], rtol=0, atol=0.01)  # llama.cpp's embeddings (see test_embeddings)
    assert got[0] > got[1]  # the feline is nearer the cat than the revenue is
    assert r["usage"]["prompt_tokens"] == r["usage"]["total_tokens"] == sum(len(c["prompt_ids"])
                                                                           for c in GOLDEN["cases"])


def test_score_pairs_one_to_one_and_n_to_n(server):
    n_n = post(server, "/v1/score", {"text_1": [QUERY, DOCS[0]], "text_2": [DOCS[0], DOCS[1]]})["data"]
    one = post(server, "/score", {"text_1": QUERY, "text_2": DOCS[0]})["data"]
    other = post(server, "/score", {"text_1": DOCS[0], "text_2": DOCS[1]})["data"]
    assert [d["score"] for d in n_n] == [one[0]["score"], other[0]["score"]]
    body = {"text_1": [QUERY, DOCS[0]], "text_2": DOCS}
    assert post(server, "/score", body, 400)["error"]["param"] == "text_2"


def test_cohere_sdk_reranks_best_first(server):
    co = cohere.ClientV2(api_key="none", base_url=server.url, timeout=120)
    scores = [d["score"] for d in post(server, "/score", {"text_1": QUERY, "text_2": DOCS})["data"]]
    r = co.rerank(model="m", query=QUERY, documents=DOCS)
    assert [x.index for x in r.results] == sorted(range(len(DOCS)), key=lambda i: -scores[i])
    assert [x.relevance_score for x in r.results] == sorted(scores, reverse=True)
    assert r.results[0].index == 0  # the feline
    top = co.rerank(model="m", query=QUERY, documents=DOCS, top_n=2)
    assert [x.index for x in top.results] == [x.index for x in r.results[:2]]


@pytest.mark.parametrize("path", ["/rerank", "/v1/rerank", "/v2/rerank", "/reranking", "/v1/reranking",
                                  "/invocations"])
def test_rerank_routes_answer_alike(server, path):
    want = post(server, "/rerank", {"query": QUERY, "documents": DOCS})
    assert want["id"].startswith("rerank-") and want["object"] == "list"
    assert [sorted(x) for x in want["results"]] == [["document", "index", "relevance_score"]] * len(DOCS)
    assert [DOCS[x["index"]] for x in want["results"]] == [x["document"]["text"] for x in want["results"]]
    got = post(server, path, {"query": QUERY, "documents": DOCS})
    assert got["results"] == want["results"] and got["usage"] == want["usage"]
    jina = post(server, path, {"query": QUERY, "documents": [{"text": d} for d in DOCS], "top_n": 1})
    assert jina["results"] == want["results"][:1]


def test_rerank_fields_of_llama_server_and_jina(server):
    want = post(server, "/rerank", {"query": QUERY, "documents": DOCS})["results"]
    texts = post(server, "/reranking", {"query": QUERY, "texts": DOCS, "return_text": False})["results"]
    assert texts == [{"index": x["index"], "relevance_score": x["relevance_score"]} for x in want]
    bare = post(server, "/v1/rerank", {"query": QUERY, "documents": DOCS, "return_documents": False})["results"]
    assert bare == texts


def test_max_tokens_per_doc_keeps_the_first_tokens(server):
    # "The cat sat on the mat." is 7 tokens; its first 3 are "The cat sat"
    doc = TEXTS[0]
    cut = post(server, "/v2/rerank", {"query": DOCS[1], "documents": [doc], "max_tokens_per_doc": 3})
    whole = post(server, "/v2/rerank", {"query": DOCS[1], "documents": [doc], "max_tokens_per_doc": 7})
    short = post(server, "/score", {"text_1": DOCS[1], "text_2": "The cat sat"})
    full = post(server, "/score", {"text_1": DOCS[1], "text_2": doc})
    assert cut["results"][0]["relevance_score"] == short["data"][0]["score"]
    assert whole["results"][0]["relevance_score"] == full["data"][0]["score"] != short["data"][0]["score"]
    assert cut["results"][0]["document"]["text"] == doc  # the answer names the document as it was given
    assert cut["usage"]["total_tokens"] == len(GOLDEN["cases"][2]["prompt_ids"]) + 3


def test_truncate_prompt_tokens_keeps_the_last_tokens(server):
    r = post(server, "/score", {"text_1": QUERY, "text_2": DOCS, "truncate_prompt_tokens": 4})
    assert r["usage"]["prompt_tokens"] == 4 * len(TEXTS)


@pytest.mark.parametrize("path, body, param", [
    ("/rerank", {"documents": DOCS}, "query"),
    ("/rerank", {"query": 5, "documents": DOCS}, "query"),
    ("/rerank", {"query": QUERY}, "documents"),
    ("/rerank", {"query": QUERY, "documents": []}, "documents"),
    ("/rerank", {"query": QUERY, "documents": "one"}, "documents"),
    ("/rerank", {"query": QUERY, "documents": ["a", 5]}, "documents"),
    ("/rerank", {"query": QUERY, "documents": [""]}, "documents"),
    ("/rerank", {"query": "", "documents": DOCS}, "query"),
    ("/rerank", {"query": QUERY, "documents": DOCS, "top_n": -1}, "top_n"),
    ("/rerank", {"query": QUERY, "documents": DOCS, "max_tokens_per_doc": 0}, "max_tokens_per_doc"),
    ("/rerank", {"query": QUERY, "documents": DOCS, "return_documents": "yes"}, "return_documents"),
    ("/rerank", {"query": QUERY, "documents": DOCS, "model": 3}, "model"),
    ("/score", {"text_2": DOCS}, "text_1"),
    ("/score", {"text_1": QUERY}, "text_2"),
    ("/score", {"text_1": [], "text_2": DOCS}, "text_1"),
    ("/score", {"text_1": QUERY, "text_2": DOCS, "truncate_prompt_tokens": 0}, "truncate_prompt_tokens"),
])
def test_errors_name_the_field(server, path, body, param):
    err = post(server, path, body, 400)["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error", err
