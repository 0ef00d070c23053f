"""Moved: the sandbox is the package ``gdpo_verl.sandbox`` (``from gdpo_verl.sandbox import Sandbox, Limits``)."""

raise ImportError("gdpo_verl.rewards.sandbox moved to gdpo_verl.sandbox: import Sandbox, Session, Limits, Outcome, "
                  "SandboxUnavailable and the statuses from gdpo_verl.sandbox (docs/coding.md, \"What moved\").")
