"""Which JSON Schema keywords a grammar enforces, so that none is dropped without a word.

llguidance refuses the standard keywords it does not implement ("Unimplemented keys", if/then/else,
uniqueItems, ...) but skips keywords it does not know at all: a typo such as "maxLenght", OpenAPI's
"nullable", "format" on a number. check_keywords finds those before the schema is compiled
(docs/adr/0016-grammar-engine.md; tests/data/json_schemas_loose.json pins the engine's behaviour).
with_format_bounds adds what a format implies and the engine's format expressions leave out."""

from __future__ import annotations

from typing import Any

# JSON Schema 2020-12 (with the 2019-09 / draft-07 names still in use) keywords: llguidance enforces
# them or refuses them itself.
STANDARD = {
    "$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor",
    "$vocabulary", "$comment", "$defs", "definitions",
    "prefixItems", "items", "additionalItems", "contains", "additionalProperties", "properties", "patternProperties",
    "dependentSchemas", "dependencies", "propertyNames", "if", "then", "else", "allOf", "anyOf", "oneOf", "not",
    "unevaluatedItems", "unevaluatedProperties",
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength",
    "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties",
    "minProperties", "required", "dependentRequired", "format",
}
# Annotations: they describe, never restrict, so a grammar has nothing to enforce. (contentEncoding and
# contentMediaType are annotations in 2020-12; "discriminator" is OpenAPI's hint that Pydantic writes
# next to oneOf, and llguidance reads it.)
ANNOTATIONS = {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
               "contentEncoding", "contentMediaType", "contentSchema", "discriminator", "x-guidance"}

SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
SCHEMA_LISTS = ("prefixItems", "allOf", "anyOf", "oneOf")
SCHEMAS = ("items", "additionalItems", "contains", "additionalProperties", "propertyNames", "if", "then", "else",
           "not", "unevaluatedItems", "unevaluatedProperties")


def subschemas(schema: dict, path: str = ""):
    """(path, subschema) of every schema directly inside `schema` (its properties, items, branches...)."""
    for key, value in schema.items():
        where = f"{path}/{key}"
        if key in SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                yield f"{where}/{name}", sub
        elif key in SCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                yield f"{where}/{i}", sub
        elif key in SCHEMAS:
            for i, sub in enumerate(value if isinstance(value, list) else [value]):  # draft-07 tuple items
                yield (f"{where}/{i}" if isinstance(value, list) else where), sub


def check_keywords(schema: Any, path: str = "") -> None:
    """Raises ValueError naming the first keyword (and where it is) that no grammar would enforce."""
    if not isinstance(schema, dict):
        return  # true / false, or a value the meta-schema check already refused
    for key, value in schema.items():
        where = f"{path}/{key}"
        if key.startswith("x-") and key != "x-guidance":
            continue  # extensions: by definition not JSON Schema
        if key == "nullable":
            raise ValueError(f"{where}: 'nullable' is OpenAPI 3.0, not JSON Schema; write \"type\": [..., \"null\"]")
        if key not in STANDARD and key not in ANNOTATIONS:
            raise ValueError(f"{where}: unknown keyword {key!r} (a misspelling?); it would not be enforced")
        if key == "format" and _types(schema) & {"integer", "number"}:
            raise ValueError(f"{where}: format {value!r} on a number is not enforced; bound it with minimum / maximum")
    for where, sub in subschemas(schema, path):
        check_keywords(sub, where)


# Length bounds a format implies that llguidance's format expressions leave out (each label of a
# hostname is bounded there, the whole name is not: RFC 1123, 253 characters).
FORMAT_MAX_LENGTH = {"hostname": 253, "idn-hostname": 253}


def with_format_bounds(schema: Any) -> Any:
    """`schema` with each format's implied maxLength written out (a copy; the input is unchanged)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    bound = FORMAT_MAX_LENGTH.get(schema.get("format"))
    if bound is not None:
        out["maxLength"] = min(bound, schema.get("maxLength", bound))
    for key, value in schema.items():
        if key in SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: with_format_bounds(sub) for name, sub in value.items()}
        elif key in SCHEMA_LISTS and isinstance(value, list):
            out[key] = [with_format_bounds(sub) for sub in value]
        elif key in SCHEMAS:
            out[key] = [with_format_bounds(s) for s in value] if isinstance(value, list) else with_format_bounds(value)
    return out


def _types(schema: dict) -> set:
    t = schema.get("type")
    return {t} if isinstance(t, str) else set(t) if isinstance(t, list) else set()
