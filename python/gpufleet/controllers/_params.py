"""What the controllers share: a task's parameters as an inference server's command-line flags."""

from __future__ import annotations

from typing import Any, Dict, List


def server_flags(parameters: Dict[str, Any]) -> List[str]:
    """`--key value` per parameter, in the given order (one experiment's values are scalars; a list, as a
    whole task gives it, contributes its first value). True is a bare `--key`; False and None leave the
    flag out. Keys are written as given, with a leading `--` added."""
    out: List[str] = []
    for key, value in parameters.items():
        if isinstance(value, list):
            if not value:
                continue
            value = value[0]
        if value is None or value is False:
            continue
        flag = key if key.startswith("-") else f"--{key}"
        out.append(flag)
        if value is not True:
            out.append(str(value))
    return out
