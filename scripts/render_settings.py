"""Write the algorithm.gdpo block of the packaged config (gdpo_verl/config/gdpo/settings.yaml) from the options'
declarations (gdpo_verl/core/options.py), after changing one:

    python scripts/render_settings.py           # rewrite the block
    python scripts/render_settings.py --check   # exit 1 when the shipped block differs from the declarations
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gdpo_verl.core.options import config_with_block

CONFIG = Path(__file__).resolve().parent.parent / "gdpo_verl" / "config" / "gdpo" / "settings.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the shipped block is the rendering")
    args = parser.parse_args()
    shipped = CONFIG.read_text()
    rendered = config_with_block(shipped)
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
