"""LoRA adapters served beside the default model (`hearth serve --lora`), as
vLLM serves them: a request's "model" names the adapter, /v1/models lists it
with its parent, adapters and the base mix in one batch without changing
anyone's answer, and the prefix cache keeps their KV apart. The adapters are
random (PEFT's file layout written with numpy); their numerics against PyTorch
+ PEFT are test_parity.c's parity_lora_vs_peft."""
import concurrent.futures as cf
import json
import pathlib
import sys
import tempfile

import pytest

from conftest import DEFAULT_MODEL, ROOT, run_hearth
from test_server import Server

sys.path.insert(0, str(ROOT / "tools" / "bench"))
from make_lora_adapter import llama_shapes, write_adapter as write_any  # noqa: E402

# SmolLM2-135M: hidden 576, 30 layers, 9 heads / 3 KV heads of 64, FFN 1536
SHAPES, LAYERS = llama_shapes(576, 9, 3, 64, 1536), 30


def write_adapter(d, seed, extra=None, modules=SHAPES):
    return write_any(d, modules, LAYERS, seed, r=8, alpha=16, extra=extra)


@pytest.fixture(scope="module")
def adapters():
    with tempfile.TemporaryDirectory() as t:
        yield write_adapter(pathlib.Path(t) / "tutor", 1), write_adapter(pathlib.Path(t) / "pirate", 2)


@pytest.fixture(scope="module")
def server(adapters):
    s = Server("--parallel", 8, "--lora", f"tutor={adapters[0]}", "--lora", adapters[1])
    yield s
    assert s.stop() == 0, s.output()


def complete(server, model, prompt="The capital of France is", n=24, **kw):
    r = server.client().completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0, **kw)
    return r


def test_models_lists_the_adapters(server):
    models = {m.id: m for m in server.client().models.list().data}
    assert set(models) == {"SmolLM2-135M-Instruct.Q4_1", "tutor", "pirate"}
    assert models["tutor"].parent == "SmolLM2-135M-Instruct.Q4_1"
    assert server.client().models.retrieve("pirate").id == "pirate"
    status, text, _ = server.get("/v1/models/nope")
    assert status == 404 and "LoRA adapters" in json.loads(text)["error"]["message"]


def test_each_adapter_answers_in_its_own_name(server):
    base, tutor, pirate = (complete(server, m) for m in ("whatever", "tutor", "pirate"))
    assert base.model == "SmolLM2-135M-Instruct.Q4_1" and tutor.model == "tutor" and pirate.model == "pirate"
    texts = {base.choices[0].text, tutor.choices[0].text, pirate.choices[0].text}
    assert len(texts) == 3, texts  # three different greedy answers: the adapters are applied
    # the same prompt through the chat route, streamed, keeps the adapter
    chunks = server.client().chat.completions.create(model="tutor", messages=[{"role": "user", "content": "Hi"}],
                                                     max_tokens=8, temperature=0, stream=True)
    assert {c.model for c in chunks} == {"tutor"}


def test_hearth_run_with_the_adapter_gives_the_servers_answer(server, adapters):
    want = complete(server, "tutor", n=16).choices[0].text
    r = run_hearth("run", DEFAULT_MODEL, "The capital of France is", "-n", 16, "--temp", 0, "--lora", adapters[0])
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip("\n") == want.rstrip("\n")


def test_mixed_batches_change_no_answer(server):
    prompts = [f"Write a short line about the number {i}." for i in range(12)]
    models = ["tutor", "pirate", "base"] * 4
    alone = [complete(server, m, p, n=20).choices[0].text for m, p in zip(models, prompts)]
    with cf.ThreadPoolExecutor(12) as ex:
        together = list(ex.map(lambda mp: complete(server, mp[0], mp[1], n=20).choices[0].text,
                               zip(models, prompts)))
    assert together == alone


def test_prefix_cache_per_adapter(server):
    prompt = "Once upon a time, " * 40
    first = complete(server, "pirate", prompt, n=4)
    again = complete(server, "pirate", prompt, n=4)
    other = complete(server, "tutor", prompt, n=4)
    assert again.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens // 16 * 16 - 16
    assert again.choices[0].text == first.choices[0].text
    assert not (other.usage.prompt_tokens_details and other.usage.prompt_tokens_details.cached_tokens)


def test_anthropic_and_embeddings_take_the_adapter(server):
    import anthropic
    c = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0)
    m = c.messages.create(model="tutor", max_tokens=8, messages=[{"role": "user", "content": "Hi"}])
    assert m.model == "tutor"
    e = server.client().embeddings.create
    base, tutor = e(model="m", input="hello"), e(model="tutor", input="hello")
    assert tutor.model == "tutor" and base.data[0].embedding != tutor.data[0].embedding


@pytest.mark.parametrize("extra, needle", [
    ({"use_dora": True}, "use_dora"),
    ({"peft_type": "IA3"}, "IA3"),
    ({"r": 4}, "shape"),
])
def test_a_bad_adapter_stops_the_server_with_a_reason(tmp_path, extra, needle):
    bad = write_adapter(tmp_path / "bad", 3, extra=extra)
    r = run_hearth("serve", DEFAULT_MODEL, "--port", 0, "--lora", bad, timeout=60)
    assert r.returncode != 0 and needle in r.stderr, r.stderr


def test_an_adapter_for_another_shape_is_refused(tmp_path):
    bad = write_adapter(tmp_path / "small", 4, modules={"self_attn.q_proj": (64, 64)})
    r = run_hearth("run", DEFAULT_MODEL, "Hi", "-n", 2, "--lora", bad)
    assert r.returncode != 0 and "shape" in r.stderr and "q_proj" in r.stderr, r.stderr


def test_chat_verb_answers_with_the_adapter(server, adapters):
    want = server.client().chat.completions.create(model="tutor", messages=[{"role": "user", "content": "Hi"}],
                                                   max_tokens=12, temperature=0).choices[0].message.content
    base = server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}],
                                                   max_tokens=12, temperature=0).choices[0].message.content
    r = run_hearth("chat", DEFAULT_MODEL, "--temp", 0, "--max-tokens", 12, "--lora", adapters[0], input="Hi\n")
    assert r.returncode == 0, r.stderr
    assert want.strip() in r.stdout and want != base, (r.stdout, want, base)
