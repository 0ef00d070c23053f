"""scripts/learning_study.py: Ctrl-C stops the run under way and everything it started, even when the terminal's
Ctrl-C comes twice and the run's processes take their time to die (a real run's Ray and vLLM do)."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[3]


def test_two_ctrl_cs_stop_the_run_and_everything_it_started(tmp_path):
    mark = f"gdpo-stop-{uuid.uuid4().hex[:8]}"
    # a "run" whose processes ignore SIGINT and SIGTERM: only the supervisor's SIGKILL ends them
    run = f'trap "" INT TERM; (trap "" INT TERM; exec -a {mark} sleep 300) & (trap "" INT TERM; exec -a {mark} sleep 300) & wait'
    driver = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT / 'scripts')!r})
        import learning_study
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job starts with SIGINT ignored
        command = [sys.executable, "-m", "gdpo_verl.cpu_run.supervise", "--log", {str(tmp_path / 'log')!r},
                   "--metrics", {str(tmp_path / 'm.jsonl')!r}, "--steps", "1", "--", "bash", "-c", {run!r}]
        try:
            learning_study.run_supervised(command, dict(os.environ))
        except learning_study.StudyStopped as stopped:
            print("stopped:", stopped)
    """)
    study = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while len([p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [""])[0] == mark]) < 2:
            assert time.monotonic() < deadline and study.poll() is None, "the run did not start"
            time.sleep(0.2)
        os.killpg(study.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole foreground group
        time.sleep(0.3)
        os.killpg(study.pid, signal.SIGINT)  # and a second one
        output, _ = study.communicate(timeout=180)
    finally:
        for process in psutil.process_iter(["cmdline"]):
            if (process.info["cmdline"] or [""])[0] == mark:
                process.kill()
    assert "stopped: the run under way was stopped by its supervisor (exit 130)" in output, output
    assert "Stopped every process it started (3)" in output
    assert not [p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [""])[0] == mark]
