"""Clean exit: a thread ezpz stopped waiting for must not abort the process at interpreter exit.

The cause of the "terminate called without an active exception" abort seen in
CI: under load, a bounded store call (``run_bounded``: rank 0's refused-intruder
report at setup and teardown) outlived its deadline and was abandoned; it was
still inside torch's C++ when the interpreter finalized, woke, and CPython's
``pthread_exit`` unwound it through C++ frames -> std::terminate, SIGABRT.
:mod:`ezpz.primitives.abandoned_threads` waits for such threads at exit. The script below forces
the situation (a store call abandoned 10 ms in, returning 0.5 s later, after
``teardown()``, while finalization is held open 1 s), so it fails without the fix on every run, not once in a
hundred.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import clean_env

ABANDONED_AT_EXIT = textwrap.dedent("""
    import datetime, time, torch, torch.distributed as dist, ezpz
    from ezpz.launch_env import store

    class SlowFinalization:  # keeps interpreter finalization going while the abandoned call returns
        def __del__(self):
            time.sleep(1.0)

    keep = SlowFinalization()
    rt = ezpz.hooks.setup()
    t = torch.ones(2)
    dist.all_reduce(t)
    rdzv = store.current()
    def late():  # a store call still inside torch's C++ when the script ends
        rdzv.base.wait(["ezpz-test-never-set"], datetime.timedelta(seconds=0.5))
    try:
        store.run_bounded(late, 0.01, lambda: TimeoutError("abandoned"))
    except TimeoutError:
        pass
    ezpz.hooks.teardown()
    print("finished", flush=True)
""")


def test_a_store_call_abandoned_at_exit_does_not_abort_the_job(tmp_path):
    from test_real_launchers import free_port

    script = tmp_path / "abandoned_at_exit.py"
    script.write_text(ABANDONED_AT_EXIT)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                           str(free_port()), str(script)], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert "terminate called" not in proc.stderr
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("finished") == 2


def test_abandoned_threads_are_waited_for_at_exit():
    code = textwrap.dedent("""
        import atexit, threading, time
        from ezpz.primitives.abandoned_threads import abandon, pending
        done = []
        atexit.register(lambda: print("joined" if done else "not joined", flush=True))  # LIFO: runs after ezpz's
        t = threading.Thread(target=lambda: (time.sleep(0.3), done.append(1)), daemon=True)
        t.start()
        abandon(t, wait_s=5, must_finish=True, what="a slow call")
        assert pending() == ["a slow call"]
    """)
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "joined", proc.stderr


def test_a_call_that_never_returns_exits_1_naming_it_instead_of_aborting():
    code = textwrap.dedent("""
        import threading, time
        from ezpz.primitives.abandoned_threads import abandon
        t = threading.Thread(target=lambda: time.sleep(60), daemon=True)
        t.start()
        abandon(t, wait_s=0.2, must_finish=True, what="TCPStore.add to a dead store")
    """)
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "TCPStore.add to a dead store" in proc.stderr
