"""A Ray cluster a test starts and stops: a free port for it, and stopping it alone (``ray stop`` would end every Ray
on the machine, the CPU training runs beside the test among them)."""

import socket

import psutil


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop_cluster(ray_port: int) -> None:
    """Stop this test's head and everything it started, and nothing else: ``ray stop`` would end every Ray on the
    machine (the CPU training runs that the suite runs beside this test among them). Each of the head's own
    processes names its GCS address (on whichever address Ray chose) or port; its workers end with its raylet."""
    marks = (f":{ray_port} ", f":{ray_port}\0", f"--gcs_server_port={ray_port}")
    own = [p for p in psutil.process_iter(["cmdline"])
           if any(m in "\0".join(p.info["cmdline"] or ()) + "\0" for m in marks)]
    family = set()
    for parent in own:
        try:
            family |= {parent, *parent.children(recursive=True)}
        except psutil.NoSuchProcess:  # ended meanwhile
            pass
    for process in family:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(family, timeout=60)
    assert not alive, f"processes of the test's Ray head still running: {alive}"
