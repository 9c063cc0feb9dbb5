"""Password hashing: one Argon2 computation at a time per process, so sign-ins leave the pages a core."""

from __future__ import annotations

import threading

import pytest

from webapp.auth import service as auth_service


class CountingHasher:
    """Stands in for argon2's hasher: records how many computations run at once."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.calls = 0
        self.lock = threading.Lock()
        self.inside = threading.Event()

    def _work(self) -> None:
        with self.lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        self.inside.set()
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


def test_a_real_hash_still_verifies() -> None:
    stored = auth_service.hash_password("correct horse")
    assert auth_service.verify_password(stored, "correct horse") and not auth_service.verify_password(stored, "wrong")
