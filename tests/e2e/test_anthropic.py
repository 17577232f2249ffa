"""`hearth serve` through the official Anthropic Python SDK: /v1/messages,
streamed and not, against the OpenAI routes on the same conversation (same
prompt tokens, same greedy text), stop sequences, a prefill, count_tokens,
tool use and thinking blocks, errors and the x-api-key header. The real
binary on loopback with the default model; token budgets are small on
purpose."""
import json

import anthropic
import pytest

from test_server import HERMES, SLOW, THINK, Server, smollm_chatml

Q = "What is the capital of France?"
# The SDK no longer has sampling parameters; the API and other clients still send them.
GREEDY = {"temperature": 0}


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 2)
    yield s
    assert s.stop() == 0, s.output()


def client(s, api_key="none"):
    return anthropic.Anthropic(base_url=s.url, api_key=api_key, max_retries=0, timeout=120 * SLOW)


def text_of(msg):
    return "".join(b.text for b in msg.content if b.type == "text")


def test_message_is_the_openai_chat_answer(server):
    a = client(server).messages.create(model="m", max_tokens=16, extra_body=GREEDY, system="Answer briefly.",
                                       messages=[{"role": "user", "content": Q}])
    o = server.client().chat.completions.create(model="m", max_tokens=16, temperature=0, messages=[
        {"role": "system", "content": "Answer briefly."}, {"role": "user", "content": Q}])
    assert a.id.startswith("msg_") and a.type == "message" and a.role == "assistant"
    assert a.model == "SmolLM2-135M-Instruct.Q4_1"
    assert text_of(a) == o.choices[0].message.content and text_of(a)
    assert a.stop_reason == {"length": "max_tokens", "stop": "end_turn"}[o.choices[0].finish_reason]
    assert a.stop_sequence is None
    # Anthropic counts cached prompt tokens apart from input_tokens
    u = a.usage
    assert u.input_tokens + u.cache_read_input_tokens == o.usage.prompt_tokens
    assert u.cache_creation_input_tokens == 0
    assert u.output_tokens == o.usage.completion_tokens


def test_stream_is_the_same_message(server):
    c = client(server)
    kw = dict(model="m", max_tokens=12, extra_body=GREEDY, messages=[{"role": "user", "content": "Tell me a story."}])
    whole = c.messages.create(**kw)
    with c.messages.stream(**kw) as st:
        events = [e.type for e in st]
        final = st.get_final_message()
    assert text_of(final) == text_of(whole)
    assert (final.stop_reason, final.usage.output_tokens) == (whole.stop_reason, whole.usage.output_tokens)
    assert final.usage.input_tokens + final.usage.cache_read_input_tokens == \
        whole.usage.input_tokens + whole.usage.cache_read_input_tokens
    # the wire order: one text block opened, its deltas, closed, then the message's end
    raw = [e for e in events if e in ("message_start", "content_block_start", "content_block_stop",
                                      "message_delta", "message_stop")]
    assert raw == ["message_start", "content_block_start", "content_block_stop", "message_delta", "message_stop"]
    assert "text" in events  # the SDK's per-delta text event


def test_system_blocks_are_the_system_string(server):
    c = client(server)
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]}]
    as_string = c.messages.count_tokens(model="m", system="Be kind. Be brief.", messages=msgs)
    as_blocks = c.messages.count_tokens(model="m", messages=msgs, system=[
        {"type": "text", "text": "Be kind."}, {"type": "text", "text": "Be brief."}])
    # text blocks join with a newline, as the OpenAI route joins content parts
    o = server.client().chat.completions.create(model="m", max_tokens=1, messages=[
        {"role": "system", "content": "Be kind.\nBe brief."}, {"role": "user", "content": "Hello\nthere"}])
    assert as_blocks.input_tokens == o.usage.prompt_tokens
    assert as_string.input_tokens != as_blocks.input_tokens


def test_stop_sequences(server):
    c = client(server)
    kw = dict(model="m", max_tokens=24, extra_body=GREEDY, messages=[{"role": "user", "content": "Tell me a story."}])
    text = text_of(c.messages.create(**kw))
    k = next(i for i in range(4, len(text) - 3) if text[i:i + 3].strip() == text[i:i + 3])
    stop = text[k:k + 3]
    r = c.messages.create(stop_sequences=["@@never@@", stop], **kw)
    assert r.stop_reason == "stop_sequence" and r.stop_sequence == stop
    assert text_of(r) == text[:text.index(stop)]
    with c.messages.stream(stop_sequences=[stop], **kw) as st:
        f = st.get_final_message()
    assert (f.stop_reason, f.stop_sequence, text_of(f)) == ("stop_sequence", stop, text_of(r))


