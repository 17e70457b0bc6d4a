"""A local chat page to try models: one or two checkpoints side by side, answers streamed token
by token, and each answer's reward scores per criterion on request.

    uv run python chat.py                                   # the embedded SmolLM2-135M
    uv run python chat.py --model smollm2-135m --model runs/NAME/checkpoints/step_000060

The page (Gradio) binds to 127.0.0.1 unless `--host` says otherwise and never makes a public
share link. Each message is answered on its own, as one user turn formatted like a training
prompt (chat_format; thinking off unless ticked): the models do not see earlier turns. "Score"
judges the latest answers with the rubric (judge: the first model's starting weights, or
`--judge-model`) and a trained reward model (`--reward-model`, the values task's by default;
`none`: the rubric alone), for the prompt category the user picks; the reward model loads on the
first "Score". MLX streams belong to the thread that made them, so all model work runs on the main
thread (`ModelThread`) while Gradio's threads serve the page. It does not train, keep
transcripts, or run two requests at once. See knowledge/chat.md.
"""

import argparse
import math
import os
import queue
import socket
import sys
import threading
from dataclasses import dataclass

from core import backend, errors, flags
from core.prompts import CATEGORIES

from gwen import Gwen
from load_weights import MODEL_HELP, ModelSource, resolve
from rewards.registry import Component, RewardContext, parse_spec
from rewards.scorer import Scorer, build_scorer
from rl.reference import starting_judge
from tasks import registry as tasks

DEFAULT_MODEL = "smollm2-135m"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


# ----------------------------------------------------------------------------------------------
# Which weights a --model names (load_weights.resolve) and who judges (reference.starting_judge)


def load_models(refs: list[str], base: str | None, judge_model: str | None, dtype):
    """([(name, Gwen)] for the page, (judge Gwen, context to judge inside)).

    An adapter checkpoint (LoRA or dual) gets its own copy of its base with the adapters left
    switchable; a plain model named twice loads once. The judge is `judge_model`, else the first
    model's starting weights (reference.starting_judge): an adapter checkpoint's base with the
    adapters off, a full checkpoint's starting model, or the model itself."""
    plain = {}

    def load_plain(ref, dtype=dtype) -> Gwen:
        src = ref if isinstance(ref, ModelSource) else resolve(ref)
        if str(src.path) not in plain:
            plain[str(src.path)] = Gwen.load(src, dtype)
        return plain[str(src.path)]

    sources = [resolve(ref, base) for ref in refs]
    models = [
        (src.ref, Gwen.load(src, dtype, merge=False) if src.adapters else load_plain(src))
        for src in sources
    ]
    judge = starting_judge(
        models[0][1], judge_model=judge_model, start=sources[0].start, load=load_plain, dtype=dtype
    )
    return models, judge


# ----------------------------------------------------------------------------------------------
# Answers and scores (run on the model thread)


@dataclass(frozen=True)
class Sampling:
    max_new_tokens: int
    temperature: float
    top_p: float
    seed: int
    thinking: bool = False


def answer_stream(gwen: Gwen, prompt: str, s: Sampling):
    """The growing answer of `gwen` to one user turn (thinking as `s` says)."""
    chat = Gwen(gwen.model, gwen.tokenizer, gwen.system_prompt, enable_thinking=s.thinking)
    chat.sampler = gwen.sampler
    return chat.stream(prompt, s.max_new_tokens, s.temperature, s.top_p, s.seed)


def reward_components(reward_model: str | None) -> list[Component]:
    """The rubric, plus `rm:PATH` when a reward-model folder is given (checked now); `none`:
    the rubric alone."""
    use = reward_model and reward_model != "none"
    rm = parse_spec(f"rm:{reward_model}") if use else []
    return [Component("rubric"), *rm]


def build_scorers(components, judge: tuple, tokenizer, policy=None) -> dict[str, Scorer]:
    """One scorer per component, so the page shows each reward's own numbers."""
    ctx = RewardContext(judge=lambda: judge, tokenizer=tokenizer, policy=policy)
    return {c.label: build_scorer([c], ctx) for c in components}


