"""The errors an adapter raises to classify a failure.

The executor decides what happens next by the class: a permanent error
fails the resource until the model changes, a transient one is retried,
a throttled one is retried after retry_after, an unavailable target
defers the agent's resources, and a skipped resource is recorded skipped
(not failed) and tried again later. Any other exception an adapter
raises is a permanent error whose message is the exception's type and
message.
"""

from . import adapter_pb2 as pb


class AdapterError(Exception):
    """Base of the classified errors; raise one of its subclasses."""

    klass = pb.CLASS_PERMANENT
    retry_after = None  # seconds, for ThrottledError and SkipResource

    def __init__(self, message, retry_after=None):
        super().__init__(message)
        if retry_after is not None:
            if retry_after < 0:
                raise ValueError("retry_after must not be negative")
            self.retry_after = float(retry_after)


class PermanentError(AdapterError):
    """The attempt cannot succeed as the resource is: a refused attribute
    (name it in the message), a target that says no for good."""

    klass = pb.CLASS_PERMANENT


class TransientError(AdapterError):
    """The attempt may succeed if retried (a timeout, a lock held)."""

    klass = pb.CLASS_TRANSIENT


class ThrottledError(AdapterError):
    """The target asked to slow down; retry_after (seconds) is how long
    it asked to wait (None: the executor's default)."""

    klass = pb.CLASS_THROTTLED


class UnavailableError(AdapterError):
    """The target cannot be reached: nothing was done."""

    klass = pb.CLASS_UNAVAILABLE


class SkipResource(AdapterError):
    """Skip the resource for now and try it again later (after
    retry_after seconds when given), as Inmanta's SkipResource: it is
    recorded skipped, not failed."""

    klass = pb.CLASS_SKIPPED
