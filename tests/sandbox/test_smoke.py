"""The sandbox's smoke test, the one of tests/sandbox in the quick tier (scripts/test.sh TIER=quick): the node's
check passes and a program runs in the sandbox on its input. The rest of the folder starts many sandboxes (marker
``sandbox``, tests/conftest.py)."""

from gdpo_verl.sandbox import OK


def test_a_program_runs_in_the_sandbox_on_its_input(sandbox):
    outcome = sandbox.run("print(sum(map(int, input().split())))", "2 3\n")
    assert (outcome.status, outcome.stdout) == (OK, "5\n")