def lazy_scorers(components, judge: tuple, tokenizer, policy=None):
    """A function returning `build_scorers`' dict, built on its first call: the page starts
    with the models alone, and a reward model loads when an answer is first scored."""
    built = {}

    def get() -> dict[str, Scorer]:
        if not built:
            built.update(build_scorers(components, judge, tokenizer, policy))
        return built

    return get


def score_answers(scorers: dict, prompt: str, answers: list[str], category: str) -> dict:
    """{reward label: registry.Scores of the answers to `prompt` read as a `category` prompt}."""
    if category not in CATEGORIES:
        raise ValueError(f"category {category!r} is not one of {CATEGORIES}")
    n = len(answers)
    return {label: s([prompt] * n, answers, [category] * n) for label, s in scorers.items()}


def _cell(value) -> str:
    if value is None:
        return "n/a"
    return "failed" if not math.isfinite(value) else f"{value:.3f}"


def score_table(names: list[str], results: dict) -> str:
    """Markdown: a row per score (each rubric criterion, the rubric's weighted mean, each reward
    model's score), a column per answer. n/a: the criterion does not judge this category."""
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    lines = [
        "| score | " + " | ".join(esc(n) for n in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for label, scores in results.items():
        if scores.details:
            keys = [k for k in scores.details[0] if k != "reward"]
            for k in keys:
                cells = [_cell(d[k]) for d in scores.details]
                lines.append(f"| {esc(label)}: {k} | " + " | ".join(cells) + " |")
            label = f"{label} (weighted mean)"
        cells = [_cell(float(v)) for v in scores.values]
        lines.append(f"| **{esc(label)}** | " + " | ".join(cells) + " |")
    note = (
        "\n\nRubric scores lie in [0, 1] (the judge's expected 1-5 score, rescaled); n/a: the "
        "criterion does not judge this category. A reward model's score is unbounded, higher "
        "is better."
    )
    return "\n".join(lines) + note


# ----------------------------------------------------------------------------------------------
# The thread that owns the models

_ITEM, _END, _ERROR = range(3)


class ModelThread:
    """Runs model work on the thread that calls `serve` (MLX arrays used from another thread fail
    with "There is no Stream(cpu, 0) in current thread"). Other threads hand it work through
    `iterate` and `call` and get the results, or the exception, as they come."""

    def __init__(self):
        self._jobs = queue.Queue()

    def serve(self, stop: threading.Event | None = None) -> None:
        """Run handed-in jobs one at a time until `stop` is set (forever without one)."""
        while stop is None or not stop.is_set():
            try:
                job = self._jobs.get(timeout=0.1)
            except queue.Empty:
                continue
            job()

    def iterate(self, make_items):
        """Yield the items of `make_items()`, run on the model thread; its exception is raised
        here. Closing this generator early stops the work after its next item."""
        out, cancelled = queue.Queue(), threading.Event()

        def job():
            try:
                for item in make_items():
                    out.put((_ITEM, item))
                    if cancelled.is_set():
                        break
                out.put((_END, None))
            except Exception as e:  # noqa: BLE001  (handed to the caller, who raises it)
                out.put((_ERROR, e))

        self._jobs.put(job)
        try:
            while True:
                kind, value = out.get()
                if kind == _ERROR:
                    raise value
                if kind == _END:
                    return
                yield value
        finally:
            cancelled.set()

    def call(self, fn, *args):
        """fn(*args) run on the model thread."""
        (result,) = self.iterate(lambda: [fn(*args)])
        return result


# ----------------------------------------------------------------------------------------------
# The page


def handlers(gr, models, names: list[str], scorers, worker: ModelThread):
    """The page's two model-backed handlers, run in Gradio's threads: `respond` streams each
    model's answer in turn (a chat column each) and remembers the prompt and answers;
    `score_latest` scores them (`scorers()`: the scorers by label, built on first use). The
    model work itself goes to `worker`."""

    def respond(text, *values):
        histories = [list(h or []) for h in values[: len(models)]]
        temp, top, max_tokens, seed_value, think = values[len(models) :]
        if not text.strip():
            raise gr.Error("Type a message first.")
        s = Sampling(int(max_tokens), float(temp), float(top), int(seed_value or 0), think)
        answers = []
        for i, (_, gwen) in enumerate(models):
            histories[i] += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": ""},
            ]
            try:
                for part in worker.iterate(lambda g=gwen: answer_stream(g, text, s)):
                    histories[i][-1]["content"] = part
                    yield "", *histories, None, ""
            except (ValueError, RuntimeError) as e:
                raise gr.Error(f"{names[i]}: {e}") from e
            answers.append(histories[i][-1]["content"])
        yield "", *histories, {"prompt": text, "answers": answers}, ""

    def score_latest(latest, cat):
        if not latest:
            raise gr.Error("Send a message first: there is no answer to score.")
        try:
            results = worker.call(
                lambda: score_answers(scorers(), latest["prompt"], latest["answers"], cat)
            )
        except (ValueError, RuntimeError) as e:
            raise gr.Error(str(e)) from e
        return score_table(names, results)

    return respond, score_latest


def build_page(models, components, scorers, worker, judge_name: str, start: Sampling):
    """The Gradio Blocks: a chat column per model, sampling settings, the score button (the
    `components`' scores, by `scorers()`, only when it is pressed)."""
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"  # no telemetry, no version check
    import gradio as gr  # start-up: gradio takes ~10 s to import; only the page needs it

    names = [name for name, _ in models]
    if len(names) == 2:
        names = [f"A: {names[0]}", f"B: {names[1]}"]
    rewards_shown = ", ".join(c.label for c in components)
    with gr.Blocks(title="rl-values chat", analytics_enabled=False) as page:
        gr.Markdown(
            f"## rl-values chat\nEach message is answered on its own (one user turn, formatted "
            f"as in training): the models do not see earlier turns. Scores on request: "
            f"{rewards_shown}; judge: `{judge_name}`."
        )
        with gr.Row():
            chats = [
                gr.Chatbot(
                    label=name, elem_id=f"chat-{i}", height=380, buttons=["copy", "copy_all"]
                )
                for i, name in enumerate(names)
            ]
        with gr.Row():
            message = gr.Textbox(
                placeholder="Ask something", show_label=False, elem_id="message", scale=6
            )
            send = gr.Button("Send", variant="primary", elem_id="send", scale=1)
        with gr.Accordion("Sampling", open=False):
            with gr.Row():
                temperature = gr.Slider(
                    0, 2, start.temperature, step=0.05, label="temperature (0 = greedy)",
                    elem_id="temperature",
                )  # fmt: skip
                top_p = gr.Slider(0.05, 1, start.top_p, step=0.05, label="top-p")
                max_new = gr.Slider(
                    1, max(1024, start.max_new_tokens), start.max_new_tokens, step=1,
                    label="max new tokens",
                )  # fmt: skip
                seed = gr.Number(start.seed, precision=0, label="seed")
                thinking = gr.Checkbox(
                    start.thinking, label="thinking (Qwen3 templates)", elem_id="thinking"
                )
        with gr.Row():
            category = gr.Radio(
                list(CATEGORIES),
                value="control",
                label="the prompt's category (both rewards read it)",
                elem_id="category",
                scale=3,
            )
            score = gr.Button("Score the latest answers", elem_id="score", scale=1)
        table = gr.Markdown(elem_id="scores")
        clear = gr.Button("Clear", size="sm")
        last = gr.State(None)

        respond, score_latest = handlers(gr, models, names, scorers, worker)
        inputs = [message, *chats, temperature, top_p, max_new, seed, thinking]
        outputs = [message, *chats, last, table]
        for event in (send.click, message.submit):
            event(respond, inputs, outputs, concurrency_id="model", concurrency_limit=1)
        score.click(score_latest, [last, category], table, concurrency_id="model")
        clear.click(lambda: ("", *([[]] * len(chats)), None, ""), None, outputs, queue=False)
    return page


# ----------------------------------------------------------------------------------------------
# The CLI


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        allow_abbrev=False, description="A local chat page to try one or two models."
    )
    p.add_argument(
        "--model",
        action="append",
        help=f"{MODEL_HELP}; give it twice to compare side by side (default: {DEFAULT_MODEL})",
    )
    p.add_argument(
        "--base", help="base model of adapter checkpoints (default: the run's train_config.json)"
    )
    p.add_argument("--judge-model", help="rubric judge (default: the first model's start)")
    p.add_argument(
        "--reward-model",
        help="a reward-model folder (train_rm.py) to score with, loaded when an answer is first "
        "scored, or none: the rubric alone (default: the values task's default reward model, "
        "tasks.default_reward)",
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default: local only)")
    p.add_argument("--port", type=int, default=7860, help="port to serve on")
    p.add_argument("--max-new-tokens", type=int, default=256, help="initial max new tokens")
    p.add_argument("--temperature", type=float, default=0.7, help="initial temperature")
    flags.add_dtype(p)
    flags.renamed(p, "--max-tokens", "--max-new-tokens")
    return p


