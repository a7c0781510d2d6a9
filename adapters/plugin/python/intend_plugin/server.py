"""The plugin's side of the protocol (adapters/plugin/adapterv1/adapter.proto)
and go-plugin's handshake."""

import json
import logging
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from concurrent import futures

import grpc

from . import adapter_pb2 as pb
from . import health_pb2
from .cache import Cache
from .errors import AdapterError
from .handler import Context, Handler, Observation, Resource, capabilities

PROTOCOL_VERSION = 1
MAGIC_COOKIE_KEY = "INTEND_PLUGIN_MAGIC_COOKIE"
MAGIC_COOKIE_VALUE = "intend-adapter-plugin-v1"
# The replies that are ready go together in one message of at most
# MAX_MESSAGE_BYTES (a larger reply alone): gRPC refuses a message above
# the receiver's limit (4 MiB by default), which the observations of a
# batch of large resources would pass together. As the Go SDK does.
MAX_MESSAGE_BYTES = 1 << 20

log = logging.getLogger("intend_plugin")

_END = object()


def _error(klass, message, retry_after=None):
    e = pb.Error(**{"class": klass, "message": message})
    if retry_after:
        e.retry_after_ms = int(retry_after * 1000)
    return e


def _json(attrs):
    """A log line's attributes as JSON: a value JSON cannot hold is logged
    as its str (NaN and infinities too, which JSON has not)."""
    try:
        return json.dumps(attrs, separators=(",", ":"), default=str, allow_nan=False).encode()
    except ValueError:
        return json.dumps({k: v if _plain(v) else str(v) for k, v in attrs.items()},
                          separators=(",", ":"), default=str).encode()


def _plain(v):
    try:
        json.dumps(v, default=str, allow_nan=False)
        return True
    except ValueError:
        return False


