"""Grammar-constrained output through the official OpenAI SDK (extra_body):
llama-server's `grammar` (GBNF), vLLM's guided_grammar, guided_choice,
guided_regex and guided_json, and vLLM's newer structured_outputs spelling. Python's `re`
and `json` are the oracles: each grammar here has an equivalent regular
expression (or is JSON), and every answer, greedy or sampled, streamed or
not, must match it and end with finish_reason "stop" (a sampled guided_regex
answer that max_tokens cuts must be a prefix of a match: the `regex` package's
partial match)."""
import json
import re

import openai
import pytest
import regex as regex_partial

from test_server import Server, chat


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 4)
    yield s
    assert s.stop() == 0, s.output()


LIST = 'root ::= "[" item ("," " "? item){2} "]"\nitem ::= "\\"" [a-z]{1,10} "\\""\n'
LIST_RE = r'\["[a-z]{1,10}"(, ?"[a-z]{1,10}"){2}\]'

DATE = '''# an ISO date, then a weekday
root    ::= year "-" month "-" day " (" weekday ")"
year    ::= "19" [0-9] [0-9] | "20" [0-9] [0-9]
month   ::= "0" [1-9] | "1" [0-2]
day     ::= "0" [1-9] | [12] [0-9] | "3" [01]
weekday ::= "Monday" | "Tuesday" | "Wednesday" | "Thursday" | "Friday"
          | "Saturday" | "Sunday"
'''
DATE_RE = (r'(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]) '
           r'\((Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\)')

UTF8 = 'root ::= "R\\u00e9ponse : " ("oui" | "non") " \\u2713"'
UTF8_RE = 'Réponse : (oui|non) \u2713'

JSON_GBNF = r'''root   ::= object
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ":" ws value ws
value  ::= object | array | string | number | "true" | "false" | "null"
array  ::= "[" ws ( value ( "," ws value )* )? "]"
string ::= "\"" [a-zA-Z0-9 _.-]{0,20} "\""
number ::= "-"? [0-9]{1,6} ( "." [0-9]{1,4} )?
ws     ::= " "?
'''


@pytest.mark.parametrize("grammar, pattern", [(LIST, LIST_RE), (DATE, DATE_RE), (UTF8, UTF8_RE)])
@pytest.mark.parametrize("temperature", [0, 1.0])
def test_grammar_on_completions_matches(server, grammar, pattern, temperature):
    c = server.client()
    for seed in range(3 if temperature else 1):
        r = c.completions.create(model="default", prompt="Here is the answer:", max_tokens=48,
                                 temperature=temperature, seed=seed, extra_body={"grammar": grammar}).choices[0]
        assert r.finish_reason == "stop", r
        assert re.fullmatch(pattern, r.text), r.text


def test_guided_grammar_on_chat_streams_the_same(server):
    c = server.client()
    kw = dict(max_tokens=48, temperature=0, extra_body={"guided_grammar": DATE})
    full = chat(c, "When did the first person walk on the moon?", **kw)
    text = full.choices[0].message.content
    assert re.fullmatch(DATE_RE, text), text
    assert full.choices[0].finish_reason == "stop"
    streamed = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "When did the first person walk on the moon?"}],
        stream=True, **kw) if ch.choices)
    assert streamed == text


def test_grammar_json_parses(server):
    c = server.client()
    for seed in range(3):
        r = chat(c, "Describe a cat as a JSON object.", max_tokens=120, temperature=0.7, seed=seed,
                 extra_body={"grammar": JSON_GBNF})
        choice = r.choices[0]
        if choice.finish_reason == "length":  # an object still open at the budget: a prefix of the grammar's JSON
            assert choice.message.content.startswith("{")
            continue
        assert isinstance(json.loads(choice.message.content), dict), choice.message.content


