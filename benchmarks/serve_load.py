"""Load test of `akunu serve` on loopback (issue 35, acceptance 2): many concurrent streaming
clients against one model, bounded in count and time.

    python benchmarks/serve_load.py [--model GGUF] [--backend cpu|cuda] [--clients 32] [--requests 4]
                                    [--max-tokens 32] [--max-queue 16] [--disconnect-every 4]

The server runs as its own process (`akunu serve`, the model on one worker, `--max-queue` smaller
than the clients). Each client has a prompt of its own; first every prompt is run alone, one at a
time (greedy, temperature 0): that reply is what the client must get under load. Then all clients
start at once, each sending `--requests` streamed chat requests one after another; every
`--disconnect-every`-th request closes its connection after the first text. A 429 is honoured once
(the client waits Retry-After, capped at --max-wait, and retries); a second 429 is counted.

Checks (any failure: exit status 1):
- every request streams to [DONE] or is a clean 429 (OpenAI error body, Retry-After): no 5xx, no
  broken stream, no timeout, the whole load within --time-limit;
- no output mixes: each completed reply is exactly its prompt's reply alone (text and token count),
  each disconnected one a prefix of it;
- disconnects stop the generation: a long streamed completion (one that runs to max_tokens alone)
  is disconnected after its first text, and the worker must be idle within a quarter of the time
  the whole generation takes alone;
- the server survives: process alive, /health idle (nothing running or queued), no 5xx in its log,
  and it still answers.

Reported: time to first text and total time per completed request (p50 / p99), aggregate tokens/s
(completion tokens of completed requests over the load's wall time), 429s, disconnects.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import httpx

REPO = Path(__file__).resolve().parent.parent
MODEL = "model"  # the name the server gives the model here
THINGS = ["apple", "river", "violin", "glacier", "lighthouse", "volcano", "bicycle", "library", "desert", "comet",
          "teapot", "forest", "submarine", "honeybee", "castle", "rainbow", "compass", "octopus", "windmill", "cactus",
          "telescope", "harbor", "pyramid", "kangaroo", "snowflake", "canyon", "lantern", "whale", "orchard",
          "tornado", "piano", "island", "robot", "meadow", "dragonfly", "bridge", "candle", "galaxy", "pumpkin",
          "waterfall"]
PROBE_PROMPT = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"  # a completion that counts on: runs to max_tokens


def prompt_of(client: int) -> str:
    thing = THINGS[client % len(THINGS)] + (f" number {client // len(THINGS) + 1}" if client >= len(THINGS) else "")
    return f"In one sentence, what is a {thing}?"


def chat_body(client: int, max_tokens: int) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": prompt_of(client)}], "temperature": 0,
            "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True}}


# --- one streamed request ---------------------------------------------------------------------

@dataclass
class Outcome:
    client: int
    index: int                   # which of the client's requests
    disconnect: bool             # planned to close the connection after the first text
    status: int = 0              # the final answer's HTTP status (0: no answer: transport error)
    first_429: bool = False      # the first try got a 429 (then waited Retry-After and retried once)
    text: str = ""
    completion_tokens: Optional[int] = None  # usage of a stream read to its end
    finish_reason: Optional[str] = None
    first_text_s: Optional[float] = None     # from sending (the try that was answered) to the first text
    total_s: Optional[float] = None
    done: bool = False           # read to data: [DONE]
    problem: str = ""            # what was wrong with the answer, if anything


async def stream_once(http: httpx.AsyncClient, url: str, body: dict, disconnect: bool, out: Outcome) -> Optional[float]:
    """One try. Fills `out` from the answer; returns the seconds to wait before a retry when the
    answer is a clean 429, else None."""
    start = time.perf_counter()
    async with http.stream("POST", url, json=body) as r:
        out.status = r.status_code
        if r.status_code != 200:
            raw = await r.aread()
            try:
                error = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                out.problem = f"{r.status_code} without an OpenAI error body: {raw[:200]!r}"
                return None
            if r.status_code != 429:
                out.problem = f"{r.status_code}: {error.get('message')}"
                return None
            retry = r.headers.get("retry-after", "")
            if error.get("type") != "rate_limit_error" or not retry.isdigit():
                out.problem = f"unclean 429: type {error.get('type')!r}, Retry-After {retry!r}"
                return None
            return float(retry)
        async for line in r.aiter_lines():
            if not line:
                continue
            if not line.startswith("data: "):
                out.problem = f"not a server-sent event: {line[:200]!r}"
                return None
            data = line[6:]
            if data == "[DONE]":
                out.done = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                out.problem = f"error event: {chunk['error'].get('message')}"
                return None
            if chunk.get("usage"):
                out.completion_tokens = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices", []):
                out.finish_reason = choice.get("finish_reason") or out.finish_reason
                piece = choice.get("delta", {}).get("content") or choice.get("text")
                if piece:
                    if out.first_text_s is None:
                        out.first_text_s = time.perf_counter() - start
                    out.text += piece
            if disconnect and out.text:
                break  # leaving the block closes the connection mid-stream
        out.total_s = time.perf_counter() - start
    if not out.done and not (disconnect and out.text):
        out.problem = out.problem or "the stream ended before data: [DONE]"
    return None


async def request(http: httpx.AsyncClient, url: str, body: dict, out: Outcome, max_wait: float) -> Outcome:
    try:
        wait = await stream_once(http, url, body, out.disconnect, out)
        if wait is not None:  # honour Retry-After once
            out.first_429 = True
            await asyncio.sleep(min(wait, max_wait))
            wait = await stream_once(http, url, body, out.disconnect, out)
    except (httpx.HTTPError, ValueError) as e:  # transport error, timeout, malformed JSON
        out.status, out.problem = 0, f"{type(e).__name__}: {e}"
    return out


# --- the load -------------------------------------------------------------------------------

@dataclass
class Plan:
    clients: int = 32
    requests: int = 4
    max_tokens: int = 32
    disconnect_every: int = 4    # every n-th request (counted over all clients) disconnects
    max_wait: float = 30.0       # the longest Retry-After a client honours
    time_limit: float = 600.0    # seconds for the whole load

    def disconnects(self, client: int, index: int) -> bool:
        return self.disconnect_every > 0 and (client * self.requests + index) % self.disconnect_every == 1


def http_client(connections: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=10.0),
                             limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections))


async def alone(base: str, plan: Plan) -> dict[int, Outcome]:
    """Every client's request run alone, one after another: the replies the load must reproduce."""
    async with http_client(2) as http:
        return {c: await request(http, base + "/v1/chat/completions", chat_body(c, plan.max_tokens),
                                 Outcome(c, -1, False), plan.max_wait) for c in range(plan.clients)}


