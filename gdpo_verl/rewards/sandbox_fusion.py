"""Moved: the Sandbox Fusion client is ``gdpo_verl.sandbox.fusion``."""

raise ImportError("gdpo_verl.rewards.sandbox_fusion moved to gdpo_verl.sandbox.fusion (docs/coding.md, \"What "
                  "moved\").")
