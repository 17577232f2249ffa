"""tool_choice that forces a call (OpenAI's required and a named function,
the Responses API's, Anthropic's any and tool), through the SDKs on the
default model, whose own template knows no tools: the answer is one call of
an offered tool, its arguments valid for that tool's schema (Python checks
each key and type), greedy and sampled, streamed and not."""
import json

import anthropic
import pytest

from test_server import Server

WEATHER = {"name": "get_weather", "description": "The weather in a city", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
    "additionalProperties": False}}
TIME = {"name": "get_time", "description": "The time in a city", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "utc": {"type": "boolean"}},
    "required": ["city", "utc"], "additionalProperties": False}}
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]


def chat_tools(*fns):
    return [{"type": "function", "function": f} for f in fns]


def valid(name, args):
    """The arguments fit the named tool's schema."""
    if name == "get_weather":
        return set(args) == {"city"} and isinstance(args["city"], str)
    return set(args) == {"city", "utc"} and isinstance(args["city"], str) and isinstance(args["utc"], bool)


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 2)
    yield s
    assert s.stop() == 0, s.output()


@pytest.mark.parametrize("temperature", [0, 1.0])
def test_required_and_named(server, temperature):
    c = server.client()
    for tools, choice, want in ((chat_tools(WEATHER), "required", "get_weather"),
                                (chat_tools(WEATHER, TIME), {"type": "function", "function": {"name": "get_time"}},
                                 "get_time")):
        r = c.chat.completions.create(model="m", messages=ASK, tools=tools, tool_choice=choice, max_tokens=80,
                                      temperature=temperature, seed=5)
        ch = r.choices[0]
        assert ch.finish_reason == "tool_calls", ch
        (call,) = ch.message.tool_calls
        assert call.function.name == want and valid(want, json.loads(call.function.arguments)), call
    # the same, streamed
    chunks = list(c.chat.completions.create(model="m", messages=ASK, tools=chat_tools(WEATHER), tool_choice="required",
                                            max_tokens=80, temperature=temperature, seed=5, stream=True))
    calls = [tc for x in chunks if x.choices and x.choices[0].delta.tool_calls for tc in x.choices[0].delta.tool_calls]
    assert [tc.function.name for tc in calls] == ["get_weather"] and valid("get_weather",
                                                                            json.loads(calls[0].function.arguments))
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_responses_and_messages(server):
    r = server.client().responses.create(model="m", input="What's the weather in Paris?", max_output_tokens=80,
                                         temperature=0, tool_choice="required",
                                         tools=[{"type": "function", **WEATHER}])
    (call,) = [x for x in r.output if x.type == "function_call"]
    assert call.name == "get_weather" and valid("get_weather", json.loads(call.arguments))
    a = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0).messages.create(
        model="m", max_tokens=80, messages=ASK, extra_body={"temperature": 0},
        tool_choice={"type": "tool", "name": "get_time"},
        tools=[{"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
               for f in (WEATHER, TIME)])
    assert a.stop_reason == "tool_use"
    (use,) = [b for b in a.content if b.type == "tool_use"]
    assert use.name == "get_time" and valid("get_time", use.input)


@pytest.mark.parametrize("body", [
    {"tool_choice": "required"},  # no tools
    {"tools": chat_tools(WEATHER), "tool_choice": {"type": "function", "function": {"name": "nope"}}},
    {"tools": chat_tools(WEATHER), "tool_choice": "required", "response_format": {"type": "json_object"}},
])
def test_refusals(server, body):
    status, text, _ = server.post("/v1/chat/completions", {"messages": ASK, "max_tokens": 4, **body})
    assert status == 400 and json.loads(text)["error"]["param"] == "tool_choice", text