def test_prefill_continues_the_answer(server):
    start = "The capital of France is"
    r = client(server).messages.create(model="m", max_tokens=10, extra_body=GREEDY, messages=[
        {"role": "user", "content": Q}, {"role": "assistant", "content": start}])
    raw = server.client().completions.create(model="m", prompt=smollm_chatml(("user", Q)) + start, max_tokens=10,
                                             extra_body=GREEDY)
    assert text_of(r) == raw.choices[0].text
    assert r.usage.input_tokens + r.usage.cache_read_input_tokens == raw.usage.prompt_tokens
    # the OpenAI route's prefill, as vLLM spells it
    o = server.client().chat.completions.create(model="m", max_tokens=10, temperature=0, messages=[
        {"role": "user", "content": Q}, {"role": "assistant", "content": start}],
        extra_body={"continue_final_message": True, "add_generation_prompt": False})
    assert o.choices[0].message.content == text_of(r) and o.usage.prompt_tokens == raw.usage.prompt_tokens
    # a template that does not print the message as given cannot be continued: said, not guessed
    status, text, _ = server.post("/v1/chat/completions", {"max_tokens": 4, "continue_final_message": True,
                                                           "messages": [{"role": "user", "content": Q}]})
    assert status == 400 and "final assistant message" in text, text


def test_count_tokens_is_the_prompt(server):
    c = client(server)
    msgs = [{"role": "user", "content": Q}, {"role": "assistant", "content": "Paris."},
            {"role": "user", "content": "And of Italy?"}]
    n = c.messages.count_tokens(model="m", messages=msgs).input_tokens
    r = c.messages.create(model="m", max_tokens=2, messages=msgs)
    assert n == r.usage.input_tokens + r.usage.cache_read_input_tokens > 20


@pytest.mark.parametrize("body, needle", [
    (dict(messages=[{"role": "user", "content": "Hi"}]), "max_tokens"),
    (dict(max_tokens=4, messages=[]), "messages"),
    (dict(max_tokens=4, messages=[{"role": "system", "content": "Hi"}]), "'system'"),
    (dict(max_tokens=4, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]), "image"),
    (dict(max_tokens=4, temperature=1.5, messages=[{"role": "user", "content": "Hi"}]), "temperature"),
    (dict(max_tokens=4, output_config={"format": {"type": "json_schema", "schema": {
        "type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}}},
          messages=[{"role": "user", "content": "Hi"}]), "'pattern' is not supported"),
    (dict(max_tokens=4, stop_sequences="x", messages=[{"role": "user", "content": "Hi"}]), "stop_sequences"),
    (dict(max_tokens=4, tool_choice={"type": "any"}, messages=[{"role": "user", "content": "Hi"}]), "tool_choice"),
    (dict(max_tokens=4, tools=[{"type": "web_search_20250305", "name": "web_search"}],
          messages=[{"role": "user", "content": "Hi"}]), "custom tools only"),
    (dict(max_tokens=4, messages=[{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f",
                                                               "input": {}}]}]), "tool_use"),
])
def test_errors_name_the_field(server, body, needle):
    status, text, _ = server.post("/v1/messages", {"model": "m", **body})
    assert status == 400, text
    doc = json.loads(text)
    assert doc["type"] == "error" and doc["error"]["type"] == "invalid_request_error"
    assert needle in doc["error"]["message"], doc


def test_sdk_raises_its_own_errors(server):
    with pytest.raises(anthropic.BadRequestError) as e:
        client(server).messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]}])
    assert e.value.body["error"]["type"] == "invalid_request_error"
    assert "document" in e.value.body["error"]["message"]


def test_models_through_the_sdk(server):
    c = client(server)
    (m,) = c.models.list().data
    assert (m.id, m.type, m.display_name) == ("SmolLM2-135M-Instruct.Q4_1", "model", "SmolLM2-135M-Instruct.Q4_1")
    assert m.created_at.year >= 2026
    assert c.models.retrieve(m.id).id == m.id
    with pytest.raises(anthropic.NotFoundError):
        c.models.retrieve("no-such-model")


def test_bad_json_is_an_anthropic_error(server):
    status, text, _ = server.post("/v1/messages", b"{not json")
    assert status == 400 and json.loads(text)["error"]["type"] == "invalid_request_error"


def test_x_api_key():
    s = Server("--api-key", "sekrit", "--parallel", 1)
    try:
        r = client(s, "sekrit").messages.create(model="m", max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
        assert r.usage.output_tokens >= 1
        with pytest.raises(anthropic.AuthenticationError) as e:
            client(s, "wrong").messages.create(model="m", max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
        assert e.value.body["error"]["type"] == "authentication_error"
    finally:
        assert s.stop() == 0, s.output()


# ---- tools and thinking, through templates that have them ----

TOOLS = [{"name": "get_weather", "description": "The weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
OPENAI_TOOLS = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                  "parameters": t["input_schema"]}} for t in TOOLS]


def weather_shot(city, result, call_id):
    """One solved exchange in Anthropic's shape, and the same in OpenAI's."""
    a = [{"role": "user", "content": f"Weather in {city}?"},
         {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "get_weather",
                                            "input": {"city": city}}]},
         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": result}]},
         {"role": "assistant", "content": f"It is {result} in {city}."}]
    o = [{"role": "user", "content": f"Weather in {city}?"},
         {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
             "name": "get_weather", "arguments": json.dumps({"city": city})}}]},
         {"role": "tool", "tool_call_id": call_id, "content": result},
         {"role": "assistant", "content": f"It is {result} in {city}."}]
    return a, o


