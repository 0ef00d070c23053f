# Sourced by the set-up scripts of environments that a run may be using while the script runs again (the learning
# study and the tests call them before their runs): an environment set up by the same script for the same
# pyproject.toml is left as it is, with no pip run and nothing rewritten under that run.
#
#   env_is_set_up VENV FILE...  creates VENV if missing; true when the set-up script and the files it reads (FILE...,
#                               with pyproject.toml), as they are now, already set VENV up
#   mark_set_up VENV FILE...    records that they set VENV up (call it last, after every step succeeded)
#   ticking WHAT COMMAND...     runs COMMAND, saying every 15 s that WHAT is still under way (pip --quiet is silent for
#                               minutes the first time)

env_stamp() {
    cat "${@:2}" pyproject.toml | sha256sum | cut -d' ' -f1
}

env_is_set_up() {
    # (called as an if's condition, where set -e does not stop the script: a failure here stops it explicitly)
    if [ ! -x "$1/bin/python" ] && ! "${PYTHON:-python3}" -m venv "$1"; then
        echo "could not create the environment $1 with ${PYTHON:-python3} -m venv" >&2
        exit 2
    fi
    if [ -f "$1/.gdpo-verl-setup" ] && [ "$(cat "$1/.gdpo-verl-setup")" = "$(env_stamp "$@")" ]; then
        return 0
    fi
    rm -f "$1/.gdpo-verl-setup"
    return 1
}

mark_set_up() {
    env_stamp "$@" > "$1/.gdpo-verl-setup"
}

ticking() {
    local what=$1 code=0 ticker
    shift
    (
        started=$SECONDS
        while sleep 15; do echo "  ... still $what ($((SECONDS - started)) s)"; done
    ) &
    ticker=$!
    # a set-up that exits meanwhile (set -e) takes its ticker with it; Ctrl-C and the test runner's stop reach the
    # whole process group, the ticker included
    trap "kill $ticker 2>/dev/null" EXIT
    "$@" || code=$?
    trap - EXIT
    kill "$ticker" 2>/dev/null || true
    wait "$ticker" 2>/dev/null || true
    return "$code"
}
