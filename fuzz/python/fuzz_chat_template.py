"""atheris target: the input is a chat template (a GGUF's tokenizer.chat_template, a checkpoint's
tokenizer_config.json "chat_template": Jinja from a downloaded file). akunu.chat_template's
check_template (what Model(chat_template=...) runs) and render_chat (what chat() runs, with a
conversation and with tools) must either return text or raise ValueError naming the problem:
never another exception, a hang (fuzz/run.py's -timeout), a crash or unbounded memory.
"""
import sys

if __name__ == "__main__":  # fuzzing: akunu's modules are first imported under atheris's coverage
    import atheris

    with atheris.instrument_imports(include=["akunu", "jinja2"]):
        import akunu.chat_template  # noqa: F401

from akunu import template_sandbox
from akunu.chat_template import check_template, render_chat

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi!"}, {"role": "user", "content": "Weather in Paris?"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def fuzz_one_input(data: bytes) -> None:
    template = data.decode("utf-8", errors="replace")
    try:
        check_template(template)
    except ValueError:
        pass
    for tools in (None, TOOLS):
        try:
            text = render_chat(template, MESSAGES, "<s>", "</s>", True, tools)
        except ValueError:
            continue
        assert isinstance(text, str)


def main() -> None:
    import atheris  # only to fuzz: tests/test_fuzz_regressions.py imports fuzz_one_input without it

    # Three renders per input must stay under libFuzzer's -timeout=10: a template still running
    # after 1 s is stopped (the ValueError of the deadline), which is handled, not a hang.
    template_sandbox.RENDER_SECONDS = 1.0
    atheris.Setup(sys.argv, fuzz_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
