"""A slot's spawner (strict isolation): a process in the slot's cgroup, put there once, that starts each sandbox of
the slot (a fork, then the sandbox's user id and limits, then bubblewrap), so that every run is born in the cgroup.
Run by path by ``spawner.py``. Requests: a JSON line (user id, command, limits) with the sandbox's descriptors; answer:
the pid, with a pidfd of it (none when it ended already). It ends when the host closes the channel or dies; the kernel
collects its children (SIGCHLD ignored, set back to default in each).
"""
import fcntl, json, os, resource, signal, socket, sys
channel = socket.socket(fileno=int(sys.argv[1]))
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
while True:
    try:
        message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 8)
    except ConnectionError:  # the host died
        break
    if not message:  # the host closed the channel
        break
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.setsid()
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]
            for target, fd in enumerate(high):
                os.dup2(fd, target)
            os.closerange(len(high), 1 << 20)
            with open("/proc/self/oom_score_adj", "w") as score:
                score.write("1000")  # past its cgroup's bound the OOM killer takes the run, never a reward worker
            os.setgroups([])
            os.setgid(request["uid"])
            os.setuid(request["uid"])
            for name, limit in request["limits"].items():
                resource.setrlimit(getattr(resource, "RLIMIT_" + name.upper()), tuple(limit))
            os.execv(request["argv"][0], request["argv"])
        except BaseException as error:
            os.write(2, f"the sandbox's spawner could not start the run: {error!r}\n".encode())
        os._exit(127)
    try:
        answer = [os.pidfd_open(pid)]
    except ProcessLookupError:
        answer = []
    try:
        socket.send_fds(channel, [str(pid).encode()], answer)
    except ConnectionError:  # the host died; its runs die with this process
        break
    for fd in fds + answer:
        os.close(fd)
