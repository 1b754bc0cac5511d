"""Typed values as plain JSON types: what the report writes, and what a diff of two hosts'
facts walks."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Optional

from preflight.model.facts import HostFacts, SectionError


def jsonable(obj: Any) -> Any:
    """Returns obj as plain JSON types; a failed section becomes {"error": message}."""
    if isinstance(obj, SectionError):
        return {"error": obj.message}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [jsonable(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    return obj


def facts_json(facts: Optional[HostFacts]) -> Optional[dict[str, Any]]:
    """A host's facts as the report holds them: env vars as a mapping (the model keeps them
    as sorted pairs, to be hashable; a mapping reads better)."""
    if facts is None:
        return None
    doc: dict[str, Any] = jsonable(facts)
    env = doc.get("env")
    if isinstance(env, dict) and isinstance(env.get("vars"), list):
        env["vars"] = {k: v for k, v in env["vars"]}
    return doc