def check_port_free(host: str, port: int) -> None:
    """ValueError now, before the models load, if nothing can listen on host:port."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
            s.bind(address)
    except OSError as e:
        raise ValueError(
            f"cannot listen on {host}:{port} ({e.strerror or e}): pick another --port or --host"
        ) from None


def check_args(args) -> list[Component]:
    """Every check that needs no weights; returns the reward components to build."""
    refs = args.model or [DEFAULT_MODEL]
    if len(refs) > 2:
        raise ValueError(f"--model given {len(refs)} times: the page shows one or two models")
    if not 1 <= args.port <= 65535:
        raise ValueError(f"--port {args.port} is not a port number (1-65535)")
    check_port_free(args.host, args.port)
    if args.max_new_tokens < 1 or args.temperature < 0:
        raise ValueError("--max-new-tokens must be >= 1 and --temperature >= 0")
    backend.parse_dtype(args.dtype)
    for ref in refs:
        resolve(ref, args.base)
    if args.judge_model:
        resolve(args.judge_model)
    return reward_components(args.reward_model or tasks.default_reward_model("values"))


@errors.cli
def main(argv=None) -> int:
    """Load the models, serve the page until Ctrl-C. A bad input is one `error:` line, exit 2."""
    args = build_parser().parse_args(argv)
    refs = args.model or [DEFAULT_MODEL]
    with errors.as_user_error(ValueError):  # the flags, then models that do not load
        components = check_args(args)
        backend.announce()
        dtype = backend.parse_dtype(args.dtype)
        models, judge = load_models(refs, args.base, args.judge_model, dtype)
        scorers = lazy_scorers(components, judge, models[0][1].tokenizer, refs[0])
    judge_name = args.judge_model or f"starting weights of {refs[0]}"
    start = Sampling(args.max_new_tokens, args.temperature, 1.0, 0)
    worker = ModelThread()
    page = build_page(models, components, scorers, worker, judge_name, start)
    if args.host not in LOCAL_HOSTS:
        print(f"warning: serving on {args.host}: anyone who reaches it can use it", file=sys.stderr)
    page.queue(default_concurrency_limit=1)
    try:
        page.launch(
            server_name=args.host,
            server_port=args.port,
            share=False,
            show_error=True,
            ssr_mode=False,
            prevent_thread_lock=True,
            quiet=True,
        )
    except OSError as e:
        raise errors.UserError(
            f"cannot serve on {args.host}:{args.port} ({e}); try another --port"
        ) from e
    print(f"chat page: {page.local_url} (Ctrl-C stops it)", flush=True)
    try:
        worker.serve()
    except KeyboardInterrupt:
        pass
    finally:
        page.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
