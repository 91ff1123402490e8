"""Built-in chat templates of the model families, for models that ship none.

A GGUF's tokenizer.chat_template (or a checkpoint's tokenizer_config chat_template) is used when
present; without one, `family_template` picks the family's format from the special tokens the
vocabulary has and the architecture, the way llama.cpp's llm_chat_detect_template recognizes
templates by their marker tokens (llama.cpp src/llama-chat.cpp). Each template reproduces the text
of llama.cpp's llm_chat_apply_template for that format (tests/test_chat_templates.py compares them
through llama-cpp-python), written as Jinja so that chat_template.py is the only renderer.

Every template starts with `bos_token`: Model.format_chat passes the BOS text when the tokenizer
adds BOS (encode(add_special=True)) and "" otherwise, which is what llama.cpp's tokenization of
its formatted chat (add_special on) produces.
"""

from __future__ import annotations

from typing import Callable

# ChatML (llama.cpp "chatml"; Qwen, and the default when nothing else fits):
# <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
CHATML = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Gemma 1/2/3 turns (llama.cpp "gemma", google/gemma-7b-it): <start_of_turn>{user|model}\n{content,
# trimmed}<end_of_turn>\n; "assistant" is "model"; system messages have no turn of their own: they
# are trimmed, joined and put before the next non-model message, followed by a blank line.
GEMMA = (
    "{{ bos_token }}"
    "{% set ns = namespace(system='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{% set ns.system = ns.system + message['content'] | trim %}"
    "{% else %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\n' }}"
    "{% if ns.system and role != 'model' %}{{ ns.system + '\n\n' }}{% set ns.system = '' %}{% endif %}"
    "{{ message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)

# Llama 3 headers (llama.cpp "llama3"): <|start_header_id|>{role}<|end_header_id|>\n\n{content,
# trimmed}<|eot_id|> ... <|start_header_id|>assistant<|end_header_id|>\n\n
LLAMA3 = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

# Llama 2 chat (llama.cpp "llama2-sys-bos", Meta's format, huggingface.co/blog/llama2):
# [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]{answer}</s><s>[INST] {user} [/INST]...
# No generation prompt: the model answers after [/INST].
LLAMA2 = (
    "{{ bos_token + '[INST] ' }}"
    "{% set ns = namespace(inside=true) %}"
    "{% for message in messages %}"
    "{% if not ns.inside %}{{ bos_token + '[INST] ' }}{% set ns.inside = true %}{% endif %}"
    "{% if message['role'] == 'system' %}{{ '<<SYS>>\n' + message['content'] + '\n<</SYS>>\n\n' }}"
    "{% elif message['role'] == 'user' %}{{ message['content'] + ' [/INST]' }}"
    "{% else %}{{ message['content'] + eos_token }}{% set ns.inside = false %}"
    "{% endif %}"
    "{% endfor %}"
)


def _mistral_v3(trailing_space: str, trim_answer: bool) -> str:
    # Mistral v3 / v3-tekken (llama.cpp "mistral-v3" / "mistral-v3-tekken", the Mistral cookbook's
    # chat_templates.md): [INST] {system}\n\n{user}[/INST] {answer}</s>[INST] ...; tekken has no
    # space after [INST] / before the answer and does not trim the answer.
    answer = "message['content'] | trim" if trim_answer else "message['content']"
    return (
        "{{ bos_token }}"
        "{% set ns = namespace(inside=false) %}"
        "{% for message in messages %}"
        f"{{% if not ns.inside %}}{{{{ '[INST]{trailing_space}' }}}}{{% set ns.inside = true %}}{{% endif %}}"
        "{% if message['role'] == 'system' %}{{ message['content'] + '\n\n' }}"
        "{% elif message['role'] == 'user' %}{{ message['content'] + '[/INST]' }}"
        f"{{% else %}}{{{{ '{trailing_space}' + {answer} + eos_token }}}}{{% set ns.inside = false %}}"
        "{% endif %}"
        "{% endfor %}"
    )


def _mistral_v7(space: str) -> str:
    # Mistral v7 / v7-tekken (llama.cpp "mistral-v7" / "mistral-v7-tekken", Mistral-Large-2411 and
    # Mistral-Small-3.1 model cards): [SYSTEM_PROMPT] {system}[/SYSTEM_PROMPT][INST] {user}[/INST]
    # {answer}</s>; tekken without the spaces.
    return (
        "{{ bos_token }}"
        "{% for message in messages %}"
        f"{{% if message['role'] == 'system' %}}{{{{ '[SYSTEM_PROMPT]{space}' + message['content'] + '[/SYSTEM_PROMPT]' }}}}"
        f"{{% elif message['role'] == 'user' %}}{{{{ '[INST]{space}' + message['content'] + '[/INST]' }}}}"
        f"{{% else %}}{{{{ '{space}' + message['content'] + eos_token }}}}"
        "{% endif %}"
        "{% endfor %}"
    )


# Phi-3 (llama.cpp "phi3", microsoft/Phi-3-mini-4k-instruct): <|{role}|>\n{content}<|end|>\n ...
# <|assistant|>\n
PHI3 = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)

# Phi-4 (llama.cpp "phi4", microsoft/phi-4): ChatML with <|im_sep|> after the role and no newlines.
PHI4 = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + '<|im_end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}"
)