async def load(base: str, plan: Plan) -> tuple[list[Outcome], float]:
    """All clients at once, each its requests in turn: every outcome, and the wall time."""
    url = base + "/v1/chat/completions"

    async def client(c: int, http) -> list[Outcome]:
        return [await request(http, url, chat_body(c, plan.max_tokens), Outcome(c, i, plan.disconnects(c, i)),
                              plan.max_wait) for i in range(plan.requests)]

    start = time.perf_counter()
    async with http_client(plan.clients + 4) as http:
        per_client = await asyncio.wait_for(asyncio.gather(*(client(c, http) for c in range(plan.clients))),
                                            plan.time_limit)
    return [o for outcomes in per_client for o in outcomes], time.perf_counter() - start


def check_load(outcomes: list[Outcome], expected: dict[int, Outcome]) -> list[str]:
    """What went wrong: unclean answers, mixed or wrong outputs. Empty when all is well."""
    problems = []
    for o in outcomes:
        name = f"client {o.client} request {o.index}"
        want = expected[o.client]
        if o.problem:
            problems.append(f"{name}: {o.problem}")
        elif o.status == 429:
            continue  # a clean 429, twice
        elif o.disconnect:
            if not o.text or not want.text.startswith(o.text):
                problems.append(f"{name} (disconnected): {o.text!r} is not a beginning of its reply {want.text!r}")
        elif (o.text, o.completion_tokens) != (want.text, want.completion_tokens):
            problems.append(f"{name}: got {o.text!r} ({o.completion_tokens} tokens), alone it was {want.text!r} "
                            f"({want.completion_tokens} tokens)")
    if not any(o.first_429 for o in outcomes):
        problems.append("no request got a 429: the queue limit was never reached (more clients, or a smaller "
                        "--max-queue)")
    if not any(o.disconnect and o.status == 200 for o in outcomes):
        problems.append("no request disconnected mid-stream")
    return problems


# --- disconnect probe -------------------------------------------------------------------------

async def health(http: httpx.AsyncClient, base: str) -> dict:
    r = await http.get(base + "/health")
    r.raise_for_status()
    return r.json()["models"][MODEL]


