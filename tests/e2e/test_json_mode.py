"""JSON mode (response_format {"type": "json_object"}) through the OpenAI
SDK on the default model: every answer that ends by itself is one JSON
object (Python's json as the oracle), greedy and sampled, streamed the same
as whole, on /v1/chat/completions and /v1/responses; a thinking prompt is
refused by name."""
import json

import pytest

from test_server import THINK, Server

PROMPTS = ["Give me a JSON object describing a cat with keys name and age.", "List three fruits as JSON.",
           "What is the capital of France? Answer in JSON.", "Hello", "Write a poem."]


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 2)
    yield s
    assert s.stop() == 0, s.output()


def test_answers_are_json_objects(server):
    c = server.client()
    ended = 0
    for p in PROMPTS:
        for t in (0, 1.0):
            r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": p}], max_tokens=160,
                                          temperature=t, seed=7, response_format={"type": "json_object"})
            ch = r.choices[0]
            if ch.finish_reason == "stop":
                ended += 1
                assert isinstance(json.loads(ch.message.content), dict), ch.message.content
            else:  # out of tokens: still the start of an object
                assert ch.finish_reason == "length" and ch.message.content.lstrip().startswith("{")
    assert ended >= len(PROMPTS)  # most close their object well within the budget


def test_stream_and_responses_agree(server):
    c = server.client()
    kw = dict(model="m", messages=[{"role": "user", "content": PROMPTS[0]}], max_tokens=160, temperature=0,
              response_format={"type": "json_object"})
    whole = c.chat.completions.create(**kw).choices[0].message.content
    streamed = "".join(x.choices[0].delta.content or "" for x in c.chat.completions.create(stream=True, **kw)
                       if x.choices)
    assert streamed == whole and isinstance(json.loads(whole), dict)
    r = c.responses.create(model="m", input=PROMPTS[0], max_output_tokens=160, temperature=0,
                           text={"format": {"type": "json_object"}})
    assert r.output_text == whole and r.text.format.type == "json_object"


def test_without_json_mode_the_same_prompt_is_not_json(server):
    # the constraint is what makes the answers above JSON: unconstrained, this one is prose
    r = server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "Write a poem."}],
                                                max_tokens=40, temperature=0)
    with pytest.raises(ValueError):
        json.loads(r.choices[0].message.content)


def test_a_thinking_prompt_is_refused(tmp_path):
    t = tmp_path / "think.jinja"
    t.write_text(THINK)
    s = Server("--chat-template-file", t, "--parallel", 1)
    try:
        status, text, _ = s.post("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
            "response_format": {"type": "json_object"}})
        assert status == 400 and json.loads(text)["error"]["param"] == "response_format", text
    finally:
        assert s.stop() == 0, s.output()
