"""`hearth template MODEL messages.json`: the real binary renders a model's own
chat template byte-identical to transformers (goldens in tests/fixtures/templates)."""
import json

from conftest import DEFAULT_MODEL, ROOT, run_hearth

FIXTURES = ROOT / "tests" / "fixtures" / "templates"


def golden(name, case):
    doc = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return doc, next(c for c in doc["cases"] if c["name"] == case)


def test_gguf_template_matches_transformers(tmp_path):
    doc, case = golden("smollm2", "system_multi_turn")
    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps(case["messages"]), encoding="utf-8")
    r = run_hearth("template", DEFAULT_MODEL, msgs)
    assert r.returncode == 0, r.stderr
    assert r.stdout == case["expected"]
    assert r.stdout.endswith("<|im_start|>assistant\n")


def test_no_generation_prompt_and_stdin(tmp_path):
    _, case = golden("smollm2", "ends_with_assistant")
    r = run_hearth("template", DEFAULT_MODEL, "-", "--no-generation-prompt", input=json.dumps(case["messages"]))
    assert r.returncode == 0, r.stderr
    assert r.stdout == case["expected"]


def test_print_template_is_the_gguf_template():
    doc, _ = golden("smollm2", "single_turn")
    r = run_hearth("template", DEFAULT_MODEL, "--print-template")
    assert r.returncode == 0, r.stderr
    assert r.stdout == doc["template"]


def write_hf_dir(tmp_path, name, chat_template, bos={"content": "<s>", "lstrip": False}, eos="</s>"):
    d = tmp_path / name
    d.mkdir()
    (d / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": bos, "eos_token": eos, "chat_template": chat_template}), encoding="utf-8")
    return d


def test_hf_dir_named_templates_tools_and_kwargs(tmp_path):
    # A real template (Qwen3, with tools and enable_thinking) in the list form of chat_template.
    doc, case = golden("qwen3", "tools_offered")
    d = write_hf_dir(tmp_path, "qwen3", [{"name": "default", "template": "{{ bos_token }}plain"},
                                         {"name": "tool_use", "template": doc["template"]}],
                     bos=None, eos="<|im_end|>")
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps({"messages": case["messages"], "tools": case["tools"]}), encoding="utf-8")
    r = run_hearth("template", d, conv)
    assert r.returncode == 0, r.stderr
    assert r.stdout == case["expected"]  # tools given -> the tool_use template, as transformers picks
    _, off = golden("qwen3", "thinking_off")
    conv.write_text(json.dumps(off["messages"]), encoding="utf-8")
    r = run_hearth("template", d, conv, "--template", "tool_use", "--kwargs", '{"enable_thinking": false}')
    assert r.returncode == 0, r.stderr
    assert r.stdout == off["expected"]
    r = run_hearth("template", d, conv)
    assert r.returncode == 0 and r.stdout == "plain"  # no tools: "default"; bos null -> undefined -> ""


def test_fixed_clock(tmp_path):
    doc, case = golden("llama3.2", "single_turn")
    d = write_hf_dir(tmp_path, "llama", doc["template"], bos="<|begin_of_text|>", eos="<|eot_id|>")
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps(case["messages"]), encoding="utf-8")
    r = run_hearth("template", d, conv, "--now", str(doc["now"]))
    assert r.returncode == 0, r.stderr
    assert r.stdout == case["expected"]
    assert "Today Date: 15 Jan 2026" in r.stdout


def test_template_errors_name_the_line(tmp_path):
    d = write_hf_dir(tmp_path, "bad", "{% for m in messages %}\n{{ m.content | nosuch }}\n{% endfor %}")
    conv = tmp_path / "conv.json"
    conv.write_text('[{"role": "user", "content": "x"}]', encoding="utf-8")
    r = run_hearth("template", d, conv)
    assert r.returncode == 1
    assert "template line 2: unknown filter 'nosuch'" in r.stderr
    d = write_hf_dir(tmp_path, "raises", "{{ raise_exception('Conversation roles must alternate') }}")
    r = run_hearth("template", d, conv)
    assert r.returncode == 1
    assert "Conversation roles must alternate" in r.stderr


def test_bad_inputs(tmp_path):
    conv = tmp_path / "conv.json"
    conv.write_text("{not json", encoding="utf-8")
    r = run_hearth("template", DEFAULT_MODEL, conv)
    assert r.returncode == 1 and "conv.json" in r.stderr
    conv.write_text('{"messages": 3}', encoding="utf-8")
    r = run_hearth("template", DEFAULT_MODEL, conv)
    assert r.returncode == 1 and "messages" in r.stderr
    d = tmp_path / "empty"
    d.mkdir()
    r = run_hearth("template", d, "-", input="[]")
    assert r.returncode == 1 and "no chat_template" in r.stderr
    r = run_hearth("template", DEFAULT_MODEL)
    assert r.returncode == 2
    r = run_hearth("template", DEFAULT_MODEL, conv, "--kwargs", "[1]")
    assert r.returncode == 2 and "--kwargs" in r.stderr
