"""vLLM's stop_token_ids and min_tokens through the official OpenAI SDK
(extra_body): a listed token id ends the answer without being shown, as an
end-of-generation id does; min_tokens holds the end-of-generation and stop ids
back until that many tokens were generated."""
import json

import openai
import pytest

from test_server import Server, chat


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 2)
    yield s
    assert s.stop() == 0, s.output()


def token_id(server, text):
    status, body, _ = server.post("/tokenize", {"prompt": text})
    ids = json.loads(body)["tokens"]
    assert status == 200 and len(ids) == 1, body
    return ids[0]


def test_stop_token_ids_end_the_answer(server):
    c = server.client()
    kw = dict(model="default", prompt="The capital of France is Paris. The capital of Italy is", max_tokens=24,
              temperature=0)
    full = c.completions.create(**kw).choices[0]
    assert " Rome" in full.text, full.text
    cut = c.completions.create(**kw, extra_body={"stop_token_ids": [token_id(server, " Rome")]}).choices[0]
    assert cut.finish_reason == "stop"
    assert cut.text == full.text[:full.text.index(" Rome")]


def test_min_tokens_holds_the_end_back(server):
    c = server.client()
    short = chat(c, "Say hi.", max_tokens=64, temperature=0)
    n = short.usage.completion_tokens
    assert short.choices[0].finish_reason == "stop" and n < 40
    longer = chat(c, "Say hi.", max_tokens=64, temperature=0, extra_body={"min_tokens": n + 8})
    assert longer.usage.completion_tokens >= n + 8
    assert longer.choices[0].message.content.startswith(short.choices[0].message.content)
    streamed = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Say hi."}], max_tokens=64, temperature=0,
        stream=True, extra_body={"min_tokens": n + 8}) if ch.choices)
    assert streamed == longer.choices[0].message.content


@pytest.mark.parametrize("body, param", [
    ({"stop_token_ids": [-1]}, "stop_token_ids"),
    ({"stop_token_ids": [10 ** 9]}, "stop_token_ids"),
    ({"stop_token_ids": "1"}, "stop_token_ids"),
    ({"min_tokens": -1}, "min_tokens"),
    ({"min_tokens": 9, "max_tokens": 4}, "min_tokens"),
    ({"min_tokens": 2, "response_format": {"type": "json_object"}}, "min_tokens"),
])
def test_bad_values_are_named(server, body, param):
    kw = {"max_tokens": 8, **body}
    with pytest.raises(openai.BadRequestError) as e:
        chat(server.client(), "hi", extra_body={k: v for k, v in kw.items() if k != "max_tokens"},
             max_tokens=kw["max_tokens"])
    assert e.value.body["param"] == param
