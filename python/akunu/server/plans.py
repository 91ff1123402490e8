"""From a validated request to a generation Plan: the checks pydantic cannot make (they need the
model: prompt length, grammar compilation, content parts), the chat template, and the sampling
settings with OpenAI's defaults. Every problem is an APIError naming the field."""

from __future__ import annotations

from typing import Optional, Union

from ..grammar import Grammar, GrammarError
from ..model import Model
from ..sampling import SamplingParams
from ..tool_calls import ToolSession, prepare_tools
from .config import ServerConfig
from .errors import APIError
from .generation import Plan
from .protocol import ChatCompletionRequest, CompletionRequest, OtherPart, SamplingFields, TokenizeRequest

OPENAI_TEMPERATURE = 1.0    # OpenAI's default when a request leaves temperature out
COMPLETIONS_MAX_TOKENS = 16  # OpenAI's default max_tokens for /v1/completions


def check_unsupported(req: SamplingFields) -> None:
    if req.logit_bias:
        raise APIError(400, "logit_bias is not supported", param="logit_bias")
    if req.best_of not in (None, 1):
        raise APIError(400, "best_of other than 1 is not supported; use n", param="best_of")
    if req.stream_options is not None and not req.stream:
        raise APIError(400, "stream_options is only allowed with stream: true", param="stream_options")


def sampling_params(req: SamplingFields, max_tokens: int, grammar: Optional[Grammar]) -> SamplingParams:
    settings = {
        "temperature": OPENAI_TEMPERATURE if req.temperature is None else req.temperature,
        "max_tokens": max_tokens,
        "seed": req.seed,
        "stop": req.stop,
        "grammar": grammar,
    }
    for name in ("top_p", "top_k", "min_p", "repeat_penalty", "frequency_penalty", "presence_penalty"):
        value = getattr(req, name)
        if value is not None:
            settings[name] = value
    if (req.frequency_penalty or req.presence_penalty) and req.repeat_penalty is None:
        # OpenAI counts every token generated so far: the penalties' window (which counts only
        # generated tokens, SamplingParams) then spans the whole reply.
        settings["repeat_last_n"] = max(max_tokens, 64)
    try:
        return SamplingParams(**settings)
    except (ValueError, TypeError) as e:
        raise APIError(400, str(e)) from None


def max_tokens_for(requested: Optional[int], default: int, prompt_tokens: int, model: Model, config: ServerConfig,
                   param: str, prompt_param: str) -> int:
    """The request's max_tokens (`param` names its field) checked against the server's limit, or
    the default; a prompt (field `prompt_param`) that leaves no room is a 400."""
    ctx = model.context_length
    if prompt_tokens >= ctx:
        raise APIError(400, f"this model's maximum context length is {ctx} tokens, but the prompt has {prompt_tokens} "
                            "tokens; shorten it", param=prompt_param, code="context_length_exceeded")
    if requested is not None and requested > config.max_tokens_limit:
        raise APIError(400, f"{param} is {requested}; this server allows at most {config.max_tokens_limit}",
                       param=param)
    # Past the context's end the generation stops with finish_reason "length". A request that
    # leaves max_tokens out gets the default, within the server's limit too.
    return requested if requested is not None else min(default, config.max_tokens_limit, ctx - prompt_tokens)


# --- chat ----------------------------------------------------------------------------------

def chat_messages(req: Union[ChatCompletionRequest, TokenizeRequest]) -> list[dict]:
    """The conversation as the chat template takes it (role, content text)."""
    out = []
    for i, m in enumerate(req.messages):
        if isinstance(m.content, list):
            for j, part in enumerate(m.content):
                if isinstance(part, OtherPart):
                    raise APIError(400, f"content part type '{part.type}' is not supported: akunu serves text "
                                        "models (text parts only)", param=f"messages[{i}].content[{j}].type")
        if m.content is None and not m.tool_calls and m.role != "assistant":
            raise APIError(400, f"messages[{i}] ({m.role}) has no content", param=f"messages[{i}].content")
        message = {"role": "system" if m.role == "developer" else m.role, "content": m.text()}
        if m.name is not None:
            message["name"] = m.name
        if m.tool_calls:
            message["tool_calls"] = [c.model_dump() for c in m.tool_calls]
        if m.tool_call_id is not None:
            message["tool_call_id"] = m.tool_call_id
        out.append(message)
    return out


