"""The prefix cache's disk tier (`hearth serve --cache-dir`): a restarted server
answers a prompt it saw before from the blocks on disk, with the same greedy
text; POST /admin/cache/flush makes them durable on demand, shutdown does it
anyway; blocks evicted from a small pool come back from disk; a corrupt file
is never served."""
import json
import pathlib

import pytest

from conftest import DEFAULT_MODEL
from test_server import Server

PROMPT = " ".join(f"The quick brown fox jumps over the lazy dog number {i}." for i in range(40))
OTHER = " ".join(f"A slow green turtle walks under the busy bridge number {i}." for i in range(40))


def complete(server, prompt, n=12):
    r = server.client().completions.create(model="m", prompt=prompt, max_tokens=n, temperature=0,
                                           extra_body={"ignore_eos": True})
    return r.choices[0].text, r.usage.prompt_tokens, r.usage.prompt_tokens_details.cached_tokens


def kvb_files(d):
    return sorted(pathlib.Path(d).glob("*/*.kvb"))


def test_a_restart_starts_warm(tmp_path):
    d = tmp_path / "kv"
    s = Server("--cache-dir", d)
    try:
        cold, n_prompt, cached = complete(s, PROMPT)
        assert cached == 0 and n_prompt > 500
        st, body, _ = s.post("/admin/cache/flush", b"")
        assert st == 200, body
        r = json.loads(body)
        assert r["object"] == "cache.flush" and r["blocks_written"] >= n_prompt // 16
        assert r["blocks_on_disk"] == len(kvb_files(d)) == r["blocks_written"]
        st, body, _ = s.post("/admin/cache/flush", b"")  # nothing new: nothing written
        assert st == 200 and json.loads(body)["blocks_written"] == 0
    finally:
        assert s.stop() == 0, s.output()
    s = Server("--cache-dir", d)
    try:
        text, n_prompt2, cached = complete(s, PROMPT)
        assert text == cold and n_prompt2 == n_prompt
        assert cached >= (n_prompt - 1) // 16 * 16, cached  # every full block before the last token
        disk = s.stats()["engine"]["kv_disk"]
        assert disk["hits"] >= n_prompt // 16 and disk["corrupt"] == 0 and disk["skipped_writes"] == 0
        metrics = s.get("/metrics")[1]
        assert "hearth_kv_disk_hits_total" in metrics and "hearth_kv_disk_blocks" in metrics
        # a prompt never seen: nothing cached, and it joins the disk at shutdown
        _, _, cached = complete(s, OTHER)
        assert cached == 0
    finally:
        assert s.stop() == 0, s.output()
    assert "blocks written at close" in s.output()
    s = Server("--cache-dir", d)
    try:
        _, n_other, cached = complete(s, OTHER)
        assert cached >= (n_other - 1) // 16 * 16
    finally:
        assert s.stop() == 0, s.output()


def test_evicted_blocks_come_back_from_disk(tmp_path):
    """A pool of 36 blocks for two prompts of ~35 each: the second evicts the first, which, having been
    reused, is written to disk on its way out and then comes back from there (not recomputed) with the same
    text; the second, never reused, is not written when the first comes back over it."""
    d = tmp_path / "kv"
    s = Server("--cache-dir", d, "--parallel", 1, "--ctx", 576, "--kv-budget", 13)  # 36 blocks of 368 KB
    try:
        first, n_prompt, _ = complete(s, PROMPT)
        assert complete(s, PROMPT)[2] > 0  # reused from memory
        assert kvb_files(d) == []
        complete(s, OTHER)
        spilled = len(kvb_files(d))
        assert spilled >= (n_prompt - 1) // 16 - 2  # written on eviction, before any flush
        again, _, cached = complete(s, PROMPT)
        assert again == first
        assert cached >= (n_prompt - 1) // 16 * 16 - 16
        assert s.stats()["engine"]["kv_disk"]["hits"] > 0
        assert len(kvb_files(d)) == spilled
    finally:
        assert s.stop() == 0, s.output()


def test_a_corrupt_file_is_not_served(tmp_path):
    d = tmp_path / "kv"
    s = Server("--cache-dir", d)
    try:
        cold, _, _ = complete(s, PROMPT)
    finally:
        assert s.stop() == 0, s.output()
    files = kvb_files(d)
    assert files
    for f in files:  # every block damaged: nothing can be served from disk
        b = bytearray(f.read_bytes())
        b[-7] ^= 0x40
        f.write_bytes(bytes(b))
    s = Server("--cache-dir", d)
    try:
        text, _, cached = complete(s, PROMPT)
        assert text == cold and cached == 0
        assert s.stats()["engine"]["kv_disk"]["corrupt"] == 1  # the first block's file: checked, removed
    finally:
        assert s.stop() == 0, s.output()


def test_flush_without_a_disk_tier_is_a_clear_400():
    s = Server()
    try:
        st, body, _ = s.post("/admin/cache/flush", b"")
        assert st == 400
        e = json.loads(body)["error"]
        assert e["code"] == "no_disk_cache" and "--cache-dir" in e["message"]
        assert "kv_disk" not in s.stats()["engine"]
    finally:
        assert s.stop() == 0, s.output()


def test_a_bad_cache_dir_is_named(hearth, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = hearth("serve", "--port", "1", "--cache-dir", f)
    assert r.returncode != 0 and str(f) in r.stderr


@pytest.mark.parametrize("flag", ["--cache-disk-size", "--cache-write-rate"])
def test_bad_disk_size_is_refused(hearth, flag):
    r = hearth("serve", flag, "0")
    assert r.returncode == 2 and flag in r.stderr


def test_run_reuses_a_prompt_across_processes(hearth, tmp_path):
    d = tmp_path / "kv"
    first = hearth("run", DEFAULT_MODEL, "--cache-dir", d, PROMPT, "-n", 8, "--temp", 0)
    assert first.returncode == 0, first.stderr
    assert "from the prefix cache" not in first.stderr and kvb_files(d)
    again = hearth("run", DEFAULT_MODEL, "--cache-dir", d, PROMPT, "-n", 8, "--temp", 0)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    assert "from the prefix cache" in again.stderr
