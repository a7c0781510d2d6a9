"""What an adapter author writes against: Handler, Resource, Observation
and the per-call Context."""

import json
import threading
import time

LEVELS = {"DEBUG": "DEBUG", "INFO": "INFO", "WARN": "WARN", "WARNING": "WARN", "ERROR": "ERROR"}


class Resource:
    """The desired state of one resource: its id ("ini::Option[web1,…]"),
    its attributes (secret references already resolved by the executor)
    and whether it is purged."""

    __slots__ = ("id", "attributes", "purged")

    def __init__(self, id, attributes, purged=False):
        self.id = id
        self.attributes = attributes
        self.purged = purged

    def __repr__(self):
        return "Resource(%r, purged=%r)" % (self.id, self.purged)


class Observation:
    """What observe found on the target: whether the resource exists and
    the observed value of every attribute the adapter manages (attributes
    it does not name are not compared)."""

    __slots__ = ("exists", "attributes")

    def __init__(self, exists, attributes=None):
        self.exists = bool(exists)
        self.attributes = dict(attributes or {})

    def __repr__(self):
        return "Observation(exists=%r, attributes=%r)" % (self.exists, self.attributes)


class Handler:
    """One resource type. Subclass it and override observe, create,
    update and delete; override validate, facts, reload or diff to get
    those capabilities (the plugin announces the methods a subclass
    overrides). Methods run concurrently, one thread per call: share
    nothing mutable without a lock."""

    # The attribute whose value identifies a resource on its agent, as
    # the model's id names it (informational).
    id_attribute = ""
    # Attributes whose values are never recorded (size and SHA-256 only).
    sensitive_attributes = ()
    # Attributes whose recorded changes are sensitive outputs.
    sensitive_diff_attributes = ()

    def observe(self, ctx, resource):
        """Return an Observation of the target."""
        raise NotImplementedError("observe")

    def create(self, ctx, resource):
        raise NotImplementedError("create")

    def update(self, ctx, resource, diff):
        """diff maps each changed attribute to {"from": observed, "to": desired}."""
        raise NotImplementedError("update")

    def delete(self, ctx, resource):
        raise NotImplementedError("delete")

    def validate(self, ctx, resource):
        """Optional: refuse bad attributes with a PermanentError naming
        the attribute, before anything else (dry-runs too)."""

    def facts(self, ctx, resource):
        """Optional: report facts with ctx.set_fact after a successful
        attempt. Must not change the target."""

    def reload(self, ctx, resource):
        """Optional: react to a change of a resource this one requires."""

    def diff(self, resource, observation):
        """Optional: compute the diff yourself, {"attr" or "attr/part":
        {"from": …, "to": …}}; an empty dict is up to date. Must not
        change the target."""
        return {}


CAPABILITIES = ("validate", "facts", "reload", "diff")


def capabilities(handler):
    """The optional methods handler's class overrides."""
    return [c for c in CAPABILITIES if getattr(type(handler), c) is not getattr(Handler, c)]


class sensitive:
    """Wrap a log attribute's value to mark it a sensitive output (what
    the target said that may hold a secret: a command's output, a file's
    content): ctx.info("ran", stdout=sensitive(out)). Only authors and
    admins of the environment see its value in the action log."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class Context:
    """One call's context: its log lines and facts go back with the reply.

    cancelled() turns true when the host cancels the call or its deadline
    passes; Python cannot interrupt a thread, so a long call should check
    it (or pass ctx.remaining() as a timeout to what it waits on)."""

    def __init__(self, resource_id="", scope=("", 0), event=False, deadline=None, cache=None):
        self.resource_id = resource_id
        self.scope = scope  # (environment, version)
        self.event = event
        self.deadline = deadline  # time.time() seconds, or None
        self._cache = cache
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._logs = []  # (time_ns, level, msg, attrs, sensitive names)
        self._facts = {}
        self._changed = None
        self._held = []

    # Logging -----------------------------------------------------------

    def log(self, level, msg, **attrs):
        """Log a line into the resource's action log. level is "DEBUG",
        "INFO", "WARN" (or "WARNING") or "ERROR"; attrs are JSON values
        (others are logged as their str); wrap a value in sensitive() to
        mark it a sensitive output."""
        lvl = LEVELS.get(str(level).upper())
        if lvl is None:
            raise ValueError("unknown log level %r" % (level,))
        plain, marked = {}, []
        for k, v in attrs.items():
            if isinstance(v, sensitive):
                plain[k] = v.value
                marked.append(k)
            else:
                plain[k] = v
        with self._lock:
            self._logs.append((time.time_ns(), lvl, str(msg), plain, sorted(marked)))

    def debug(self, msg, **attrs):
        self.log("DEBUG", msg, **attrs)

    def info(self, msg, **attrs):
        self.log("INFO", msg, **attrs)

    def warning(self, msg, **attrs):
        self.log("WARN", msg, **attrs)

    warn = warning

    def error(self, msg, **attrs):
        self.log("ERROR", msg, **attrs)

    def logs(self):
        with self._lock:
            return list(self._logs)

    # Facts and outcome ----------------------------------------------------

    def set_fact(self, name, value):
        """Record a fact discovered on the target (the last value per name
        wins). A value that is not JSON is dropped with a warning."""
        if not name:
            self.warning("fact without a name ignored")
            return
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as err:
            self.warning("fact dropped: its value is not JSON", fact=name, error=str(err))
            return
        with self._lock:
            self._facts[name] = value

    def facts(self):
        with self._lock:
            return dict(self._facts)

    def changed(self, value=True):
        """Say whether create, update or delete changed the target (by
        default the engine decides, as for a built-in adapter)."""
        self._changed = bool(value)

    # Cancellation and deadline -------------------------------------------

    def cancelled(self):
        """True when the host cancelled the call or its deadline passed."""
        if self._cancel.is_set():
            return True
        return self.deadline is not None and time.time() >= self.deadline

    def remaining(self):
        """Seconds left before the deadline (None: no deadline; 0 once
        cancelled)."""
        if self._cancel.is_set():
            return 0.0
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.time())

    def cancel(self):
        self._cancel.set()

    # Cache ---------------------------------------------------------------

    def cache(self, key, fill, for_version=False, ttl=None, close=None):
        """Return the value cached under key (any JSON-able value: a host
        and a port), calling fill() to make it when absent. It lives ttl
        seconds (default 600) and, with for_version, also ends with the
        deploy of this call's version; close(value) runs when it has
        ended and no call holds it. The call holds the value until it
        returns."""
        if self._cache is None:
            return fill()
        value, release = self._cache.get(key, fill, self.scope, ttl=ttl, for_version=for_version, close=close)
        with self._lock:
            self._held.append(release)
        return value

    def close(self):
        with self._lock:
            held, self._held = self._held, []
        for release in held:
            release()
