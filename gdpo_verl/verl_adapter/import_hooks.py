"""Wrapping verl's functions when their modules are first imported (verl 0.9.1 has no extension point for
what gdpo-verl changes), so that ``import verl`` in a rollout or engine worker stays as light as before."""

from __future__ import annotations

import importlib.abc
import logging
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

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
    """Run ``hook(module)`` now if ``module_name`` is imported, else right after it is first imported (the hooks
    wait in the one ``_AfterImportFinder`` on ``sys.meta_path``)."""
    module = sys.modules.get(module_name)
    if module is not None:
        hook(module)
        return
    finder = next((finder for finder in sys.meta_path if isinstance(finder, _AfterImportFinder)), None)
    if finder is None:
        finder = _AfterImportFinder()
        sys.meta_path.insert(0, finder)
    hooks = finder.pending.setdefault(module_name, [])
    if hook not in hooks:
        hooks.append(hook)


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a module with pending hooks it returns the regular spec with a loader
    whose ``exec_module`` runs the hooks once the module body has run."""

    def __init__(self) -> None:
        self.pending: dict[str, list[Callable[[ModuleType], None]]] = {}

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.pending:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module
        pending = self.pending

        def exec_then_hook(module: ModuleType) -> None:
            exec_module(module)
            for hook in pending.pop(fullname, []):
                hook(module)

        spec.loader.exec_module = exec_then_hook
        return spec
