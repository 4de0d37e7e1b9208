"""The spare threads a stoppable model call runs on (nbs/05_reason.md, `abandonable`): reused, never blocking the next
call behind an abandoned one, a fresh context per call, idle ones ending, a forked child starting without them."""
import contextvars, os, signal, threading, time
import pytest
from passepartout import reason
from passepartout.reason import abandonable, StopTurn


def wait_for(predicate, seconds=20.0):
    "Poll `predicate` until it is true (never a fixed sleep): False after `seconds`."
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate(): return True
        time.sleep(0.005)
    return False


def test_calls_one_after_another_reuse_one_thread():
    stop = threading.Event()
    threads = [abandonable(threading.current_thread, stop) for _ in range(50)]   # held: a new thread each call would be a new object
    assert all(t is threads[0] for t in threads) and threads[0] is not threading.current_thread()


def test_an_abandoned_call_never_holds_up_the_next():
    stop, release, started = threading.Event(), threading.Event(), threading.Event()
    def stuck(): started.set(); release.wait(30); return 'late'
    def stop_once_started(): started.wait(30); stop.set()
    threading.Thread(target=stop_once_started, daemon=True).start()
    with pytest.raises(StopTurn): abandonable(stuck, stop)
    t0 = time.monotonic()
    assert abandonable(lambda: 'next', threading.Event()) == 'next'     # another spare: not behind the stuck call
    assert time.monotonic() - t0 < 10
    release.set()


def test_each_call_runs_in_a_fresh_context():
    var = contextvars.ContextVar('spare_test', default='unset')
    stop = threading.Event()
    assert abandonable(lambda: (var.get(), var.set('set'))[0], stop) == 'unset'
    assert abandonable(var.get, stop) == 'unset'    # the same spare thread, a context of its own each call


def test_errors_reach_the_caller():
    with pytest.raises(KeyError): abandonable(lambda: {}['missing'], threading.Event())
    assert abandonable(lambda: 'after an error', threading.Event()) == 'after an error'


def test_an_idle_spare_ends(monkeypatch):
    monkeypatch.setattr(reason._Spare, 'IDLE', 0.05)
    stop = threading.Event()
    spare = abandonable(threading.current_thread, stop)   # its next wait for a call is the short one
    assert isinstance(spare, reason._Spare) and wait_for(lambda: not spare.is_alive())
    assert spare not in reason._idle
    assert abandonable(lambda: 'again', stop) == 'again'    # a new spare after the old ones ended


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='fork')
def test_a_forked_child_starts_its_own_spares():
    stop = threading.Event()
    abandonable(lambda: None, stop)          # the parent has an idle spare
    assert reason._idle
    pid = os.fork()
    if pid == 0:                             # the child: the parent's spare does not exist here
        try: os._exit(0 if abandonable(lambda: 'child', threading.Event()) == 'child' else 1)
        except BaseException: os._exit(2)
    done = {}
    def reaped():
        got, status = os.waitpid(pid, os.WNOHANG)
        if got: done['status'] = status
        return bool(got)
    if not wait_for(reaped, 30): os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0); pytest.fail('the child hung on a spare it does not have')
    assert os.waitstatus_to_exitcode(done['status']) == 0