@pytest.mark.parametrize("where", ["guided_choice", "structured_outputs"])
def test_guided_choice_is_one_of_them(server, where):
    c = server.client()
    labels = ["positive", "negative", "neutral", "it's \"mixed\""]
    body = {"guided_choice": labels} if where == "guided_choice" else {"structured_outputs": {"choice": labels}}
    seen = set()
    for seed in range(6):
        r = chat(c, "Is this review positive or negative? 'I loved every minute of it.'", max_tokens=16,
                 temperature=1.0, seed=seed, extra_body=body)
        assert r.choices[0].message.content in labels, r.choices[0].message.content
        assert r.choices[0].finish_reason == "stop"
        seen.add(r.choices[0].message.content)
    assert len(seen) >= 2, seen  # sampled, not pinned to one
    greedy = [chat(c, "Is this review positive or negative? 'I loved every minute of it.'", max_tokens=16,
                   temperature=0, extra_body=body).choices[0].message.content for _ in range(2)]
    assert greedy[0] in labels and greedy[0] == greedy[1], greedy


@pytest.mark.parametrize("regex", [r"\d{3}-\d{4}", r"(yes|no)(, because [a-z ]{5,30})?\.",
                                   r"[A-Z][a-z]+ [A-Z][a-z]+, born (19|20)\d\d", r"^\w{1,12}@\w{1,12}\.(com|org)$"])
def test_guided_regex_matches_with_python_re(server, regex):
    c = server.client()
    for where in ("guided_regex", "structured_outputs"):
        body = {"guided_regex": regex} if where == "guided_regex" else {"structured_outputs": {"regex": regex}}
        ends = 0
        for seed in range(4):
            r = chat(c, "Answer.", max_tokens=40, temperature=0.8, seed=seed, extra_body=body).choices[0]
            if r.finish_reason == "stop":  # a whole answer matches; one cut by max_tokens can still become one
                assert re.fullmatch(regex, r.message.content), r.message.content
                ends += 1
            else:
                assert r.finish_reason == "length", r.finish_reason
                assert regex_partial.fullmatch(regex, r.message.content, partial=True), r.message.content
        assert ends >= 1


def test_guided_json_is_an_object_of_its_schema(server):
    c = server.client()
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "legs": {"type": "integer"}},
              "required": ["name", "legs"], "additionalProperties": False}
    for body in ({"guided_json": schema}, {"guided_json": json.dumps(schema)}, {"structured_outputs": {"json": schema}}):
        r = chat(c, "Describe a cat.", max_tokens=60, temperature=0, extra_body=body)
        o = json.loads(r.choices[0].message.content)
        assert set(o) == {"name", "legs"} and isinstance(o["legs"], int), o


@pytest.mark.parametrize("body, param, words", [
    ({"grammar": "root ::= value"}, "grammar", "line 1: rule 'value' is used but not defined"),
    ({"grammar": 'root ::= "a"\nroot ::= "b"'}, "grammar", "line 2: rule 'root' is defined twice"),
    ({"grammar": 'expr ::= expr "+" "1" | "1"\nroot ::= expr'}, "grammar", "left-recursive"),
    ({"grammar": ""}, "grammar", "non-empty string"),
    ({"guided_grammar": 5}, "guided_grammar", "non-empty string"),
    ({"guided_choice": []}, "guided_choice", "non-empty array"),
    ({"guided_choice": ["a", 1]}, "guided_choice", "guided_choice[1]"),
    ({"guided_json": "{not json"}, "guided_json", "JSON Schema"),
    ({"guided_regex": "(a)\\1"}, "guided_regex", "backreferences (\\1) are not supported"),
    ({"guided_regex": "a(?=b)"}, "guided_regex", "lookaround"),
    ({"structured_outputs": {"regex": "[a-"}}, "structured_outputs.regex", "a class without its ']'"),
    ({"guided_regex": 5}, "guided_regex", "a regular expression"),
    ({"structured_outputs": 3}, "structured_outputs", "expected an object"),
    ({"grammar": 'root ::= "a"', "guided_choice": ["b"]}, "guided_choice", "'grammar' already constrains"),
    ({"grammar": 'root ::= "a"', "response_format": {"type": "json_object"}}, "grammar",
     "'response_format' already constrains"),
    ({"grammar": 'root ::= "a"', "min_tokens": 3}, "min_tokens", "constrained output"),
])
def test_bad_grammars_are_named(server, body, param, words):
    c = server.client()
    with pytest.raises(openai.BadRequestError) as e:
        chat(c, "hi", max_tokens=8, extra_body=body)
    err = e.value.body
    assert err["param"] == param, err
    assert words in err["message"], err