async def wait_idle(http: httpx.AsyncClient, base: str, limit: float) -> Optional[float]:
    """Seconds until the model's worker runs and queues nothing (None: not within `limit`)."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        state = await health(http, base)
        if not state["busy"] and not state["waiting"]:
            return time.perf_counter() - start
        await asyncio.sleep(0.005)
    return None


@dataclass
class Probe:
    tokens: int                          # max_tokens of the long completion
    whole_s: float = 0.0                 # the long completion alone, read to its end
    whole_finish: Optional[str] = None
    received: str = ""                   # what the disconnected stream got before closing
    idle_after_s: Optional[float] = None  # from closing to the worker idle
    problems: list = field(default_factory=list)


async def disconnect_probe(base: str, tokens: int, timing: bool = True) -> Probe:
    """A long completion alone (it must run to max_tokens), then the same one disconnected after
    its first text: how soon the worker is idle. With `timing`, idle later than a quarter of the
    whole completion's time is a problem (the pytest smoke test checks the engine's token count
    instead of times)."""
    probe = Probe(tokens)
    url = base + "/v1/completions"
    body = {"model": MODEL, "prompt": PROBE_PROMPT, "temperature": 0, "max_tokens": tokens, "stream": True}
    async with http_client(4) as http:
        whole = await request(http, url, body, Outcome(-1, 0, False), 0)
        probe.whole_s, probe.whole_finish = whole.total_s or 0.0, whole.finish_reason
        if whole.problem or whole.finish_reason != "length":
            probe.problems.append(f"the probe's completion alone: {whole.problem or whole.finish_reason!r}, not "
                                  f"'length' (it must run to max_tokens)")
            return probe
        cut = await request(http, url, body, Outcome(-1, 1, True), 0)
        closed = time.perf_counter()
        probe.received = cut.text
        if cut.problem:
            probe.problems.append(f"the disconnected probe: {cut.problem}")
        idle = await wait_idle(http, base, max(10.0, 2 * probe.whole_s))
        probe.idle_after_s = None if idle is None else time.perf_counter() - closed
        if not whole.text.startswith(cut.text):
            probe.problems.append(f"the disconnected probe got {cut.text!r}, not a beginning of {whole.text[:80]!r}")
        if probe.idle_after_s is None:
            probe.problems.append(f"the worker is still busy {max(10.0, 2 * probe.whole_s):.0f} s after the disconnect")
        elif timing and probe.idle_after_s > probe.whole_s / 4:
            probe.problems.append(f"the worker was not idle within {probe.whole_s / 4:.2f} s of the disconnect (a "
                                  f"quarter of the whole completion's {probe.whole_s:.2f} s): the generation went on")
    return probe


async def after_load(base: str, expected: Outcome, plan: Plan) -> list[str]:
    """The server after the load: idle, and still answering the same reply."""
    problems = []
    async with http_client(2) as http:
        if await wait_idle(http, base, 10.0) is None:
            problems.append(f"the worker is not idle 10 s after the load: {await health(http, base)}")
        again = await request(http, base + "/v1/chat/completions", chat_body(expected.client, plan.max_tokens),
                              Outcome(expected.client, -1, False), plan.max_wait)
    if again.problem or again.text != expected.text:
        problems.append(f"after the load: {again.problem or repr(again.text)}, expected {expected.text!r}")
    return problems


# --- report ---------------------------------------------------------------------------------

def percentiles(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0] * 1000:.0f} / {values[0] * 1000:.0f}"
    q = statistics.quantiles(values, n=100, method="inclusive")
    return f"{statistics.median(values) * 1000:.0f} / {q[98] * 1000:.0f}"


def summary(outcomes: list[Outcome], wall: float) -> dict:
    completed = [o for o in outcomes if o.status == 200 and o.done and not o.disconnect]
    tokens = sum(o.completion_tokens or 0 for o in completed)
    return {"requests": len(outcomes), "completed": len(completed),
            "disconnected": sum(o.disconnect and o.status == 200 for o in outcomes),
            "first_429": sum(o.first_429 for o in outcomes), "final_429": sum(o.status == 429 for o in outcomes),
            "first_text": percentiles([o.first_text_s for o in completed if o.first_text_s is not None]),
            "total": percentiles([o.total_s for o in completed if o.total_s is not None]),
            "tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall if wall > 0 else 0.0}


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        name = re.search(r"^Model name:\s*(.+)$", out, re.M)
        cpu = name.group(1).strip() if name else platform.processor()
    except (OSError, subprocess.CalledProcessError):
        cpu = platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}"


def git_revision() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


# --- the server process ---------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: str, backend: str, max_queue: int, max_tokens_limit: int, log) -> tuple[subprocess.Popen, str]:
    port = free_port()
    config = {"models": [{"name": MODEL, "path": os.path.abspath(model), "backend": backend}], "port": port,
              "max_queue": max_queue, "max_tokens_limit": max_tokens_limit}
    config_file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(config, config_file)
    config_file.close()
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from akunu.cli import main; sys.exit(main())",
                             "serve", "--config", config_file.name], stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"akunu serve exited with {proc.returncode} before answering")
        try:
            if httpx.get(base + "/health", timeout=1).status_code == 200:
                os.unlink(config_file.name)
                return proc, base
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("akunu serve did not answer within 120 s")


def server_errors(log_path: str) -> list[str]:
    """Lines of the server's log that tell of a 5xx or a crash."""
    text = Path(log_path).read_text(errors="replace")
    return [line for line in text.splitlines()
            if re.search(r"\s(/\S*)\s5\d\d\s", line) or "Traceback" in line or "Exception" in line]


