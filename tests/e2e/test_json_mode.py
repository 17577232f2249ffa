"""Structured output through the SDKs on the default model. JSON mode
(response_format json_object): every answer that ends by itself is one JSON
object (Python's json as the oracle), greedy and sampled, streamed the same
as whole, on /v1/chat/completions and /v1/responses; a thinking prompt is
refused by name. JSON Schema: answers validate against the Pydantic model
whose schema was sent (Pydantic as the oracle), through the OpenAI SDK's own
parse helper, the Responses API and the Anthropic API; a keyword outside the
subset is refused by name."""
import json
from typing import List, Literal, Optional

import anthropic
import pytest
from openai.lib._parsing._completions import type_to_response_format_param
from pydantic import BaseModel

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


# ---- JSON Schema: Pydantic (as the SDK sends it, strict) is the oracle ----

class Pet(BaseModel):
    name: str
    kind: Literal["cat", "dog", "bird"]
    age: int
    vaccinated: bool
    nickname: Optional[str]


class Family(BaseModel):
    owner: str
    pets: List[Pet]


def test_schema_answers_validate(server):
    c = server.client()
    ended = 0
    for p in ("Describe a family with two pets.", "Tell me about Anna and her dog Rex.", "Hello"):
        for t in (0, 1.0):
            r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": p}], max_tokens=300,
                                          temperature=t, seed=3, response_format=type_to_response_format_param(Family))
            ch = r.choices[0]
            if ch.finish_reason == "stop":
                ended += 1
                Family.model_validate_json(ch.message.content)  # raises if the schema is broken
    assert ended >= 3
    # the SDK's own helper, end to end
    r = c.chat.completions.parse(model="m", messages=[{"role": "user", "content": "Describe a family with two pets."}],
                                 response_format=Family, max_tokens=300, temperature=0)
    assert isinstance(r.choices[0].message.parsed, Family)


def test_schema_on_responses_and_messages(server):
    schema = type_to_response_format_param(Family)["json_schema"]["schema"]  # strict, as the SDK makes it
    q = "Describe a family with two pets."
    r = server.client().responses.create(model="m", input=q, max_output_tokens=300, temperature=0, text={
        "format": {"type": "json_schema", "name": "family", "schema": schema, "strict": True}})
    assert r.status == "completed"
    Family.model_validate_json(r.output_text)
    a = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0).messages.create(
        model="m", max_tokens=300, messages=[{"role": "user", "content": q}], extra_body={"temperature": 0},
        output_config={"format": {"type": "json_schema", "schema": schema}})
    assert a.stop_reason == "end_turn"
    Family.model_validate_json(a.content[0].text)


def test_schema_refusals_name_the_keyword(server):
    status, text, _ = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": {"d": {"type": "string", "format": "date-time"}}}}}})
    err = json.loads(text)["error"]
    assert status == 400 and err["param"] == "response_format" and "'format'" in err["message"], text
