"""The chat page at / in a real browser: Debian's headless Chromium driven
by Selenium (both installed by scripts/setup.sh) against `hearth serve` with
the default model. The page's answers are the API's answers, a second turn
carries the first, Stop cancels the generation on the server, and a server
with an API key serves the page and takes the key the user enters."""
import time

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from test_server import SLOW, Server

Q = "What is the capital of France?"


@pytest.fixture(scope="module")
def browser():
    o = Options()
    o.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1000,800"):
        o.add_argument(a)
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
    yield d
    d.quit()


def wait_for(fn, what, timeout=60):
    deadline = time.time() + timeout * SLOW
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def open_page(d, server, **settings):
    d.get(server.url + "/")
    d.execute_script("localStorage.clear()")
    d.get(server.url + "/")
    d.find_element(By.ID, "toggle-settings").click()
    for k, v in settings.items():
        d.find_element(By.ID, k.replace("_", "-")).send_keys(str(v))


def answers(d):
    return d.find_elements(By.CSS_SELECTOR, ".msg.assistant")


def ask(d, text, n):
    """Type text, press Enter, wait for the n-th answer to end; return it."""
    d.find_element(By.ID, "prompt").send_keys(text + "\n")
    wait_for(lambda: len(answers(d)) >= n and answers(d)[n - 1].get_attribute("data-state") != "streaming",
             f"answer {n}")
    return answers(d)[n - 1]


def no_console_errors(d):
    errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 1)
    yield s
    assert s.stop() == 0, s.output()


def test_the_page_answers_as_the_api(browser, server):
    open_page(browser, server, temperature=0, max_tokens=12)
    assert wait_for(lambda: browser.find_element(By.ID, "model").text, "the model's name") == \
        "SmolLM2-135M-Instruct.Q4_1"
    a1 = ask(browser, Q, 1)
    c = server.client()
    o1 = c.chat.completions.create(model="m", messages=[{"role": "user", "content": Q}], max_tokens=12,
                                   temperature=0)
    assert a1.get_attribute("data-state") == "done"
    assert a1.find_element(By.CLASS_NAME, "text").text == o1.choices[0].message.content.strip()
    stats = a1.find_element(By.CLASS_NAME, "stats")
    assert int(stats.get_attribute("data-completion-tokens")) == o1.usage.completion_tokens
    assert "tok/s" in stats.text and "finish: length" in stats.text
    # the second turn carries the first, as the API would have it
    a2 = ask(browser, "And of Germany?", 2)
    o2 = c.chat.completions.create(model="m", max_tokens=12, temperature=0, messages=[
        {"role": "user", "content": Q}, {"role": "assistant", "content": o1.choices[0].message.content},
        {"role": "user", "content": "And of Germany?"}])
    assert a2.find_element(By.CLASS_NAME, "text").text == o2.choices[0].message.content.strip()
    # a new chat forgets it
    browser.find_element(By.ID, "new-chat").click()
    assert answers(browser) == []
    no_console_errors(browser)


def test_stop_cancels_the_generation(browser, server):
    story = "Write a very long story about a dragon who learns to cook."
    full = server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": story}],
                                                   max_tokens=400, temperature=0)
    # the greedy answer is long, so Stop comes while it is being generated
    assert full.usage.completion_tokens >= 200, full.usage
    before = server.stats()["requests"]
    open_page(browser, server, temperature=0, max_tokens=400)
    browser.find_element(By.ID, "prompt").send_keys(story + "\n")
    wait_for(lambda: answers(browser) and answers(browser)[0].find_elements(By.CLASS_NAME, "text"), "first tokens")
    browser.find_element(By.ID, "stop").click()
    a = answers(browser)[0]
    wait_for(lambda: a.get_attribute("data-state") == "stopped", "the stopped state")
    partial = a.find_element(By.CLASS_NAME, "text").text
    assert partial and full.choices[0].message.content.startswith(partial)
    assert browser.find_element(By.ID, "send").is_enabled() and not browser.find_element(By.ID, "stop").is_enabled()
    # the server saw the client go and cancelled the sequence
    def cancelled():
        r = server.stats()["requests"]
        return r if r["cancelled"] > before["cancelled"] else None
    after = wait_for(cancelled, "the server's cancellation")
    assert after["client_disconnected"] == before["client_disconnected"] + 1
    wait_for(lambda: server.stats()["queue"]["running"] == 0, "the sequence's end")


def test_a_server_with_a_key(browser):
    s = Server("--api-key", "sekrit", "--parallel", 1)
    try:
        open_page(browser, s, temperature=0, max_tokens=4)
        a = ask(browser, "Hi", 1)
        assert a.get_attribute("data-state") == "error" and "API key" in a.text
        browser.find_element(By.ID, "api-key").send_keys("sekrit")
        browser.find_element(By.ID, "prompt").click()  # the key's change event
        assert wait_for(lambda: browser.find_element(By.ID, "model").text, "the model's name")
        assert ask(browser, "Hi", 2).get_attribute("data-state") == "done"
    finally:
        assert s.stop() == 0, s.output()


def test_the_model_list_picks_an_adapter(browser, tmp_path):
    """An adapter (given at start, or loaded while the page is open) is picked in the settings' model list and
    answers as the API answers for it."""
    from selenium.webdriver.support.ui import Select
    from test_lora import write_adapter
    s = Server("--parallel", 2, "--runtime-lora")
    try:
        open_page(browser, s, temperature=0, max_tokens=12)
        wait_for(lambda: browser.find_element(By.ID, "model").text, "the model's name")
        d = write_adapter(tmp_path / "tutor", 5)
        assert s.post("/v1/load_lora_adapter", {"lora_name": "tutor", "lora_path": str(d)})[0] == 200
        browser.find_element(By.ID, "toggle-settings").click()  # closes the panel
        browser.find_element(By.ID, "toggle-settings").click()  # reopens it: the list is read again
        sel = Select(browser.find_element(By.ID, "model-select"))
        wait_for(lambda: len(sel.options) == 2, "the adapter in the list")
        sel.select_by_value("tutor")
        assert browser.find_element(By.ID, "model").text == "tutor"
        got = ask(browser, Q, 1).find_element(By.CSS_SELECTOR, ".text").text
        c = s.client()
        want = c.chat.completions.create(model="tutor", messages=[{"role": "user", "content": Q}], max_tokens=12,
                                         temperature=0).choices[0].message.content
        base = c.chat.completions.create(model="m", messages=[{"role": "user", "content": Q}], max_tokens=12,
                                         temperature=0).choices[0].message.content
        assert got == want.strip() and want != base, (got, want, base)
    finally:
        assert s.stop() == 0, s.output()
