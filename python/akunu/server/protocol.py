"""The request bodies the server accepts, as pydantic models with OpenAI's field names and ranges.
Unknown fields are refused (extra="forbid"), so a setting the server would not honour is a 400
that names it, never silently ignored. Fields OpenAI defines that akunu does not implement are
listed in UNSUPPORTED with the reason the error gives."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Strict(BaseModel):
    """Unknown fields and values of the wrong JSON type are refused, as OpenAI does: "max_tokens":
    "5" or "stream": 0 is a 400, never coerced (pydantic's lax mode would take both); 5.0 is 5."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _json_integers(cls, v):
        return json_integers(v)


def json_integers(v):
    """JSON has one number type: 2.0 is the integer 2 (JSON Schema's "integer" agrees), so integral
    floats become ints, also in lists (token ids); 2.5 stays a float and an integer field refuses it.
    Objects are left alone (a JSON schema's numbers are its own)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, list):
        return [x if isinstance(x, dict) else json_integers(x) for x in v]
    return v


# OpenAI request fields akunu refuses when set to anything but their neutral value.
UNSUPPORTED = {
    "logit_bias": "logit_bias is not supported",
    "suffix": "suffix (insertion) is not supported",
    "best_of": "best_of other than 1 is not supported; use n",
    "audio": "audio output is not supported: akunu serves text models",
    "modalities": "only the text modality is supported",
    "prediction": "predicted outputs are not supported",
    "reasoning_effort": "reasoning_effort is not supported",
    "web_search_options": "web search is not supported",
    "functions": "the deprecated functions field is not supported; use tools",
    "function_call": "the deprecated function_call field is not supported; use tool_choice",
}


# --- sampling settings shared by both endpoints ----------------------------------------------

class SamplingFields(Strict):
    model: str
    max_tokens: Optional[int] = Field(None, ge=1)
    temperature: Optional[float] = Field(None, ge=0, le=2)
    top_p: Optional[float] = Field(None, gt=0, le=1)
    top_k: Optional[int] = Field(None, ge=0)
    min_p: Optional[float] = Field(None, ge=0, le=1)
    repeat_penalty: Optional[float] = Field(None, gt=0)  # llama.cpp's, as its server accepts
    frequency_penalty: Optional[float] = Field(None, ge=-2, le=2)
    presence_penalty: Optional[float] = Field(None, ge=-2, le=2)
    seed: Optional[int] = Field(None, ge=0, lt=2**64)
    stop: Optional[Union[str, list[str]]] = None
    n: int = Field(1, ge=1, le=16)
    stream: bool = False
    stream_options: Optional["StreamOptions"] = None
    user: Optional[str] = None  # an end-user id for the caller's records; akunu only logs it

    # Accepted so that the error can name them (see UNSUPPORTED).
    logit_bias: Optional[dict[str, float]] = None
    best_of: Optional[int] = None

    @field_validator("stop")
    @classmethod
    def _stops(cls, v):
        stops = [v] if isinstance(v, str) else v
        if stops is not None:
            if len(stops) > 16:
                raise ValueError("at most 16 stop strings")
            if any(not s for s in stops):
                raise ValueError("stop strings must be non-empty")
        return v


class StreamOptions(Strict):
    include_usage: bool = False


# --- chat completions ----------------------------------------------------------------------

class TextPart(Strict):
    type: Literal["text"]
    text: str


class OtherPart(BaseModel):
    """Any other content part (image_url, input_audio, file): named in the 400 it gets."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str

    @field_validator("type")
    @classmethod
    def _not_text(cls, v):
        if v == "text":  # a text part that TextPart refused: its error, not "type 'text' is not supported"
            raise ValueError("a text part is {\"type\": \"text\", \"text\": \"...\"}")
        return v


class FunctionCall(Strict):
    name: str
    arguments: str


class ToolCall(Strict):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Optional[Union[str, list[Union[TextPart, OtherPart]]]] = None
    name: Optional[str] = None
    tool_calls: Optional[list[ToolCall]] = None
    tool_call_id: Optional[str] = None
    refusal: Optional[str] = None

    def text(self) -> str:
        """The message's text: the string, or its text parts joined by newlines (as vLLM and
        akunu.tool_calls join them; other parts are refused by plans.chat_messages)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content)


class FunctionDefinition(Strict):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: Optional[str] = None
    parameters: Optional[dict[str, Any]] = None
    strict: Optional[bool] = None


class Tool(Strict):
    type: Literal["function"]
    function: FunctionDefinition


class NamedFunction(Strict):
    name: str


class NamedToolChoice(Strict):
    type: Literal["function"]
    function: NamedFunction


class JsonSchemaFormat(Strict):
    name: str = Field(min_length=1, max_length=64)
    description: Optional[str] = None
    schema_: Optional[Union[dict[str, Any], bool]] = Field(None, alias="schema")
    strict: Optional[bool] = None


class ResponseFormat(Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: Optional[JsonSchemaFormat] = None


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: Optional[int] = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: Optional[int] = Field(None, ge=0, le=20)
    response_format: Optional[ResponseFormat] = None
    tools: Optional[list[Tool]] = None
    tool_choice: Optional[Union[Literal["none", "auto", "required"], NamedToolChoice]] = None
    parallel_tool_calls: bool = True
    metadata: Optional[dict[str, str]] = None  # stored nowhere; accepted as OpenAI does without store
    store: Optional[bool] = None


# --- text completions ----------------------------------------------------------------------

class CompletionRequest(SamplingFields):
    prompt: Union[str, list[str], list[int], list[list[int]]]
    echo: bool = False
    logprobs: Optional[int] = Field(None, ge=0, le=5)
    suffix: Optional[str] = None


# --- tokenizer endpoints ---------------------------------------------------------------------

class TokenizeRequest(Strict):
    model: Optional[str] = None  # may be left out when one model is served
    prompt: Optional[str] = None
    messages: Optional[list[ChatMessage]] = Field(None, min_length=1)
    add_special_tokens: bool = True
    add_generation_prompt: bool = True


class DetokenizeRequest(Strict):
    model: Optional[str] = None
    tokens: list[int]


SamplingFields.model_rebuild()
