"""The chat page at `/` of `akunu serve`, in headless Chromium (playwright), on SmolLM2.

The browser is Debian's chromium (apt-get install chromium; .ci/run installs it): playwright's own
browser download is not used. A missing browser fails these tests; it never skips them.

What the page must do: list the served models, stream a reply token by token into the page, the
same reply the API gives for the same request at the page's settings (temperature 0 here), carry
the conversation into the next turn, show the stats line (tokens from the usage chunk, timings),
stop a generation (the server's worker goes idle), start a new chat even while a reply streams,
and send the API key typed into it (without one, the server's 401 shows as an error)."""

from __future__ import annotations

import os
import re
import shutil
import time

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from server_harness import running_server, smollm2_config

MODEL = "smollm2"
MAX_TOKENS = 48
TIMEOUT_MS = 60_000
STATS = re.compile(r"^(\d+) prompt tokens \((\d+) cached\), (\d+) generated, first text after \d+ ms, "
                   r"\d+\.\d s in all( \(stopped at max tokens\))?$")

expect.set_options(timeout=TIMEOUT_MS)

# Records every text the newest assistant message shows, to tell a streamed reply (growing in
# several steps) from one that appears at once.
WATCH_REPLY = """() => {
  window.replyTexts = [];
  new MutationObserver(() => {
    const all = document.querySelectorAll('.msg.assistant');
    if (all.length) window.replyTexts.push(all[all.length - 1].textContent);
  }).observe(document.getElementById('log'), {childList: true, subtree: true, characterData: true});
}"""


def chromium_executable() -> str:
    """Debian's chromium binary (the /usr/bin/chromium wrapper script execs it)."""
    for path in (os.environ.get("AKUNU_CHROMIUM"), "/usr/lib/chromium/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser")):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    pytest.fail("no Chromium: install Debian's (apt-get install -y chromium; .ci/run does) or set AKUNU_CHROMIUM",
                pytrace=False)


@pytest.fixture(scope="module")
def browser():
    executable = chromium_executable()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def server(smollm2_path):
    with running_server(smollm2_config(smollm2_path, MODEL)) as s:
        yield s


@pytest.fixture
def page(browser, server):
    """The chat page, loaded, at temperature 0 and MAX_TOKENS; fails the test on a script error."""
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(server.url + "/")
    expect(page.locator("#model option")).to_have_count(1)
    page.fill("#temperature", "0")
    page.fill("#max_tokens", str(MAX_TOKENS))
    page.evaluate(WATCH_REPLY)
    yield page
    context.close()
    assert not errors, errors


def send(page, text: str) -> None:
    page.fill("#input", text)
    page.press("#input", "Enter")


def wait_for_reply(page, turn: int) -> str:
    """The text of the `turn`-th (from 1) assistant message, once its stats line is shown."""
    expect(page.locator(".stats")).to_have_count(turn)
    return page.locator(".msg.assistant").nth(turn - 1).text_content()


