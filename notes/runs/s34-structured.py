"""s34-structured: structured output through a running `hearth serve` (argv[1], its base URL), with urllib
only (the GPU machine has no openai package): JSON mode, a JSON Schema and a forced tool call, greedy and
sampled, each answer checked by Python's json and by hand against the schema. Exit 1 on any failure."""
import json
import sys
import urllib.request

URL = sys.argv[1]
FAMILY = {"type": "object", "additionalProperties": False, "required": ["owner", "pets"], "properties": {
    "owner": {"type": "string"},
    "pets": {"type": "array", "items": {"$ref": "#/$defs/Pet"}}}, "$defs": {"Pet": {
        "type": "object", "additionalProperties": False, "required": ["name", "kind", "age", "nickname"],
        "properties": {"name": {"type": "string"}, "kind": {"enum": ["cat", "dog", "bird"]},
                       "age": {"type": "integer"}, "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}}


def post(body):
    req = urllib.request.Request(URL + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def family_ok(v):
    return (isinstance(v, dict) and set(v) == {"owner", "pets"} and isinstance(v["owner"], str) and
            all(set(p) == {"name", "kind", "age", "nickname"} and p["kind"] in ("cat", "dog", "bird") and
                isinstance(p["age"], int) and (p["nickname"] is None or isinstance(p["nickname"], str))
                for p in v["pets"]))


bad = 0
for temp in (0, 1.0):
    for prompt in ("Describe a family with two pets.", "List three fruits as JSON.", "Hello"):
        msgs = [{"role": "user", "content": prompt}]
        for name, extra, check in (
                ("json_object", {"response_format": {"type": "json_object"}}, lambda c: isinstance(json.loads(c), dict)),
                ("json_schema", {"response_format": {"type": "json_schema", "json_schema": {
                    "name": "family", "schema": FAMILY, "strict": True}}}, lambda c: family_ok(json.loads(c)))):
            r = post({"messages": msgs, "max_tokens": 300, "temperature": temp, "seed": 3, **extra})["choices"][0]
            ok = r["finish_reason"] == "length" or check(r["message"]["content"])
            bad += not ok
            print(f"{'ok' if ok else 'FAIL'} {name} t={temp} {prompt!r}: {r['finish_reason']} "
                  f"{r['message']['content'][:100]!r}")
        r = post({"messages": msgs, "max_tokens": 80, "temperature": temp, "seed": 3, "tools": [WEATHER],
                  "tool_choice": "required"})["choices"][0]
        calls = r["message"].get("tool_calls") or []
        ok = r["finish_reason"] == "length" or (r["finish_reason"] == "tool_calls" and len(calls) == 1 and
                                                set(json.loads(calls[0]["function"]["arguments"])) == {"city"})
        bad += not ok
        print(f"{'ok' if ok else 'FAIL'} tool_choice required t={temp} {prompt!r}: {r['finish_reason']} {calls}")
print(f"structured output: {bad} failed")
sys.exit(1 if bad else 0)
