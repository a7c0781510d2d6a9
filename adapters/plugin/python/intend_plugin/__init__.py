"""intend_plugin: write an intend adapter plugin in Python.

    from intend_plugin import Handler, Observation, PermanentError, serve

    class Entry(Handler):
        id_attribute = "key"
        def observe(self, ctx, resource): ...
        def create(self, ctx, resource): ...
        def update(self, ctx, resource, diff): ...
        def delete(self, ctx, resource): ...

    if __name__ == "__main__":
        serve({"kv::Entry": Entry()})

The plugin runs on Debian's /usr/bin/python3 with python3-grpcio and
python3-protobuf; docs/adapters.md, "Writing a plugin in Python", walks
through it.
"""

from .errors import (AdapterError, PermanentError, SkipResource, ThrottledError, TransientError,
                     UnavailableError)
from .handler import Context, Handler, Observation, Resource, sensitive
from .server import serve

__all__ = ["AdapterError", "Context", "Handler", "Observation", "PermanentError", "Resource",
           "SkipResource", "ThrottledError", "TransientError", "UnavailableError", "sensitive", "serve"]