class Service:
    """Describe, Session and Expire over the handlers of types."""

    def __init__(self, types, name="", version="", max_workers=32):
        for t, h in types.items():
            if not isinstance(h, Handler):
                raise TypeError("the handler of %s is a %s, not an intend_plugin.Handler" % (t, type(h).__name__))
        self.types = dict(types)
        self.name = name
        self.version = version
        self.cache = Cache()
        self.pool = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="call")

    def describe(self, request, context):
        resp = pb.DescribeResponse(protocol_version=PROTOCOL_VERSION, name=self.name, version=self.version)
        for t in sorted(self.types):
            h = self.types[t]
            resp.types.add(name=t, id_attribute=h.id_attribute, capabilities=capabilities(h),
                           sensitive_attributes=list(h.sensitive_attributes),
                           sensitive_diff_attributes=list(h.sensitive_diff_attributes))
        return resp

    def expire(self, request, context):
        self.cache.expire({(s.environment, s.version) for s in request.open})
        return pb.ExpireResponse()

    def session(self, requests, context):
        """Calls in, replies out: a reader thread takes the host's
        messages and hands each call to the pool; the response stream
        sends the replies that are ready, several to a message."""
        out = queue.SimpleQueue()
        lock = threading.Lock()
        inflight = {}  # call id -> Context
        state = {"reading": True}

        def finished(call_id, reply):
            out.put(reply)
            with lock:
                inflight.pop(call_id, None)
                if not state["reading"] and not inflight:
                    out.put(_END)

        def reader():
            try:
                for msg in requests:
                    for cid in msg.cancel:
                        with lock:
                            ctx = inflight.get(cid)
                        if ctx is not None:
                            ctx.cancel()
                    for call in msg.calls:
                        ctx = self._context(call)
                        with lock:
                            inflight[call.id] = ctx
                        self.pool.submit(self._run, call, ctx, finished)
            except grpc.RpcError:
                pass  # the stream ended under us; on_done cancels the calls
            except Exception:
                log.error("session reader failed:\n%s", traceback.format_exc())
                context.abort(grpc.StatusCode.INTERNAL, "plugin session reader failed")
            with lock:
                state["reading"] = False
                if not inflight:
                    out.put(_END)

        def on_done():
            with lock:
                ctxs = list(inflight.values())
            for ctx in ctxs:
                ctx.cancel()
            out.put(_END)

        context.add_callback(on_done)
        threading.Thread(target=reader, name="session-reader", daemon=True).start()
        nxt = None  # taken from out, for the next message
        while True:
            item = out.get() if nxt is None else nxt
            nxt = None
            if item is _END:
                return
            replies, size = [item], item.ByteSize()
            while size < MAX_MESSAGE_BYTES:
                try:
                    item = out.get_nowait()
                except queue.Empty:
                    break
                if item is _END:
                    nxt = item
                    break
                n = item.ByteSize()
                if size + n > MAX_MESSAGE_BYTES:
                    nxt = item
                    break
                replies.append(item)
                size += n
            yield pb.PluginMessage(replies=replies)

    def _context(self, call):
        deadline = call.deadline_unix_nano / 1e9 if call.deadline_unix_nano else None
        scope = (call.scope.environment, call.scope.version)
        return Context(resource_id=call.resource.id, scope=scope, event=call.event, deadline=deadline,
                       cache=self.cache)

    def _run(self, call, ctx, finished):
        reply = pb.Reply(id=call.id)
        try:
            if ctx.cancelled():
                raise _Cancelled()
            self._dispatch(call, ctx, reply)
        except _Cancelled:
            reply.error.CopyFrom(_error(pb.CLASS_TRANSIENT, "call cancelled before it started"))
        except AdapterError as err:
            reply.error.CopyFrom(_error(err.klass, str(err), err.retry_after))
        except BaseException as err:  # never the plugin's death
            log.error("%s of %s raised:\n%s", pb.Op.Name(call.op), call.resource.id, traceback.format_exc())
            msg = "%s: %s" % (type(err).__name__, err) if str(err) else type(err).__name__
            reply.error.CopyFrom(_error(pb.CLASS_PERMANENT, msg))
        finally:
            ctx.close()
        try:
            for t, level, msg, attrs, marked in ctx.logs():
                line = reply.logs.add(time_unix_nano=t, level=level, msg=msg, sensitive_outputs=marked)
                if attrs:
                    line.attrs_json = _json(attrs)
            facts = ctx.facts()
            if facts:
                reply.facts_json = _strict_json(facts, "facts")
            if ctx._changed is not None and call.op in (pb.OP_CREATE, pb.OP_UPDATE, pb.OP_DELETE):
                reply.changed = ctx._changed
        except Exception as err:
            reply = pb.Reply(id=call.id, error=_error(pb.CLASS_PERMANENT, "encoding the reply: %s: %s" % (type(err).__name__, err)))
        finished(call.id, reply)

    def _dispatch(self, call, ctx, reply):
        h = self.types.get(_type_of(call.resource.id))
        if h is None:
            raise _permanent("plugin serves no type of resource %s" % call.resource.id)
        attrs = json.loads(call.resource.attributes_json) if call.resource.attributes_json else {}
        r = Resource(call.resource.id, attrs, call.resource.purged)
        op = call.op
        if op == pb.OP_OBSERVE:
            obs = h.observe(ctx, r)
            if not isinstance(obs, Observation):
                raise TypeError("observe returned %s, want an intend_plugin.Observation" % type(obs).__name__)
            reply.exists = obs.exists
            reply.attributes_json = _strict_json(obs.attributes, "observed attributes")
        elif op == pb.OP_CREATE:
            h.create(ctx, r)
        elif op == pb.OP_UPDATE:
            h.update(ctx, r, json.loads(call.diff_json) if call.diff_json else {})
        elif op == pb.OP_DELETE:
            h.delete(ctx, r)
        elif op == pb.OP_VALIDATE:
            h.validate(ctx, r)
        elif op == pb.OP_FACTS:
            h.facts(ctx, r)
        elif op == pb.OP_RELOAD:
            h.reload(ctx, r)
        elif op == pb.OP_DIFF:
            o = json.loads(call.observed_json) if call.observed_json else {}
            d = h.diff(r, Observation(o.get("exists", False), o.get("attributes")))
            reply.diff_json = _strict_json(d or {}, "diff")
        else:
            raise _permanent("unknown operation %d" % op)


class _Cancelled(Exception):
    pass


def _permanent(msg):
    from .errors import PermanentError
    return PermanentError(msg)


def _strict_json(value, what):
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as err:
        raise TypeError("%s are not JSON: %s" % (what, err)) from None


def _type_of(rid):
    i = rid.find("[")
    return rid[:i] if i >= 0 else rid