# DeepSeek-V3 / R1 (llama.cpp "deepseek3"): {system}\n\n<｜User｜>{user}<｜Assistant｜>{answer}
# <｜end▁of▁sentence｜> ... <｜Assistant｜>
DEEPSEEK3 = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'] + '\n\n' }}"
    "{% elif message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}"
    "{% elif message['role'] == 'assistant' %}{{ '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<｜Assistant｜>' }}{% endif %}"
)

# Command-R (llama.cpp "command-r", CohereForAI/c4ai-command-r-plus): <|START_OF_TURN_TOKEN|> then
# <|SYSTEM_TOKEN|> / <|USER_TOKEN|> / <|CHATBOT_TOKEN|>, the content trimmed, <|END_OF_TURN_TOKEN|>.
COMMAND_R = (
    "{{ bos_token }}"
    "{% set tokens = {'system': '<|SYSTEM_TOKEN|>', 'user': '<|USER_TOKEN|>', 'assistant': '<|CHATBOT_TOKEN|>'} %}"
    "{% for message in messages %}"
    "{% if message['role'] in tokens %}"
    "{{ '<|START_OF_TURN_TOKEN|>' + tokens[message['role']] + message['content'] | trim + '<|END_OF_TURN_TOKEN|>' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{% endif %}"
)

# IBM Granite 3.x (llama.cpp "granite"): <|start_of_role|>{role}<|end_of_role|>{content}<|end_of_text|>\n
GRANITE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_of_role|>assistant<|end_of_role|>' }}{% endif %}"
)

# Name (llama.cpp's name of the same format) -> template.
FAMILY_TEMPLATES = {
    "chatml": CHATML,
    "gemma": GEMMA,
    "llama3": LLAMA3,
    "llama2-sys-bos": LLAMA2,
    "mistral-v3": _mistral_v3(" ", True),
    "mistral-v3-tekken": _mistral_v3("", False),
    "mistral-v7": _mistral_v7(" "),
    "mistral-v7-tekken": _mistral_v7(""),
    "phi3": PHI3,
    "phi4": PHI4,
    "deepseek3": DEEPSEEK3,
    "command-r": COMMAND_R,
    "granite": GRANITE,
}


def detect_family(architecture: str, has_token: Callable[[str], bool], tokenizer_model: str = "") -> str:
    """The FAMILY_TEMPLATES name for a model without a chat template.

    The vocabulary's special tokens decide first, as llama.cpp's detection reads a template's
    marker tokens (a Llama-architecture GGUF may be a ChatML or Mistral model); then the
    architecture; ChatML when nothing fits. `has_token(text)` says whether the vocabulary has
    `text` as one token; `tokenizer_model` is "llama" (SentencePiece) or "gpt2" (byte-level BPE).
    """
    has_all = lambda *texts: all(has_token(t) for t in texts)  # noqa: E731
    if has_all("<|im_start|>", "<|im_sep|>", "<|im_end|>"):
        return "phi4"
    if has_all("<|im_start|>", "<|im_end|>"):
        return "chatml"
    if has_all("<｜User｜>", "<｜Assistant｜>"):
        return "deepseek3"
    if has_all("<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>"):
        return "command-r"
    if has_all("<|start_of_role|>", "<|end_of_role|>"):
        return "granite"
    if has_all("<start_of_turn>", "<end_of_turn>"):
        return "gemma"
    if has_all("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"):
        return "llama3"
    if has_all("<|user|>", "<|assistant|>", "<|end|>"):
        return "phi3"
    if has_all("[INST]", "[/INST]"):
        tekken = "-tekken" if tokenizer_model == "gpt2" else ""
        return ("mistral-v7" if has_token("[SYSTEM_PROMPT]") else "mistral-v3") + tekken
    arch = architecture.lower()
    if arch.startswith("gemma"):
        return "gemma"
    if arch.startswith("phi3"):
        return "phi3"
    if arch.startswith("qwen"):
        return "chatml"
    if arch == "llama" and tokenizer_model == "llama":  # SentencePiece Llama (Llama 2, Mistral v0.1)
        return "llama2-sys-bos"
    return "chatml"