def test_grammar_with_a_forced_tool_call_is_refused(server):
    c = server.client()
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="default", messages=[{"role": "user", "content": "hi"}], tools=tools,
                                  tool_choice="required", max_tokens=8, extra_body={"grammar": 'root ::= "a"'})
    assert e.value.body["param"] == "tool_choice"


def test_grammar_with_logprobs_masks_the_alternatives(server):
    """With logprobs the whole vocabulary is masked before the draw: every
    alternative reported is a token the grammar allows there."""
    c = server.client()
    r = c.completions.create(model="default", prompt="Pick a digit:", max_tokens=4, temperature=0, logprobs=5,
                             extra_body={"grammar": "root ::= [0-9] [0-9]"}).choices[0]
    assert re.fullmatch(r"[0-9]{2}", r.text), r.text
    for alts in r.logprobs.top_logprobs:
        for tok, lp in alts.items():
            assert re.fullmatch(r"[0-9]+", tok) and len(tok) <= 2 and lp > -1e30, alts


def test_run_with_a_grammar(tmp_path):
    from conftest import DEFAULT_MODEL, run_hearth
    for seed in (1, 2):
        r = run_hearth("run", DEFAULT_MODEL, "Today's date:", "-n", "40", "--temp", "1.0", "--seed", seed,
                       "--grammar", DATE)
        assert r.returncode == 0, r.stderr
        assert re.fullmatch(DATE_RE, r.stdout.strip("\n")), r.stdout
    f = tmp_path / "list.gbnf"
    f.write_text(LIST)
    r = run_hearth("run", DEFAULT_MODEL, "Three fruits:", "-n", "40", "--temp", "0", "--grammar-file", f)
    assert r.returncode == 0 and re.fullmatch(LIST_RE, r.stdout.strip("\n")), (r.stdout, r.stderr)
    bad = run_hearth("run", DEFAULT_MODEL, "x", "--grammar", "root ::= [a-")
    assert bad.returncode == 2 and "--grammar: line 1: a character class without its ']'" in bad.stderr, bad.stderr
    both = run_hearth("run", DEFAULT_MODEL, "x", "--json", "--grammar", 'root ::= "a"')
    assert both.returncode == 2 and "give one of" in both.stderr


def test_grammar_beside_speculative_drafts_keeps_the_text(server):
    """With --spec-ngram the chooser walks drafted rows, each token through
    the request's sampler and its grammar: the text is the one without."""
    spec = Server("--parallel", 2, "--spec-ngram", "5")
    try:
        prompt = 'Copy: {"a": 1, "b": [1, 2], "a": 1, "b": [1, 2], "a": 1'
        for g in (LIST, DATE, JSON_GBNF):
            body = {"model": "default", "prompt": prompt, "max_tokens": 60, "temperature": 0, "grammar": g}
            with_drafts = json.loads(spec.post("/v1/completions", body)[1])["choices"][0]["text"]
            without = json.loads(server.post("/v1/completions", body)[1])["choices"][0]["text"]
            assert with_drafts == without, (g, with_drafts, without)
        assert json.loads(spec.get("/stats")[1])["engine"]["spec_draft_tokens"] > 0
    finally:
        assert spec.stop() == 0, spec.output()
