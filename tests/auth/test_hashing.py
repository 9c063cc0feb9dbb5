"""Password hashing: one Argon2 computation at a time per process, at a lower CPU priority, so sign-ins leave the pages the CPU."""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading

import pytest

from webapp.auth import service as auth_service


class CountingHasher:
    """Stands in for argon2's hasher: records how many computations run at once."""

    def __init__(self) -> None:
        self.running = self.most = self.calls = 0
        self.lock = threading.Lock()

    def _work(self) -> None:
        with self.lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        threading.Event().wait(0.02)  # the hash's own duration: long enough for the others to try to enter
        with self.lock:
            self.running -= 1

    def verify(self, password_hash: str, password: str) -> bool:
        self._work()
        return password == "right"

    def hash(self, password: str) -> str:
        self._work()
        return "h"


def test_concurrent_sign_ins_hash_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = CountingHasher()
    monkeypatch.setattr(auth_service, "_hasher", fake)
    start = threading.Barrier(8)
    results: list[bool] = []

    def sign_in(i: int) -> None:
        start.wait()
        results.append(auth_service.verify_password("h", "right" if i % 2 else "wrong"))
        auth_service.hash_password("new")

    threads = [threading.Thread(target=sign_in, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert fake.calls == 16 and fake.most == 1
    assert sorted(results) == [False] * 4 + [True] * 4


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the per-thread priority is a Linux feature")
def test_the_hashing_thread_runs_at_a_lower_priority() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    seen = auth_service._HASHING.submit(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).result()
    assert seen == min(19, base + auth_service.HASHING_NICENESS)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base  # the caller's thread is untouched


def _hash_in_child(out: multiprocessing.queues.Queue) -> None:  # type: ignore[type-arg]
    out.put(auth_service.verify_password(auth_service.hash_password("pw"), "pw"))


def test_a_forked_child_hashes_with_its_own_thread() -> None:
    auth_service.hash_password("warm the parent's hashing thread")
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_hash_in_child, args=(out,))
    child.start()
    assert out.get(timeout=60) is True
    child.join(60)
    assert child.exitcode == 0
