"""Exit-code recorder inside a torch launcher process (torchrun,
python -m torch.distributed.launch); put on PYTHONPATH by capture.py.

Active only in the process that finds CAPTURE_LAUNCHER_HOOK=1 in its
environment; it removes that variable at once so the workers the launcher
starts do not activate it. It prints nothing and changes nothing the launcher
does: it notes each subprocess.Popen whose env carries RANK (a worker), watches
them with waitid(WNOWAIT) from a daemon thread (which observes an exit without
reaping it, so the launcher still sees it), and at the launcher's exit writes
CAPTURE_TRUTH_DIR/exit-rank<R>.json for each worker.
"""
import os

if os.environ.pop("CAPTURE_LAUNCHER_HOOK", None) == "1" and os.environ.get("CAPTURE_TRUTH_DIR"):
    import atexit
    import json
    import subprocess
    import threading
    import time

    _out = os.environ["CAPTURE_TRUTH_DIR"]
    _workers = {}  # pid -> {"rank": r, "proc": Popen, "exit_code": ..., "time": ...}
    _lock = threading.Lock()
    _orig_init = subprocess.Popen.__init__

    def _init(self, *args, **kwargs):
        _orig_init(self, *args, **kwargs)
        env = kwargs.get("env")
        if env and "RANK" in env:
            with _lock:
                _workers[self.pid] = {"rank": int(env["RANK"]), "proc": self, "start": time.time()}

    subprocess.Popen.__init__ = _init

    def _status(info):
        if info.si_code == os.CLD_EXITED:
            return info.si_status
        return -info.si_status  # killed / dumped: negative signal, like Popen.returncode

    def _watch():
        while True:
            with _lock:
                pending = [(pid, w) for pid, w in _workers.items() if "exit_code" not in w]
            for pid, w in pending:
                try:
                    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                except ChildProcessError:
                    rc = w["proc"].returncode  # already reaped by the launcher
                    if rc is not None:
                        w.update(exit_code=rc, time=time.time())
                    continue
                if info is not None:
                    w.update(exit_code=_status(info), time=time.time())
            time.sleep(0.02)

    threading.Thread(target=_watch, name="capture-exit-watch", daemon=True).start()

    def _dump():
        os.makedirs(_out, exist_ok=True)
        with _lock:
            items = list(_workers.items())
        for pid, w in items:
            rc = w.get("exit_code", w["proc"].returncode)
            with open(os.path.join(_out, f"exit-rank{w['rank']}.json"), "w") as f:
                json.dump({"rank": w["rank"], "exit_code": rc, "pid": pid, "start": w["start"],
                           "time": w.get("time"), "observed_by": "launcher hook"}, f)

    atexit.register(_dump)
