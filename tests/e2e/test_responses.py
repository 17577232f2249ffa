"""`hearth serve`'s /v1/responses through the official OpenAI Python SDK:
the same conversation as /v1/chat/completions gives the same prompt and the
same greedy text, streamed and not (the SDK's own stream accumulator checks
the events' order and identities), input items (messages, function calls
and their outputs, reasoning), tool calls and reasoning items through
templates that have them, and the fields refused by name."""
import json

import pytest

from test_server import HERMES, THINK, Server

Q = "What is the capital of France?"


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 2)
    yield s
    assert s.stop() == 0, s.output()


def test_response_is_the_chat_answer(server):
    c = server.client()
    r = c.responses.create(model="m", instructions="Answer briefly.", input=Q, max_output_tokens=16, temperature=0)
    o = c.chat.completions.create(model="m", max_tokens=16, temperature=0, messages=[
        {"role": "system", "content": "Answer briefly."}, {"role": "user", "content": Q}])
    assert r.id.startswith("resp_") and r.object == "response" and r.model == "SmolLM2-135M-Instruct.Q4_1"
    assert r.output_text == o.choices[0].message.content and r.output_text
    assert r.status == {"length": "incomplete", "stop": "completed"}[o.choices[0].finish_reason]
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    assert (r.usage.input_tokens, r.usage.output_tokens) == (o.usage.prompt_tokens, o.usage.completion_tokens)
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.instructions == "Answer briefly." and r.max_output_tokens == 16 and r.temperature == 0
    (msg,) = r.output
    assert msg.type == "message" and msg.role == "assistant" and msg.content[0].type == "output_text"


def test_stream_is_the_same_response(server):
    c = server.client()
    kw = dict(model="m", input=[{"role": "user", "content": "Say hi"}], max_output_tokens=300, temperature=0)
    whole = c.responses.create(**kw)
    assert whole.status == "completed"  # the greedy answer ends by itself: the SDK's helper needs that
    with c.responses.stream(**kw) as st:
        events = list(st)
        final = st.get_final_response()
    assert final.output_text == whole.output_text and final.usage.output_tokens == whole.usage.output_tokens
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events if not e.type.endswith(".delta")]
    assert kinds == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.content_part.added", "response.output_text.done", "response.content_part.done",
                     "response.output_item.done", "response.completed"]
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == whole.output_text
    # out of tokens: the raw stream ends with response.incomplete
    raw = list(c.responses.create(model="m", input=Q, max_output_tokens=4, temperature=0, stream=True))
    assert raw[-1].type == "response.incomplete" and raw[-1].response.incomplete_details.reason == "max_output_tokens"


def test_input_items_are_the_chat_conversation(server):
    c = server.client()
    r = c.responses.create(model="m", max_output_tokens=8, temperature=0, input=[
        {"role": "developer", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": Q}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Paris."}]},
        {"role": "user", "content": "And of Italy?"}])
    o = c.chat.completions.create(model="m", max_tokens=8, temperature=0, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": Q},
        {"role": "assistant", "content": "Paris."}, {"role": "user", "content": "And of Italy?"}])
    assert r.usage.input_tokens == o.usage.prompt_tokens and r.output_text == o.choices[0].message.content


@pytest.mark.parametrize("body, param", [
    ({"input": "Hi", "previous_response_id": "resp_x"}, "previous_response_id"),
    ({}, "input"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}]}, "input"),
    ({"input": "Hi", "tools": [{"type": "web_search"}]}, "tools"),
    ({"input": "Hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": {
        "type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}}}}, "text.format"),
    ({"input": "Hi", "tool_choice": "required"}, "tool_choice"),
    ({"input": "Hi", "background": True}, "background"),
])
def test_refused_by_name(server, body, param):
    status, text, _ = server.post("/v1/responses", {"model": "m", **body})
    assert status == 400, text
    assert json.loads(text)["error"]["param"] == param


TOOLS = [{"type": "function", "name": "get_weather", "description": "The weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
CHAT_TOOLS = [{"type": "function", "function": {k: v for k, v in TOOLS[0].items() if k != "type"}}]


def shot(city, result, call_id):
    """One solved exchange as Responses input items, and as chat messages."""
    items = [{"role": "user", "content": f"Weather in {city}?"},
             {"type": "function_call", "call_id": call_id, "name": "get_weather",
              "arguments": json.dumps({"city": city})},
             {"type": "function_call_output", "call_id": call_id, "output": result},
             {"role": "assistant", "content": f"It is {result} in {city}."}]
    chat = [{"role": "user", "content": f"Weather in {city}?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
                "name": "get_weather", "arguments": json.dumps({"city": city})}}]},
            {"role": "tool", "tool_call_id": call_id, "content": result},
            {"role": "assistant", "content": f"It is {result} in {city}."}]
    return items, chat


