"""Write the options of the packaged config (gdpo_verl/config/gdpo/settings.yaml) from their declarations
(gdpo_verl/core/options.py), after changing one:

    python scripts/render_settings.py           # rewrite them
    python scripts/render_settings.py --check   # exit 1 when the shipped file differs from the declarations
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gdpo_verl.verl_adapter.config_file import rendered as render

CONFIG = Path(__file__).resolve().parent.parent / "gdpo_verl" / "config" / "gdpo" / "settings.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the shipped file is the rendering")
    args = parser.parse_args()
    shipped = CONFIG.read_text()
    rendered = render(shipped)
    if args.check:
        if rendered != shipped:
            print(f"{CONFIG} differs from gdpo_verl/core/options.py: run python scripts/render_settings.py",
                  file=sys.stderr)
            return 1
        return 0
    CONFIG.write_text(rendered)
    return 0


if __name__ == "__main__":
    sys.exit(main())
