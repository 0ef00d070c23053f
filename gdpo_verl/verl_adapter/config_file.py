"""The packaged config (``gdpo_verl/config/gdpo/settings.yaml``) as the options' declarations write it
(``core/options.py``): each option's doc as a comment above its key and default, under ``algorithm`` for an option
with a ``config_key`` and in the ``algorithm.gdpo`` block for the others. ``scripts/render_settings.py`` writes it;
a test checks the shipped file against ``rendered``. Values are written by PyYAML, so the config reads back each
default as declared."""

from __future__ import annotations

from typing import Any

import yaml

from gdpo_verl.core.options import IN_BLOCK, OPTIONS, Option

RENDERED = "# Rendered from gdpo_verl/core/options.py by scripts/render_settings.py: edit the declarations there."


def rendered(text: str) -> str:
    """``text`` (the packaged config) with every declared option written from its declaration."""
    for option in OPTIONS.values():
        if not option.in_block:
            text = with_key(text, option)
    return config_with_block(text)


def with_key(text: str, option: Option) -> str:
    """``text`` with the line ``  <key>: ...`` of ``option`` (a key of ``algorithm``) and the comment lines right
    above it replaced by its doc and default."""
    key = option.key.removeprefix("algorithm.")
    lines = text.split("\n")
    found = [at for at, line in enumerate(lines) if line.startswith(f"  {key}:")]
    if len(found) != 1:
        raise ValueError(f"the config has {len(found)} lines '  {key}:' under algorithm; it needs one")
    start = end = found[0]
    while start > 0 and lines[start - 1].startswith("  #"):
        start -= 1
    lines[start:end + 1] = [*_comment(option.doc, "  "), f"  {key}: {yaml_value(option.default)}"]
    return "\n".join(lines)


def yaml_block(indent: int = 4) -> str:
    """The ``algorithm.gdpo`` block: each option of the block, its doc as a comment above its default."""
    pad = " " * indent
    sections = [f"{pad}{RENDERED}\n"]
    for name in IN_BLOCK:
        option = OPTIONS[name]
        comment = "\n".join(_comment(option.doc, pad))
        sections.append(f"{comment}\n{pad}{name}: {yaml_value(option.default)}\n")
    return "\n".join(sections)


def config_with_block(text: str, indent: int = 4) -> str:
    """``text`` with its ``algorithm.gdpo`` block (the lines after ``  gdpo:`` up to the first one indented less than
    ``indent``, blank lines aside) replaced by ``yaml_block(indent)``."""
    head, marker, rest = text.partition("\n  gdpo:\n")
    if not marker:
        raise ValueError("the config has no '  gdpo:' line under algorithm")
    lines = rest.splitlines(keepends=True)
    end = next((at for at, line in enumerate(lines)
                if line.strip() and len(line) - len(line.lstrip(" ")) < indent), len(lines))
    return f"{head}{marker}\n{yaml_block(indent)}\n{''.join(lines[end:])}"


def yaml_value(value: Any) -> str:
    """``value`` as one line of YAML that PyYAML and OmegaConf read back as the same value (a tuple as a list)."""
    value = list(value) if isinstance(value, tuple) else value
    return yaml.safe_dump(value, default_flow_style=True, width=float("inf")).removesuffix("\n...\n").rstrip("\n")


def _comment(doc: str, pad: str) -> list[str]:
    return [f"{pad}# {line}".rstrip() for line in doc.splitlines()]
