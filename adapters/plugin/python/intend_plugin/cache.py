"""A per-process cache of values shared by calls (connections, clients),
as adapters.Cache is for Go adapters.

A value is filled once per key (concurrent callers wait for that fill),
lives ttl seconds from its fill, and with for_version=True also ends
with the deploy of the version the call belongs to: the host's Expire
names the scopes (environment, version) still open, and values cached
for any other scope expire. close(value), when given, runs once when the
value has expired and no call holds it any more. Errors are not cached.
"""

import json
import threading
import time

DEFAULT_TTL = 600.0


class _Entry:
    __slots__ = ("ready", "value", "error", "expires", "scope", "close", "users", "expired", "closed")

    def __init__(self, expires, scope, close):
        self.ready = threading.Event()
        self.value = None
        self.error = None
        self.expires = expires
        self.scope = scope
        self.close = close
        self.users = 0
        self.expired = False
        self.closed = False


class Cache:
    def __init__(self, clock=time.monotonic):
        self._lock = threading.Lock()
        self._entries = {}
        self._clock = clock

    def get(self, key, fill, scope, ttl=None, for_version=False, close=None):
        """Return the value under key, filling it with fill() when absent.
        The returned release function must be called when the caller is
        done with the value (Context does it when the call ends)."""
        k = json.dumps([key, list(scope) if for_version else None], sort_keys=True, default=repr)
        while True:
            to_close = []
            with self._lock:
                to_close = self._sweep_locked(lambda e: e.expires <= self._clock())
                e = self._entries.get(k)
                owner = e is None
                if owner:
                    e = _Entry(self._clock() + (DEFAULT_TTL if ttl is None else ttl),
                               tuple(scope) if for_version else None, close)
                    self._entries[k] = e
                e.users += 1
            _run(to_close)
            if owner:
                try:
                    e.value = fill()
                except BaseException as err:  # not cached: the next caller fills again
                    e.error = err
                    with self._lock:
                        if self._entries.get(k) is e:
                            del self._entries[k]
                        e.expired = True
                    e.ready.set()
                    self._release(e)
                    raise
                e.ready.set()
                return e.value, lambda: self._release(e)
            e.ready.wait()
            if e.error is not None:
                self._release(e)
                continue  # the fill failed: try to fill it ourselves
            return e.value, lambda: self._release(e)

    def expire(self, open_scopes):
        """Expire the values cached for a version whose scope is not in
        open_scopes (a set of (environment, version))."""
        with self._lock:
            to_close = self._sweep_locked(
                lambda e: e.expires <= self._clock() or (e.scope is not None and e.scope not in open_scopes))
        _run(to_close)

    def close(self):
        """Expire every value (the plugin is stopping)."""
        with self._lock:
            to_close = self._sweep_locked(lambda e: True)
        _run(to_close)

    def __len__(self):
        with self._lock:
            return len(self._entries)

    def _sweep_locked(self, expired):
        out = []
        for k, e in list(self._entries.items()):
            if e.ready.is_set() and e.error is None and expired(e):
                del self._entries[k]
                e.expired = True
                if e.users == 0:
                    out.append(self._closable_locked(e))
        return [f for f in out if f]

    def _closable_locked(self, e):
        if e.closed or e.close is None or e.error is not None or not e.ready.is_set():
            e.closed = True
            return None
        e.closed = True
        return lambda: e.close(e.value)

    def _release(self, e):
        with self._lock:
            e.users -= 1
            f = self._closable_locked(e) if e.users == 0 and e.expired else None
        _run([f] if f else [])


def _run(closers):
    for f in closers:
        try:
            f()
        except Exception as err:  # a close hook's failure must not fail a call
            import logging
            logging.getLogger("intend_plugin").warning("cache close hook failed: %s: %s", type(err).__name__, err)
