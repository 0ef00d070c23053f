"""The README as the tests read it: its path, its example reward, and its command lines."""

from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_reward() -> str:
    """The README's example reward (the first python block under "Your rewards, your verl config")."""
    usage = README.read_text()[README.read_text().index("### Your rewards, your verl config"):]
    start = usage.index("```python\n") + len("```python\n")
    return usage[start:usage.index("```", start)]


def readme_line(start: str) -> str:
    """The README's command line that starts with ``start``, its comment cut."""
    return next(line.split("#")[0].strip() for line in README.read_text().splitlines() if line.startswith(start))