@pytest.fixture(scope="module")
def template_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("templates")


def test_function_call_round_trip(template_dir):
    t = template_dir / "hermes.jinja"
    t.write_text(HERMES)
    s = Server("--chat-template-file", t, "--parallel", 1)
    try:
        c = s.client()
        (i1, c1), (i2, c2) = shot("London", "15C", "call_1"), shot("Berlin", "9C", "call_2")
        items = i1 + i2 + [{"role": "user", "content": "Weather in Paris?"}]
        kw = dict(model="m", instructions="You can call get_weather.", tools=TOOLS, max_output_tokens=30,
                  temperature=0)
        r = c.responses.create(input=items, **kw)
        o = c.chat.completions.create(model="m", tools=CHAT_TOOLS, max_tokens=1, messages=(
            [{"role": "system", "content": "You can call get_weather."}] + c1 + c2
            + [{"role": "user", "content": "Weather in Paris?"}]))
        assert r.usage.input_tokens == o.usage.prompt_tokens
        (call,) = [x for x in r.output if x.type == "function_call"]
        assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
        assert call.call_id.startswith("call_") and r.status == "completed"
        with c.responses.stream(input=items, **kw) as st:
            f = st.get_final_response()
        assert [(x.type, x.name, json.loads(x.arguments)) for x in f.output if x.type == "function_call"] == \
            [("function_call", "get_weather", {"city": "Paris"})]
        # the call and its output go back in as items
        items += [{"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
                  {"type": "function_call_output", "call_id": call.call_id, "output": "18C"}]
        r2 = c.responses.create(input=items, **kw)
        assert "18C" in r2.output_text and not [x for x in r2.output if x.type == "function_call"]
    finally:
        assert s.stop() == 0, s.output()


def test_reasoning_items(template_dir):
    t = template_dir / "think.jinja"
    t.write_text(THINK)
    s = Server("--chat-template-file", t, "--parallel", 1)
    try:
        c = s.client()
        items, msgs = [], []
        for q, why, ans in [("2+2?", "Two plus two.", "4"), ("3+3?", "Three plus three.", "6"),
                            ("5+5?", "Five plus five.", "10")]:
            items += [{"role": "user", "content": q},
                      {"type": "reasoning", "id": "rs_1", "summary": [],
                       "content": [{"type": "reasoning_text", "text": why}]},
                      {"role": "assistant", "content": ans}]
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": ans, "reasoning_content": why}]
        items.append({"role": "user", "content": "4+4?"})
        msgs.append({"role": "user", "content": "4+4?"})
        r = c.responses.create(model="m", input=items, max_output_tokens=16, temperature=0)
        o = c.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0)
        assert r.usage.input_tokens == o.usage.prompt_tokens
        assert [x.type for x in r.output] == ["reasoning", "message"]
        assert r.output[0].content[0].text == o.choices[0].message.model_extra["reasoning_content"]
        assert r.output_text == o.choices[0].message.content
        raw = list(c.responses.create(model="m", input=items, max_output_tokens=16, temperature=0, stream=True))
        assert "".join(e.delta for e in raw if e.type == "response.reasoning_text.delta") == \
            r.output[0].content[0].text
        assert [x.type for x in raw[-1].response.output] == ["reasoning", "message"]
    finally:
        assert s.stop() == 0, s.output()
