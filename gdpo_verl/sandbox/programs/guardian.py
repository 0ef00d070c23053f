"""The sandbox's guardian (root): waits for its host to die (a pidfd of it) or to stop it (SIGTERM), then kills every
process under the sandbox's user ids until none has been seen for QUIET seconds (at most LAST seconds). Run by path
by ``guardian.py``.
"""
import os, select, signal, sys, time
host, first, count = (int(argument) for argument in sys.argv[1:4])
QUIET, LAST = 2.0, 60.0
signal.signal(signal.SIGINT, signal.SIG_IGN)
wake, woken = os.pipe()
os.set_blocking(woken, False)
signal.set_wakeup_fd(woken)
signal.signal(signal.SIGTERM, lambda *_: None)  # the host stops it: its wake-up descriptor becomes readable
try:
    pidfd = os.pidfd_open(host)
except ProcessLookupError:  # the host died already
    pidfd = None
if pidfd is not None and os.getppid() == host:  # else the host died before the pidfd was taken
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(wake, select.POLLIN)
    poller.poll()
signal.signal(signal.SIGTERM, signal.SIG_IGN)
end, seen = time.monotonic() + LAST, time.monotonic()
while time.monotonic() < end and time.monotonic() - seen < QUIET:
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as status:
                fields = dict(line.split(b":", 1) for line in status if b":" in line)
            uid, state = int(fields[b"Uid"].split()[0]), fields[b"State"].split()[0]
            if first <= uid < first + count and state != b"Z":  # a zombie is its parent's to collect
                os.kill(int(entry.name), signal.SIGKILL)
                seen = time.monotonic()
        except OSError:  # ended meanwhile
            continue
    time.sleep(0.05)
