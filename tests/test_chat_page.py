"""chat.py's page in a real browser: Playwright drives Debian's chromium (headless, by its
executable path) against `chat.py` serving the embedded model twice, side by side, on 127.0.0.1.
The page loads with thinking off, a message gets a streamed answer in both columns, the score
button shows every rubric criterion, the page asks nothing of any other host, and Ctrl-C stops
the server cleanly. Skips only where no chromium executable exists (.ci/run installs Debian's
package when missing)."""

import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "What is the capital of France?"


def chromium_path() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return found or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """chat.py on a free local port, greedy, 24 new tokens; yields (url, process, log path)."""
    port = free_port()
    log = tmp_path_factory.mktemp("chat") / "server.log"
    cmd = [sys.executable, "chat.py", "--port", str(port), "--max-new-tokens", "24"]
    cmd += ["--temperature", "0", "--model", "smollm2-135m", "--model", "smollm2-135m"]
    with open(log, "w") as out:
        # A shell that starts pytest in the background (`cmd &`) hands it SIGINT ignored, and
        # the child would inherit that: give chat.py the default so Ctrl-C reaches it.
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + 240
    while True:
        if proc.poll() is not None:
            pytest.fail(f"chat.py exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.time() > deadline:
            proc.kill()
            pytest.fail(f"chat.py did not serve {url} in 240 s:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    yield url, proc, log
    if proc.poll() is None:
        proc.kill()
        proc.wait()


# Every text the first column's latest answer shows, recorded in the page as it changes.
RECORD_ANSWERS = """() => {
    window.seen = [];
    const chat = document.querySelector('#chat-0');
    new MutationObserver(() => {
        const bots = chat.querySelectorAll('.message.bot');
        const text = bots.length ? bots[bots.length - 1].innerText.trim() : '';
        if (text && text !== window.seen[window.seen.length - 1]) window.seen.push(text);
    }).observe(chat, {childList: true, subtree: true, characterData: true});
}"""


@pytest.mark.slow
def test_page_streams_answers_and_shows_scores(server, tmp_path):
    executable = chromium_path()
    if executable is None:
        pytest.skip("no chromium executable: `apt-get install chromium` (.ci/run does it as root)")
    from playwright.sync_api import sync_playwright

    url, proc, log = server
    outside = []
    with sync_playwright() as p:
        flags = ["--no-sandbox", "--disable-dev-shm-usage"]  # root in CI; small /dev/shm
        browser = p.chromium.launch(executable_path=executable, args=flags)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("request", lambda r: None if r.url.startswith(url) else outside.append(r.url))
        page.goto(url)
        page.wait_for_selector("#message textarea", timeout=60_000)
        assert page.title() == "rl-values chat"
        page.get_by_text("Sampling", exact=True).click()
        assert not page.is_checked("#thinking input[type=checkbox]"), "thinking is off at start"
        assert float(page.input_value("#temperature input[type=number]")) == 0.0
        page.evaluate(RECORD_ANSWERS)
        page.fill("#message textarea", PROMPT)
        page.click("#send")
        page.wait_for_function(
            "document.querySelector('#chat-1 .message.bot')?.innerText.includes('.')",
            timeout=120_000,
        )
        answers = [page.inner_text(f"#chat-{i} .message.bot").strip() for i in (0, 1)]
        seen = page.evaluate("window.seen")
        page.click("#score")
        page.wait_for_function(
            "document.querySelector('#scores')?.innerText.includes('weighted mean')",
            timeout=120_000,
        )
        table = page.inner_text("#scores")
        page.screenshot(path=str(tmp_path / "chat_page.png"), full_page=True)
        browser.close()
    print(f"screenshot: {tmp_path / 'chat_page.png'}")

    assert answers[0] == answers[1] and "Paris" in answers[0], answers
    growing = [s for s in seen if answers[0].startswith(s)]  # not Gradio's "Loading content"
    assert len(growing) >= 3 and seen[-1] == answers[0], f"not streamed: {seen}"
    rows = {
        line.split("\t")[0]: line.split("\t")[1:] for line in table.splitlines() if "\t" in line
    }
    for criterion in ("curiosity", "nonsense", "scrutiny"):  # a control prompt: all three apply
        a, b = rows[f"rubric: {criterion}"]
        assert a == b and 0.0 <= float(a) <= 1.0, (criterion, rows)
    assert outside == [], f"the page fetched from other hosts: {outside}"

    proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chat.py did not stop within 60 s of Ctrl-C:\n{log.read_text()[-3000:]}")
    assert code == 0, log.read_text()[-3000:]
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
    assert f"chat page: {url}" in log.read_text()


def test_bad_input_is_one_error_line_and_exit_2(tmp_path, capsys):
    import chat

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    cases = [
        ["--model", "smollm2-135m", "--model", "smollm2-135m", "--model", "smollm2-135m"],
        ["--port", str(taken.getsockname()[1])],
        ["--model", str(tmp_path / "missing")],
        ["--reward-model", str(tmp_path)],
        ["--port", "0"],
        ["--dtype", "float8"],
    ]
    for args in cases:
        assert chat.main(args) == 2, args
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, lines)
    taken.close()
