"""A plugin of test types for the SDK's Go tests (internal/pythonplugin):
each type exercises one part of the protocol."""

import time

from intend_plugin import (Handler, Observation, SkipResource, ThrottledError, TransientError, sensitive,
                           serve)


class Base(Handler):
    def observe(self, ctx, r):
        return Observation(False)

    def create(self, ctx, r):
        pass

    def update(self, ctx, r, diff):
        pass

    def delete(self, ctx, r):
        pass


class Noop(Base):
    """observe finds it, update does nothing: the SDK's own cost."""

    def observe(self, ctx, r):
        return Observation(True, {"value": "0"})


class Big(Base):
    """observe returns an attribute of the size asked for."""

    def observe(self, ctx, r):
        return Observation(True, {"data": "x" * r.attributes["size"]})


class Sleep(Base):
    """observe waits until the call is cancelled or its deadline passes."""

    def observe(self, ctx, r):
        start = time.monotonic()
        while not ctx.cancelled():
            if time.monotonic() - start > 30:
                raise TransientError("never cancelled")
            time.sleep(0.005)
        raise TransientError("cancelled after %.3fs" % (time.monotonic() - start))


class Boom(Base):
    def observe(self, ctx, r):
        raise ValueError("boom in %s" % r.id)

    def create(self, ctx, r):
        raise SystemExit(3)  # a worker thread's exit must not end the plugin


class Log(Base):
    sensitive_attributes = ("password",)
    sensitive_diff_attributes = ("content",)

    def observe(self, ctx, r):
        print("printed by the adapter")
        ctx.debug("looking", n=1, nan=float("nan"))
        ctx.info("found", where=r.attributes.get("where"), out=sensitive("s3cret"))
        ctx.warning("careful")
        ctx.error("bad", err="x")
        ctx.set_fact("size", 42)
        ctx.set_fact("bad", object())
        return Observation(True, {"where": r.attributes.get("where"), "scope": list(ctx.scope), "event": ctx.event})

    def delete(self, ctx, r):
        ctx.changed(False)

    def diff(self, r, obs):
        return {"where/x": {"from": obs.attributes.get("where"), "to": r.attributes.get("where")}}


class Throttle(Base):
    def observe(self, ctx, r):
        raise ThrottledError("slow down", retry_after=2.5)

    def create(self, ctx, r):
        raise SkipResource("not yet", retry_after=1)


class Cached(Base):
    """observe returns how many times the cache's fill ran; close hooks
    append to a file named by the resource."""

    fills = 0

    def observe(self, ctx, r):
        def fill():
            Cached.fills += 1
            return Cached.fills

        def close(v):
            with open(r.attributes["closed"], "a") as f:
                f.write("%d\n" % v)

        v = ctx.cache(["conn", r.attributes["key"]], fill, for_version=True, close=close)
        return Observation(True, {"fill": v})


serve({"test::Sleep": Sleep(), "test::Boom": Boom(), "test::Log": Log(), "test::Throttle": Throttle(),
       "test::Cached": Cached(), "test::Noop": Noop(), "test::Big": Big()}, name="testplugin", version="0")