def _health_check(request, context):
    if request.service in ("", "plugin"):
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
    context.abort(grpc.StatusCode.NOT_FOUND, "unknown service %r" % request.service)


def handlers(service, shutdown=None):
    """The gRPC handlers of the plugin: the Adapter service, grpc.health.v1
    Health/Check and go-plugin's GRPCController/Shutdown."""
    adapter = grpc.method_handlers_generic_handler("intend.adapter.v1.Adapter", {
        "Describe": grpc.unary_unary_rpc_method_handler(
            service.describe, request_deserializer=pb.DescribeRequest.FromString,
            response_serializer=pb.DescribeResponse.SerializeToString),
        "Session": grpc.stream_stream_rpc_method_handler(
            service.session, request_deserializer=pb.HostMessage.FromString,
            response_serializer=pb.PluginMessage.SerializeToString),
        "Expire": grpc.unary_unary_rpc_method_handler(
            service.expire, request_deserializer=pb.ExpireRequest.FromString,
            response_serializer=pb.ExpireResponse.SerializeToString),
    })
    health = grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": grpc.unary_unary_rpc_method_handler(
            _health_check, request_deserializer=health_pb2.HealthCheckRequest.FromString,
            response_serializer=health_pb2.HealthCheckResponse.SerializeToString),
    })
    out = [adapter, health]
    if shutdown is not None:
        def _shutdown(request, context):
            threading.Thread(target=shutdown, name="shutdown", daemon=True).start()
            return b""
        # go-plugin's host calls it when it kills the plugin: the plugin
        # exits at once (removing its socket) instead of being killed
        # after two seconds. Empty in, empty out: no stubs needed.
        out.append(grpc.method_handlers_generic_handler("plugin.GRPCController", {
            "Shutdown": grpc.unary_unary_rpc_method_handler(
                _shutdown, request_deserializer=bytes, response_serializer=bytes),
        }))
    return out


def serve(types, name="", version="", max_workers=32):
    """Serve the resource types of types ({"ini::Option": IniOption()})
    as an intend adapter plugin until the host stops it. Call it from
    the plugin's main; it does not return (it exits the process)."""
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("INTEND_PLUGIN_LOG_LEVEL", "INFO"),
                        format="%(levelname)s %(name)s: %(message)s")
    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        sys.stderr.write("This is an intend adapter plugin: an intend executor starts it and talks to it.\n"
                         "It is not meant to be run by hand.\n")
        sys.exit(1)
    if os.environ.get("PLUGIN_CLIENT_CERT"):
        sys.stderr.write("intend adapter plugin: the host asked for mTLS (PLUGIN_CLIENT_CERT), "
                         "which the Python SDK does not speak; its socket is private to the host's user\n")
        sys.exit(1)

    service = Service(types, name=name, version=version, max_workers=max_workers)
    sockdir = os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or ""
    private = None
    if not sockdir:
        private = sockdir = tempfile.mkdtemp(prefix="intend-plugin-")
    path = os.path.join(sockdir, "plugin%d-%s.sock" % (os.getpid(), os.urandom(4).hex()))

    stopping = threading.Event()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="grpc"),
                         handlers=handlers(service, shutdown=stopping.set),
                         options=[("grpc.max_receive_message_length", 2**31 - 1),
                                  ("grpc.max_send_message_length", 2**31 - 1)])
    old = os.umask(0o077)  # the socket is the host user's only
    try:
        server.add_insecure_port("unix:" + path)
        server.start()
    finally:
        os.umask(old)

    def cleanup():
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        if private:
            shutil.rmtree(private, ignore_errors=True)

    def on_signal(signum, frame):
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    parent = os.getppid()
    try:
        sys.stdout.write("%d|%d|unix|%s|grpc\n" % (1, PROTOCOL_VERSION, path))
        sys.stdout.flush()
        # stdout was the handshake's: an adapter's print() goes to the log.
        sys.stdout = sys.stderr
        # Wake up now and then: an orphan (its executor died without
        # stopping it) exits too.
        while not stopping.wait(1.0):
            if os.getppid() != parent:
                log.info("the host process went away: stopping")
                break
    finally:
        server.stop(grace=1.0).wait(2.0)
        service.pool.shutdown(wait=False, cancel_futures=True)
        service.cache.close()
        cleanup()
    sys.exit(0)
