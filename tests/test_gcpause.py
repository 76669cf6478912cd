import gc
import threading

from layerscope.gcpause import paused_gc


def test_paused_inside_and_resumed_after_the_outermost_run() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # a compare run inside a run
            assert not gc.isenabled()
        assert not gc.isenabled(), "the inner run's end must not resume the collector the outer run paused"
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled() -> None:
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_concurrent_runs_share_one_pause() -> None:
    inside, release = threading.Event(), threading.Event()

    def other_run() -> None:
        with paused_gc():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=other_run)
    with paused_gc():
        t.start()
        inside.wait(5)
    assert not gc.isenabled(), "another thread's run is still going"
    release.set()
    t.join(5)
    assert gc.isenabled()


def test_resumed_when_the_run_raises() -> None:
    try:
        with paused_gc():
            raise ValueError("a bad spec")
    except ValueError:
        pass
    assert gc.isenabled()


def test_what_a_run_leaves_alive_goes_to_the_oldest_generation_untraversed() -> None:
    gc.unfreeze()  # a server test earlier in the session may have frozen its runs (the case the next test covers)
    with paused_gc():
        kept = [[i] for i in range(1000)]  # tracked containers a run keeps (a memo's entries)
    young = {id(o) for o in gc.get_objects(generation=0)}
    assert not any(id(o) in young for o in kept)
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(o) in oldest for o in kept)


def test_objects_the_process_froze_stay_frozen() -> None:
    held = [[i] for i in range(10)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with paused_gc():
            kept = [[i] for i in range(10)]
        assert gc.get_freeze_count() == frozen  # the server's cached runs stay out of the full passes
        assert kept and held
    finally:
        gc.unfreeze()
