"""JSON Schema of the one JSON form (:mod:`mnemosyne.model.jsonform`), from the types themselves.

msgspec describes how it encodes a type, and the stored objects (nodes, claims,
provenance, redactions) encode as arrays; their JSON form is an object. So the
schema is built here, walking the same type information :func:`~mnemosyne.model.jsonform.from_builtins`
reads with: a struct is an object of its fields (and computed ones such as a
change's ``redacted``), a time is RFC 3339 text, a node is the node object the
strict reader takes. Used for an HTTP API's OpenAPI document, so what it
publishes cannot drift from what it returns.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, get_type_hints

import msgspec

from mnemosyne.model.choices import KINDS
from mnemosyne.model.jsonform import COMPUTED
from mnemosyne.model.objects import Claim, Commit, Node, Provenance

_TIME = {"type": "string", "format": "date-time", "description": "RFC 3339; a bare date is midnight UTC."}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _node_schemas(ref: str, output: bool, suffix: str) -> dict[str, Any]:
    """The node object (every field on output; only ``content`` needed on input)."""
    properties: dict[str, Any] = {
        "id": {
            "type": "string" if output else ["string", "null"],
            "description": "The stable key, '/'-separated; omitted or null on input: generated.",
        },
        "content": {
            "description": "Text or any JSON value; a claim object when kind is claim.",
            "anyOf": [{"$ref": ref.format(name="Claim" + suffix)}, {}],
        },
        "kind": {"enum": list(KINDS)},
        "provenance": {"$ref": ref.format(name="Provenance" + suffix)},
        "event_time": _nullable(_TIME),
        "meta": {"type": "object"} if output else {"type": ["object", "null"]},
        "expires_at": _nullable(_TIME),
        "hash": {
            "type": "string" if output else ["string", "null"],
            "description": "The version's content address; on input, checked against the node described.",
        },
    }
    node: dict[str, Any] = {
        "type": "object",
        "title": "Node",
        "description": (Node.__doc__ or "").split("\n")[0],
        "properties": properties,
        "required": list(properties) if output else ["content"],
        "additionalProperties": False,
    }
    claim = {
        "type": "object",
        "title": "Claim",
        "description": "The content of a claim node.",
        "properties": {
            "subject": {"type": "string"},
            "predicate": {"type": "string"},
            "value": {},
            "valid_from": _TIME,
            "valid_to": _nullable(_TIME),
            "confidence": {"type": ["number", "null"]},
            "evidence": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["subject", "predicate", "value", "valid_from"],
        "additionalProperties": False,
    }
    provenance = {
        "type": "object",
        "title": "Provenance",
        "description": (Provenance.__doc__ or "").split("\n")[0],
        "properties": {
            "agent_step": {"type": ["integer", "null"]},
            "observation": {"type": ["string", "null"]},
            "tool_call": {"type": ["string", "null"]},
            "source": {"type": ["string", "null"]},
        },
        "additionalProperties": False,
    }
    return {"Node" + suffix: node, "Claim" + suffix: claim, "Provenance" + suffix: provenance}


class _Builder:
    """Walks type information into schemas, each struct once, as a named component."""

    def __init__(self, ref: str, output: bool) -> None:
        self.ref = ref
        self.output = output
        self.suffix = "" if output else "Input"
        self.components: dict[str, Any] = {}

    def named(self, name: str) -> dict[str, Any]:
        return {"$ref": self.ref.format(name=name + self.suffix)}

    def schema(self, info: msgspec.inspect.Type) -> dict[str, Any]:
        inspect = msgspec.inspect
        if isinstance(info, inspect.StructType):
            return self.struct(info)
        if isinstance(info, inspect.UnionType):
            choices = [self.schema(choice) for choice in info.types]
            return choices[0] if len(choices) == 1 else {"anyOf": choices}
        if isinstance(info, inspect.ListType | inspect.VarTupleType):
            return {"type": "array", "items": self.schema(info.item_type)}
        if isinstance(info, inspect.TupleType):
            return {"type": "array", "prefixItems": [self.schema(t) for t in info.item_types]}
        if isinstance(info, inspect.DictType):
            return {"type": "object", "additionalProperties": self.schema(info.value_type)}
        if isinstance(info, inspect.LiteralType):
            return {"enum": list(info.values)}
        if isinstance(info, inspect.DateTimeType):
            return dict(_TIME)
        simple = {
            inspect.StrType: "string",
            inspect.IntType: "integer",
            inspect.FloatType: "number",
            inspect.BoolType: "boolean",
            inspect.NoneType: "null",
        }
        kind = simple.get(type(info))
        return {"type": kind} if kind is not None else {}

    def struct(self, info: msgspec.inspect.StructType) -> dict[str, Any]:
        cls = info.cls
        if cls in (Node, Claim, Provenance):
            if "Node" + self.suffix not in self.components:
                self.components.update(_node_schemas(self.ref, self.output, self.suffix))
            return self.named(cls.__name__)
        name = cls.__name__ + self.suffix
        if name in self.components:
            return self.named(cls.__name__)
        self.components[name] = {}  # reserved first: a struct may hold itself
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in info.fields:
            properties[field.encode_name] = self.schema(field.type)
            if self.output or field.required:
                required.append(field.encode_name)
        if issubclass(cls, Commit) and self.output:
            properties["meta"] = {"type": "object"}  # {} when a commit has none
        for computed in COMPUTED.get(cls, ()):
            returned = get_type_hints(getattr(cls, computed).fget)["return"]
            properties[computed] = self.schema(msgspec.inspect.type_info(returned))
            required.append(computed)
        doc = (cls.__doc__ or "").strip().split("\n")[0]
        self.components[name] = {
            "type": "object",
            "title": cls.__name__,
            "description": doc,
            "properties": properties,
            "required": required,
            "additionalProperties": not self.output and not info.forbid_unknown_fields,
        }
        if self.output:
            del self.components[name]["additionalProperties"]  # a later release may add fields
        return self.named(cls.__name__)


def schema_components(
    types: Iterable[Any], *, ref: str = "#/components/schemas/{name}", output: bool = True
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The JSON Schema of each type's JSON form, and the named schemas they refer to.

    Args:
        types: result types (``CommitResult``, ``list[Hit]``, …) or input shapes.
        ref: how a reference to a named schema is written.
        output: describe what :func:`~mnemosyne.model.jsonform.to_json` writes
            (every field present); else what a reader takes (fields with
            defaults may be left out, and a node needs only ``content``).

    Returns:
        One schema per type, in order, and the components they name (input
        shapes' names end in ``Input``, so both kinds fit in one document).
    """
    builder = _Builder(ref, output)
    schemas = [builder.schema(msgspec.inspect.type_info(t)) for t in types]
    return schemas, builder.components