def api_reply(server, messages: list[dict], **settings) -> dict:
    body = {"model": MODEL, "messages": messages, "temperature": 0, "max_tokens": MAX_TOKENS, **settings}
    r = httpx.post(server.v1 + "/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def wait_idle(server, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while server.worker(MODEL).busy or server.worker(MODEL).waiting:
        assert time.monotonic() < deadline, "the server still generates for a stopped chat"
        time.sleep(0.05)


def test_model_dropdown_lists_the_served_model(page):
    assert page.locator("#model option").all_text_contents() == [MODEL]
    assert page.locator("#model").input_value() == MODEL


def test_reply_streams_and_equals_the_api(page, server):
    question = "Write a short poem about the sea."
    send(page, question)
    reply = wait_for_reply(page, 1)
    expected = api_reply(server, [{"role": "user", "content": question}])
    assert reply == expected["choices"][0]["message"]["content"] and reply
    # Streamed: the message grew in several steps, each a prefix of the reply.
    shown = [t for t in page.evaluate("window.replyTexts") if t]
    assert len(set(shown)) >= 3, shown
    assert all(reply.startswith(t) for t in shown), shown
    # The stats line: the usage the server counted for this request.
    stats = STATS.match(page.locator(".stats").text_content())
    assert stats, page.locator(".stats").text_content()
    usage = expected["usage"]
    assert (int(stats[1]), int(stats[3])) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert bool(stats[4]) == (expected["choices"][0]["finish_reason"] == "length")
    assert page.locator("#send").is_enabled() and page.locator("#stop").is_disabled()


def test_second_turn_carries_the_conversation(page, server):
    send(page, "Name a color.")
    first = wait_for_reply(page, 1)
    send(page, "Name another one.")
    second = wait_for_reply(page, 2)
    history = [{"role": "user", "content": "Name a color."}, {"role": "assistant", "content": first},
               {"role": "user", "content": "Name another one."}]
    assert second == api_reply(server, history)["choices"][0]["message"]["content"]


def test_stop_ends_the_generation_on_the_server(page, server):
    page.fill("#max_tokens", "2000")
    send(page, "Write a very long story about a dragon.")
    expect(page.locator(".msg.assistant")).not_to_have_text("")  # text is streaming
    assert server.worker(MODEL).busy
    page.click("#stop")
    expect(page.locator("#stop")).to_be_disabled()
    wait_idle(server)
    stopped = page.locator(".msg.assistant").first.text_content()
    assert stopped and page.locator(".error").count() == 0
    # The stopped reply stays in the conversation: the next request carries it.
    page.fill("#max_tokens", str(MAX_TOKENS))
    with page.expect_request("**/v1/chat/completions") as request:
        send(page, "Thanks.")
    sent = request.value.post_data_json["messages"]
    assert sent[:2] == [{"role": "user", "content": "Write a very long story about a dragon."},
                        {"role": "assistant", "content": stopped}], sent
    wait_for_reply(page, 1)


def test_new_chat_while_streaming_starts_clean(page, server):
    """New chat aborts the streaming request and is ready at once: the next message starts a
    conversation of its own (the old reply must not join it)."""
    failed = []
    page.on("requestfailed", lambda r: failed.append((r.url, r.failure)))
    page.fill("#max_tokens", "2000")
    send(page, "Write a very long story about a dragon.")
    expect(page.locator(".msg.assistant")).not_to_have_text("")
    page.click("#clear")
    page.fill("#max_tokens", str(MAX_TOKENS))
    with page.expect_request("**/v1/chat/completions") as request:
        send(page, "Hello!")
    assert request.value.post_data_json["messages"] == [{"role": "user", "content": "Hello!"}]
    assert wait_for_reply(page, 1) == api_reply(server, [{"role": "user", "content": "Hello!"}])[
        "choices"][0]["message"]["content"]
    assert page.locator(".msg").count() == 2 and page.locator(".error").count() == 0
    assert [url for url, _ in failed] == [server.v1 + "/chat/completions"], failed  # the aborted one
    wait_idle(server)


def test_api_key(browser, smollm2_path):
    """Without the key the page shows the server's 401 (listing models, sending); with the key
    typed in, the models load and a reply streams."""
    with running_server(smollm2_config(smollm2_path, MODEL, api_key="sekrit")) as server:
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url + "/")
        expect(page.locator(".msg.error")).to_have_count(1)
        expect(page.locator(".msg.error")).to_contain_text("Could not list the models: missing or wrong API key")
        page.fill("#temperature", "0")
        page.fill("#max_tokens", str(MAX_TOKENS))
        send(page, "Hi")
        expect(page.locator(".msg.error")).to_have_count(2)
        expect(page.locator(".msg.error").nth(1)).to_have_text(re.compile(r"^Error: missing or wrong API key"))
        assert page.locator(".stats").count() == 0

        page.fill("#api_key", "wrong")
        page.press("#api_key", "Tab")  # "change": the page lists the models again, with the key
        expect(page.locator(".msg.error")).to_have_count(3)
        page.fill("#api_key", "sekrit")
        page.press("#api_key", "Tab")
        expect(page.locator("#model option")).to_have_count(1)
        assert page.locator("#model").input_value() == MODEL
        with page.expect_request("**/v1/chat/completions") as request:
            send(page, "Hi")
        assert request.value.headers["authorization"] == "Bearer sekrit"
        # The failed turn left the conversation: this request holds only the new message.
        assert request.value.post_data_json["messages"] == [{"role": "user", "content": "Hi"}]
        reply = wait_for_reply(page, 1)
        expected = httpx.post(server.v1 + "/chat/completions", headers={"Authorization": "Bearer sekrit"},
                              json={"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "temperature": 0,
                                    "max_tokens": MAX_TOKENS}, timeout=60).json()
        assert reply == expected["choices"][0]["message"]["content"]
        context.close()
        assert not errors, errors