async def run(base: str, plan: Plan, probe_tokens: int) -> tuple[dict, Probe, list[str], dict[int, Outcome]]:
    expected = await alone(base, plan)
    problems = [f"client {c} alone: {o.problem}" for c, o in expected.items() if o.problem or not o.done]
    if problems:
        return {}, Probe(probe_tokens), problems, expected
    outcomes, wall = await load(base, plan)
    problems += check_load(outcomes, expected)
    probe = await disconnect_probe(base, probe_tokens)
    problems += probe.problems
    problems += await after_load(base, expected[0], plan)
    return summary(outcomes, wall), probe, problems, expected


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="GGUF file (default: SmolLM2-135M-Instruct Q4_1)")
    ap.add_argument("--backend", default="cpu", help="cpu (default), cuda, auto")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=4, help="streamed chat requests per client, one after another")
    ap.add_argument("--max-tokens", type=int, default=32, help="per request (greedy)")
    ap.add_argument("--max-queue", type=int, default=16,
                    help="the server's queue per model (its default); more waiting get 429")
    ap.add_argument("--disconnect-every", type=int, default=4, help="every n-th request disconnects mid-stream")
    ap.add_argument("--max-wait", type=float, default=30.0, help="the longest Retry-After a client honours (s)")
    ap.add_argument("--probe-tokens", type=int, default=512, help="max_tokens of the disconnect probe")
    ap.add_argument("--time-limit", type=float, default=600.0, help="seconds for the whole load")
    a = ap.parse_args()
    import akunu

    model = a.model or str(akunu.default_model_path())
    plan = Plan(a.clients, a.requests, a.max_tokens, a.disconnect_every, a.max_wait, a.time_limit)
    with tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False) as log:
        proc, base = start_server(model, a.backend, a.max_queue, max(a.max_tokens, a.probe_tokens), log)
        try:
            print(f"akunu serve load test: model {Path(model).name}, backend {a.backend}, akunu {akunu.__version__} "
                  f"({git_revision()})")
            print(f"machine: {machine()}")
            print(f"{plan.clients} clients x {plan.requests} streamed chat requests, max_tokens {plan.max_tokens} "
                  f"(greedy), server max_queue {a.max_queue}, every {plan.disconnect_every}th request disconnects "
                  f"after its first text, Retry-After honoured once (at most {plan.max_wait:.0f} s)")
            try:
                result, probe, problems, expected = asyncio.run(run(base, plan, a.probe_tokens))
            except asyncio.TimeoutError:
                result, probe, problems, expected = {}, Probe(a.probe_tokens), [
                    f"the load did not finish within {plan.time_limit:.0f} s"], {}
            if proc.poll() is not None:
                problems.append(f"the server process exited with {proc.returncode}")
        finally:
            if proc.poll() is None:
                proc.send_signal(2)  # SIGINT: uvicorn's graceful shutdown
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        problems += [f"server log: {line}" for line in server_errors(log.name)]
    if expected:
        alone_first = percentiles([o.first_text_s for o in expected.values() if o.first_text_s is not None])
        alone_total = percentiles([o.total_s for o in expected.values() if o.total_s is not None])
        print(f"alone (one request at a time, {len(expected)} prompts): first text p50 / p99 {alone_first} ms, "
              f"total {alone_total} ms")
    if result:
        print()
        print("| requests | completed | disconnected | 429 first try | 429 after retry | first text p50 / p99 (ms) "
              "| total p50 / p99 (ms) | completion tokens | wall (s) | aggregate tokens/s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        print(f"| {result['requests']} | {result['completed']} | {result['disconnected']} | {result['first_429']} | "
              f"{result['final_429']} | {result['first_text']} | {result['total']} | {result['tokens']} | "
              f"{result['wall_s']:.1f} | {result['tokens_per_s']:.1f} |")
        print()
    if probe.idle_after_s is not None:
        print(f"disconnect probe: a {probe.tokens}-token completion takes {probe.whole_s:.2f} s alone; disconnected "
              f"after its first text ({probe.received!r}), the worker was idle {probe.idle_after_s * 1000:.0f} ms "
              f"later")
    print(f"log: {log.name}")
    if problems:
        print(f"FAILED: {len(problems)} problem(s)")
        for p in problems[:50]:
            print(f"  {p}")
        return 1
    print("OK: every request completed or got a clean 429, no output mixed, disconnects stopped the generation, "
          "the server is healthy")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
