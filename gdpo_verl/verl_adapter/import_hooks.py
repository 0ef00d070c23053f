"""Wrapping verl's functions when their modules are first imported (verl 0.9.1 has no extension point for
what gdpo-verl changes), so that ``import verl`` in a rollout or engine worker stays as light as before."""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

import wrapt

logger = logging.getLogger("gdpo_verl")

# Set on every wrapper, to the function it wraps: wrapping twice is a no-op, and `gdpo-verl doctor` looks for it.
WRAPPED = "__gdpo_verl_wraps__"


def wrap_attribute(owner: Any, name: str, make_wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    original = getattr(owner, name)
    if getattr(original, WRAPPED, None) is not None:
        return
    wrapper = make_wrapper(original)
    setattr(wrapper, WRAPPED, original)
    setattr(owner, name, wrapper)
    logger.debug("gdpo-verl: wrapped %s.%s", getattr(owner, "__name__", owner), name)


def after_import(module_name: str, hook: Callable[[ModuleType], None]) -> None:
    """Run ``hook(module)`` now if ``module_name`` is imported, else right after it is first imported (wrapt's
    post-import hooks). The hooks are idempotent (``wrap_attribute``): one registered twice does no harm."""
    wrapt.register_post_import_hook(hook, module_name)
