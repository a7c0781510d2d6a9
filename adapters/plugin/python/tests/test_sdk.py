"""Unit tests of the SDK without a socket: the Service's dispatch, the
Context and the Cache. Run by internal/pythonplugin's TestPythonUnit."""

import json
import queue
import threading
import unittest

from intend_plugin import (Handler, Observation, PermanentError, ThrottledError, UnavailableError, sensitive)
from intend_plugin import adapter_pb2 as pb
from intend_plugin.cache import Cache
from intend_plugin.handler import Context, capabilities
from intend_plugin.server import Service


class Minimal(Handler):
    def observe(self, ctx, r):
        return Observation(True, {"a": r.attributes["a"]})

    def create(self, ctx, r):
        ctx.info("made", secret=sensitive("x"), plain=1)
        ctx.changed()

    def update(self, ctx, r, diff):
        raise UnavailableError("down")

    def delete(self, ctx, r):
        raise KeyError("gone")


class WithValidate(Minimal):
    def validate(self, ctx, r):
        raise PermanentError("a: bad")


class BadObserve(Minimal):
    def observe(self, ctx, r):
        return {"exists": True}


def run(service, op, rid="t::M[x,a=1]", attrs=None, **kw):
    call = pb.Call(id=9, op=op, resource=pb.Resource(id=rid, attributes_json=json.dumps(attrs or {"a": 1}).encode()), **kw)
    got = []
    service._run(call, service._context(call), lambda cid, reply: got.append(reply))
    return got[0]


class ServiceTest(unittest.TestCase):
    def setUp(self):
        self.s = Service({"t::M": Minimal(), "t::V": WithValidate(), "t::B": BadObserve()}, max_workers=2)

    def tearDown(self):
        self.s.pool.shutdown()

    def test_capabilities(self):
        self.assertEqual(capabilities(Minimal()), [])
        self.assertEqual(capabilities(WithValidate()), ["validate"])
        d = self.s.describe(pb.DescribeRequest(protocol_version=1), None)
        self.assertEqual([t.name for t in d.types], ["t::B", "t::M", "t::V"])

    def test_observe(self):
        r = run(self.s, pb.OP_OBSERVE)
        self.assertFalse(r.HasField("error"))
        self.assertTrue(r.exists)
        self.assertEqual(json.loads(r.attributes_json), {"a": 1})

    def test_observe_must_return_observation(self):
        r = run(self.s, pb.OP_OBSERVE, rid="t::B[x,a=1]")
        self.assertEqual(r.error.__getattribute__("class"), pb.CLASS_PERMANENT)
        self.assertIn("want an intend_plugin.Observation", r.error.message)

    def test_create_logs_and_changed(self):
        r = run(self.s, pb.OP_CREATE)
        self.assertFalse(r.HasField("error"))
        self.assertTrue(r.HasField("changed") and r.changed)
        self.assertEqual(len(r.logs), 1)
        self.assertEqual(json.loads(r.logs[0].attrs_json), {"secret": "x", "plain": 1})
        self.assertEqual(list(r.logs[0].sensitive_outputs), ["secret"])

    def test_error_classes(self):
        r = run(self.s, pb.OP_UPDATE)
        self.assertEqual(getattr(r.error, "class"), pb.CLASS_UNAVAILABLE)
        self.assertEqual(r.error.message, "down")
        r = run(self.s, pb.OP_DELETE)
        self.assertEqual(getattr(r.error, "class"), pb.CLASS_PERMANENT)
        self.assertEqual(r.error.message, "KeyError: 'gone'")
        r = run(self.s, pb.OP_VALIDATE, rid="t::V[x,a=1]")
        self.assertEqual((getattr(r.error, "class"), r.error.message), (pb.CLASS_PERMANENT, "a: bad"))
        # A type without validate: the call succeeds.
        self.assertFalse(run(self.s, pb.OP_VALIDATE).HasField("error"))

    def test_not_json(self):
        class NaN(Minimal):
            def observe(self, ctx, r):
                ctx.set_fact("f", float("inf"))
                return Observation(True, {"a": float("nan")})
        r = run(Service({"t::M": NaN()}), pb.OP_OBSERVE)
        self.assertEqual(getattr(r.error, "class"), pb.CLASS_PERMANENT)
        self.assertIn("observed attributes are not JSON", r.error.message)
        self.assertEqual(r.facts_json, b"")  # the fact was dropped with a warning
        self.assertEqual(r.logs[0].msg, "fact dropped: its value is not JSON")

    def test_changed_only_for_changes(self):
        class Obs(Minimal):
            def observe(self, ctx, r):
                ctx.changed(True)
                return Observation(False)
        s = Service({"t::M": Obs()})
        self.assertFalse(run(s, pb.OP_OBSERVE).HasField("changed"))

    def test_throttled_retry_after(self):
        self.assertEqual(ThrottledError("x", retry_after=1.5).retry_after, 1.5)
        with self.assertRaises(ValueError):
            ThrottledError("x", retry_after=-1)