@pytest.fixture(scope="module")
def template_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("templates")


def test_tool_use_round_trip(template_dir):
    t = template_dir / "hermes.jinja"
    t.write_text(HERMES)
    s = Server("--chat-template-file", t, "--parallel", 1)
    try:
        c = client(s)
        (a1, o1), (a2, o2) = weather_shot("London", "15C", "toolu_1"), weather_shot("Berlin", "9C", "toolu_2")
        msgs = a1 + a2 + [{"role": "user", "content": "Weather in Paris?"}]
        r = c.messages.create(model="m", system="You can call get_weather.", messages=msgs, tools=TOOLS,
                              max_tokens=30, extra_body=GREEDY)
        # the conversion is the OpenAI route's conversation, token for token
        o = s.client().chat.completions.create(model="m", tools=OPENAI_TOOLS, max_tokens=1, messages=(
            [{"role": "system", "content": "You can call get_weather."}] + o1 + o2
            + [{"role": "user", "content": "Weather in Paris?"}]))
        assert r.usage.input_tokens + r.usage.cache_read_input_tokens == o.usage.prompt_tokens
        assert r.stop_reason == "tool_use", r
        (use,) = [b for b in r.content if b.type == "tool_use"]
        assert (use.name, use.input) == ("get_weather", {"city": "Paris"})
        # streamed: the same block, its input as one input_json_delta
        with c.messages.stream(model="m", system="You can call get_weather.", messages=msgs, tools=TOOLS,
                               max_tokens=30, extra_body=GREEDY) as st:
            f = st.get_final_message()
        assert f.stop_reason == "tool_use"
        assert [(b.type, b.name, b.input) for b in f.content if b.type == "tool_use"] == \
            [("tool_use", "get_weather", {"city": "Paris"})]
        # the result goes back in a user message's tool_result block
        msgs += [{"role": "assistant", "content": [b.model_dump() for b in r.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                               "content": [{"type": "text", "text": "18C"}]}]}]
        r2 = c.messages.create(model="m", system="You can call get_weather.", messages=msgs, tools=TOOLS,
                               max_tokens=20, extra_body=GREEDY)
        assert r2.stop_reason == "end_turn" and "18C" in text_of(r2)
        # tool_choice none: the tools are not offered and nothing is parsed
        r3 = c.messages.create(model="m", messages=msgs[:-2], tools=TOOLS, tool_choice={"type": "none"},
                               max_tokens=30, extra_body=GREEDY)
        assert r3.stop_reason != "tool_use" and all(b.type == "text" for b in r3.content)
    finally:
        assert s.stop() == 0, s.output()


def test_thinking_blocks(template_dir):
    t = template_dir / "think.jinja"
    t.write_text(THINK)
    s = Server("--chat-template-file", t, "--parallel", 1)
    try:
        shots = [("2+2?", "Two plus two.", "4"), ("3+3?", "Three plus three.", "6"), ("5+5?", "Five plus five.", "10")]
        amsgs, omsgs = [], []
        for q, why, ans in shots:
            amsgs += [{"role": "user", "content": q}, {"role": "assistant", "content": [
                {"type": "thinking", "thinking": why, "signature": ""}, {"type": "text", "text": ans}]}]
            omsgs += [{"role": "user", "content": q}, {"role": "assistant", "content": ans, "reasoning_content": why}]
        amsgs.append({"role": "user", "content": "4+4?"})
        omsgs.append({"role": "user", "content": "4+4?"})
        r = client(s).messages.create(model="m", messages=amsgs, max_tokens=16, extra_body=GREEDY)
        o = s.client().chat.completions.create(model="m", messages=omsgs, max_tokens=16, temperature=0)
        m = o.choices[0].message
        assert [b.type for b in r.content] == ["thinking", "text"], r
        assert r.content[0].thinking == m.model_extra.get("reasoning_content")
        assert r.content[1].text == m.content
        with client(s).messages.stream(model="m", messages=amsgs, max_tokens=16, extra_body=GREEDY) as st:
            deltas = [e.delta.type for e in st if e.type == "content_block_delta"]
            f = st.get_final_message()
        assert [(b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in f.content] == \
            [("thinking", r.content[0].thinking), ("text", r.content[1].text)]
        assert deltas[0] == "thinking_delta" and deltas[-1] == "text_delta"
    finally:
        assert s.stop() == 0, s.output()