def tool_session(req: ChatCompletionRequest, model: Model, messages: list[dict]) -> Optional[ToolSession]:
    """The request's tools prepared for the model (prompt, grammar, parser), or None without tools."""
    if req.tools is None and req.tool_choice is None:
        return None
    tools = [t.model_dump(exclude_none=True) for t in req.tools or []]
    choice = req.tool_choice.model_dump() if hasattr(req.tool_choice, "model_dump") else req.tool_choice
    try:
        session = prepare_tools(model, messages, tools, choice, parallel_tool_calls=req.parallel_tool_calls)
    except GrammarError as e:
        raise APIError(400, f"tools: {e}", param="tools") from None
    except ValueError as e:
        message = str(e)
        param = message.split(" ", 1)[0] if message.startswith(("tools", "tool_choice", "messages")) else "tools"
        raise APIError(400, message, param=param) from None
    if session.grammar is not None and req.response_format is not None and req.response_format.type != "text":
        raise APIError(400, "response_format cannot be combined with tools unless tool_choice is 'none'",
                       param="response_format")
    return session


def chat_prompt(model: Model, messages: list[dict], add_generation_prompt: bool = True) -> str:
    """The model's chat template applied to `messages` (from chat_messages); a conversation the
    template refuses (its raise_exception, say roles that do not alternate) is a 400."""
    try:
        return model.format_chat(messages, add_generation_prompt)
    except ValueError as e:
        raise APIError(400, f"the model's chat template cannot format these messages: {e}", param="messages") from None


def response_grammar(req: ChatCompletionRequest) -> Optional[Grammar]:
    rf = req.response_format
    if rf is None or rf.type == "text":
        return None
    if rf.type == "json_object":
        return Grammar.json()
    if rf.json_schema is None or rf.json_schema.schema_ is None:
        raise APIError(400, "response_format json_schema needs json_schema.schema", param="response_format.json_schema")
    try:
        return Grammar.json_schema(rf.json_schema.schema_)
    except GrammarError as e:
        raise APIError(400, f"response_format json_schema: {e}", param="response_format.json_schema.schema") from None


def chat_plan(req: ChatCompletionRequest, model: Model, config: ServerConfig, prompt_text: str,
              grammar: Optional[Grammar]) -> Plan:
    check_unsupported(req)
    ids = model.tokenizer.encode(prompt_text, add_special=False, parse_special=True)
    requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    param = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
    max_tokens = max_tokens_for(requested, config.default_max_tokens, len(ids), model, config, param, "messages")
    if req.top_logprobs is not None and not req.logprobs:
        raise APIError(400, "top_logprobs needs logprobs: true", param="top_logprobs")
    logprobs = (req.top_logprobs or 0) if req.logprobs else None
    return Plan([ids], sampling_params(req, max_tokens, grammar), n=req.n, logprobs=logprobs)


# --- completions ----------------------------------------------------------------------------

def completion_prompts(req: CompletionRequest, model: Model) -> list[list[int]]:
    p = req.prompt
    if isinstance(p, str):
        prompts = [p]
    elif p and all(isinstance(x, int) for x in p):
        prompts = [list(p)]
    else:
        prompts = list(p)
    if not prompts:
        raise APIError(400, "prompt is empty", param="prompt")
    vocab = model.config["vocab_size"]
    out = []
    for i, one in enumerate(prompts):
        if isinstance(one, str):
            ids = model.tokenizer.encode(one, add_special=True, parse_special=True)
        else:
            ids = list(one)
            bad = [t for t in ids if not 0 <= t < vocab]
            if bad:
                raise APIError(400, f"prompt token {bad[0]} is outside the vocabulary [0, {vocab})", param="prompt")
        if not ids:
            raise APIError(400, "prompt is empty" + (f" (prompt[{i}])" if len(prompts) > 1 else ""), param="prompt")
        out.append(ids)
    return out


def completion_plan(req: CompletionRequest, model: Model, config: ServerConfig) -> Plan:
    check_unsupported(req)
    if req.suffix is not None:
        raise APIError(400, "suffix (insertion) is not supported", param="suffix")
    if req.echo and req.logprobs is not None:
        raise APIError(400, "echo with logprobs (the prompt's logprobs) is not supported", param="echo")
    prompts = completion_prompts(req, model)
    if len(prompts) * req.n > 64:
        raise APIError(400, f"{len(prompts)} prompts x n={req.n} choices is more than 64", param="n")
    longest = max(len(p) for p in prompts)
    max_tokens = max_tokens_for(req.max_tokens, COMPLETIONS_MAX_TOKENS, longest, model, config, "max_tokens", "prompt")
    return Plan(prompts, sampling_params(req, max_tokens, None), n=req.n, logprobs=req.logprobs)
