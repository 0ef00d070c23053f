"""docs/development.md's map of where each part lives ("Where each part lives"), held to the tree: every room of
the package, every module in it and every script is named in the map, and every room the map names exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def blocks() -> dict[str, str]:
    """The map's text per folder it names (``gdpo_verl/core/``, ``scripts/``, ...)."""
    text = (ROOT / "docs" / "development.md").read_text()
    start = text.index("## Where each part lives")
    opening = text.index("```\n", start) + 4
    map_ = text[opening:text.index("\n```", opening)]
    found: dict[str, str] = {}
    folder = None
    for line in map_.splitlines():
        if not line.startswith(" "):
            folder, line = line.split(maxsplit=1)[0], line.split(maxsplit=1)[1]
            found[folder] = ""
        found[folder] += " " + line.strip()
    return found


def named(stem: str, text: str) -> bool:
    return re.search(rf"(?<![\w/]){re.escape(stem)}(\.py|\.sh)?(?!\w)", text) is not None


def test_every_room_module_and_script_is_on_the_map():
    rooms = blocks()
    package = sorted(path for path in (ROOT / "gdpo_verl").iterdir() if path.is_dir() and path.name != "__pycache__")
    assert [f"gdpo_verl/{room.name}/" for room in package if f"gdpo_verl/{room.name}/" not in rooms] == []
    assert [folder for folder in rooms if not (ROOT / folder).is_dir()] == []
    # every module, in a folder of a room too (verl_adapter/for_tools/, sandbox/programs/)
    unnamed = [str(module.relative_to(room.parent)) for room in package for module in sorted(room.rglob("*.py"))
               if module.stem != "__init__" and not named(module.stem, rooms[f"gdpo_verl/{room.name}/"])]
    unnamed += [f"scripts/{script.name}" for script in sorted((ROOT / "scripts").iterdir())
                if script.suffix in (".py", ".sh") and not named(script.stem, rooms["scripts/"])]
    assert unnamed == []


def test_a_module_missing_from_the_map_is_found_out():
    assert named("guard", "where.py (where), guard.py (what is not read)")
    assert not named("guard", "where.py (where), guardian.py (the guardian)")
    assert not named("plain", "the plainest route")
