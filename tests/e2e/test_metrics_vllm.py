"""/metrics under vLLM's names (its V1 engine's), read with prometheus_client's own
parser, so that dashboards and alerts written for vLLM read hearth unchanged: the
request counters by finish reason, token counters that equal the usage the API
returned, prefix-cache token counters, the gauges, and the request histograms
(time to first token, inter-token latency, end to end, queue) with cumulative
buckets that end at +Inf = count."""
import pytest
from prometheus_client.parser import text_string_to_metric_families

from test_server import Server

MODEL = "SmolLM2-135M-Instruct.Q4_1"
HISTS = ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
         "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds")


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 4)
    yield s
    assert s.stop() == 0, s.output()


def families(server):
    status, text, headers = server.get("/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(text) if f.name.startswith("vllm:")}


def value(fams, family, sample=None, **labels):
    f = fams[family]
    for s in f.samples:
        if (sample is None or s.name == sample) and all(s.labels.get(k) == v for k, v in labels.items()):
            assert s.labels["model_name"] == MODEL
            return s.value
    raise KeyError((family, sample, labels))


def hist(fams, name):
    f = fams[name]
    assert f.type == "histogram"
    buckets = [(s.labels["le"], s.value) for s in f.samples if s.name == name + "_bucket"]
    counts = [v for _, v in buckets]
    assert counts == sorted(counts) and buckets[-1][0] == "+Inf"  # cumulative, ending at +Inf
    count = value(fams, name, name + "_count")
    assert buckets[-1][1] == count
    return count, value(fams, name, name + "_sum"), buckets


def test_counters_equal_what_the_api_returned(server):
    c = server.client()
    before = families(server)
    base_len = value(before, "vllm:request_success", finished_reason="length")
    base_prompt, base_gen = value(before, "vllm:prompt_tokens"), value(before, "vllm:generation_tokens")
    base_itl = hist(before, "vllm:inter_token_latency_seconds")[0]
    base_ttft = hist(before, "vllm:time_to_first_token_seconds")[0]
    rs = [c.completions.create(model="m", prompt=f"Count to {i}:", max_tokens=8, temperature=0) for i in range(3)]
    after = families(server)
    assert value(after, "vllm:request_success", finished_reason="length") == base_len + 3
    assert value(after, "vllm:prompt_tokens") == base_prompt + sum(r.usage.prompt_tokens for r in rs)
    generated = sum(r.usage.completion_tokens for r in rs)
    assert value(after, "vllm:generation_tokens") == base_gen + generated == base_gen + 24
    assert hist(after, "vllm:inter_token_latency_seconds")[0] == base_itl + 3 * 7  # a gap between each two tokens
    count, total, _ = hist(after, "vllm:time_to_first_token_seconds")
    assert count == base_ttft + 3 and total > 0
    for name in HISTS:
        hist(after, name)
    assert value(after, "vllm:num_requests_running") == 0 and value(after, "vllm:num_requests_waiting") == 0
    assert 0 <= value(after, "vllm:kv_cache_usage_perc") <= 1


def test_a_stop_is_counted_as_one(server):
    c = server.client()
    text = c.completions.create(model="m", prompt="The capital of France is", max_tokens=8, temperature=0)
    stop = text.choices[0].text.strip()[:3]
    before = value(families(server), "vllm:request_success", finished_reason="stop")
    r = c.completions.create(model="m", prompt="The capital of France is", max_tokens=8, temperature=0, stop=[stop])
    assert r.choices[0].finish_reason == "stop"
    assert value(families(server), "vllm:request_success", finished_reason="stop") == before + 1


def test_prefix_cache_counts_tokens(server):
    c = server.client()
    prompt = "A long shared preamble about lighthouses. " * 30
    before = families(server)
    q0, h0 = value(before, "vllm:prefix_cache_queries"), value(before, "vllm:prefix_cache_hits")
    first = c.completions.create(model="m", prompt=prompt, max_tokens=2, temperature=0)
    again = c.completions.create(model="m", prompt=prompt, max_tokens=2, temperature=0)
    after = families(server)
    assert value(after, "vllm:prefix_cache_queries") == q0 + first.usage.prompt_tokens + again.usage.prompt_tokens
    hits = again.usage.prompt_tokens_details.cached_tokens
    assert hits > 0 and value(after, "vllm:prefix_cache_hits") >= h0 + hits