class ContextTest(unittest.TestCase):
    def test_levels(self):
        c = Context()
        c.log("warning", "w")
        c.log("info", "i")
        self.assertEqual([l[1] for l in c.logs()], ["WARN", "INFO"])
        with self.assertRaises(ValueError):
            c.log("loud", "x")

    def test_cancel_and_deadline(self):
        import time
        c = Context(deadline=time.time() + 60)
        self.assertFalse(c.cancelled())
        self.assertGreater(c.remaining(), 50)
        c.cancel()
        self.assertTrue(c.cancelled())
        self.assertEqual(c.remaining(), 0.0)
        self.assertTrue(Context(deadline=time.time() - 1).cancelled())
        self.assertIsNone(Context().remaining())

    def test_fact_not_json(self):
        c = Context()
        c.set_fact("ok", [1])
        c.set_fact("bad", {1, 2})
        c.set_fact("", 1)
        self.assertEqual(c.facts(), {"ok": [1]})
        self.assertEqual(len(c.logs()), 2)


class CacheTest(unittest.TestCase):
    def test_one_fill_for_concurrent_callers(self):
        cache = Cache()
        started, go = threading.Event(), threading.Event()
        fills = []

        def fill():
            fills.append(1)
            started.set()
            go.wait(5)
            return "conn"

        out = queue.Queue()
        ts = [threading.Thread(target=lambda: out.put(cache.get("k", fill, ("e", 1))[0])) for _ in range(5)]
        for t in ts:
            t.start()
        started.wait(5)
        go.set()
        for t in ts:
            t.join(5)
        self.assertEqual(len(fills), 1)
        self.assertEqual([out.get() for _ in range(5)], ["conn"] * 5)

    def test_errors_not_cached(self):
        cache = Cache()
        with self.assertRaises(RuntimeError):
            cache.get("k", lambda: (_ for _ in ()).throw(RuntimeError("no")), ("e", 1))
        self.assertEqual(cache.get("k", lambda: 2, ("e", 1))[0], 2)

    def test_close_after_last_user(self):
        closed = []
        cache = Cache()
        v, release = cache.get("k", lambda: "c", ("e", 1), for_version=True, close=closed.append)
        cache.expire(set())
        self.assertEqual(closed, [])  # still held
        release()
        self.assertEqual(closed, ["c"])
        self.assertEqual(len(cache), 0)

    def test_ttl(self):
        now = [0.0]
        closed = []
        cache = Cache(clock=lambda: now[0])
        _, rel = cache.get("k", lambda: 1, ("e", 1), ttl=10, close=closed.append)
        rel()
        now[0] = 11
        self.assertEqual(cache.get("k", lambda: 2, ("e", 1))[0], 2)
        self.assertEqual(closed, [1])

    def test_version_scoped(self):
        cache = Cache()
        a, _ = cache.get("k", lambda: "v7", ("e", 7), for_version=True)
        b, _ = cache.get("k", lambda: "v8", ("e", 8), for_version=True)
        c, _ = cache.get("k", lambda: "any", ("e", 8))
        self.assertEqual((a, b, c), ("v7", "v8", "any"))
        cache.expire({("e", 8)})
        self.assertEqual(len(cache), 2)


if __name__ == "__main__":
    unittest.main()
