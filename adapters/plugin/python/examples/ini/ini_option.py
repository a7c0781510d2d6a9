"""ini::Option: one option of an INI file, an intend adapter plugin
written in Python (the resource type's model is ini.cue, in the module that
ships it: examples/python-plugin/module).

The file is read and written with configparser, so what configparser
does not keep is not kept when intend rewrites the file: comments and
blank lines are dropped, "key=value" is written "key = value", and
continuation lines are re-indented. Sections and options other than the
managed one are kept, in order, with their keys' case. Interpolation is
off (a value holding "%" is written as it is) and [DEFAULT] is an
ordinary section (its options are not inherited by the others). The
file is replaced atomically (a temporary file in the same directory,
with the file's mode, owner and group, renamed over it); a new file gets
mode 0644. Its log lines name the interpreter that runs it
(python=sys.executable): the executor's /usr/bin/python3, whatever
python3 comes first on the executor's PATH.
"""

import configparser
import os
import stat
import sys
import tempfile
import threading

from intend_plugin import Handler, Observation, PermanentError, serve

NO_DEFAULT = "\x00no default section"  # [DEFAULT] is an ordinary section

_locks_lock = threading.Lock()
_locks = {}


def _lock(path):
    """Calls on options of one file take turns (read, change, rename)."""
    with _locks_lock:
        return _locks.setdefault(path, threading.Lock())


def _parser():
    p = configparser.ConfigParser(interpolation=None, default_section=NO_DEFAULT, strict=True)
    p.optionxform = str  # keep the keys' case
    return p


def _read(path):
    """The parsed file, or None when there is none."""
    p = _parser()
    try:
        with open(path, encoding="utf-8") as f:
            p.read_file(f, source=path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except configparser.Error as err:
        raise PermanentError("path: %s is not an INI file configparser reads: %s" % (path, err)) from None
    except UnicodeDecodeError as err:
        raise PermanentError("path: %s is not UTF-8: %s" % (path, err)) from None
    except PermissionError as err:
        raise PermanentError("path: %s" % err) from None
    return p


def _write(path, parser):
    """Replace the file at path atomically with parser's content, keeping
    its mode, owner and group."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise PermanentError("path: %s is not a regular file; intend does not replace it" % path)
    d = os.path.dirname(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".")
    except FileNotFoundError:
        raise PermanentError("path: the directory %s does not exist" % d) from None
    except PermissionError as err:
        raise PermanentError("path: %s" % err) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode) if st else 0o644)
            if st is not None and (st.st_uid != os.geteuid() or st.st_gid != os.getegid()):
                try:
                    os.fchown(f.fileno(), st.st_uid, st.st_gid)
                except PermissionError:
                    raise PermanentError("path: %s belongs to %d:%d, which this plugin cannot give its rewrite"
                                         % (path, st.st_uid, st.st_gid)) from None
            parser.write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _options(parser, section):
    return len(parser.options(section)) if parser is not None and parser.has_section(section) else 0


class IniOption(Handler):
    id_attribute = "option"

    def validate(self, ctx, r):
        a = r.attributes
        for name in ("path", "section", "key", "value"):
            if r.purged and name == "value":
                continue
            v = a.get(name)
            if not isinstance(v, str):
                raise PermanentError("%s: must be a string, not %s" % (name, type(v).__name__))
            if "\n" in v or "\r" in v:
                raise PermanentError("%s: must not contain a newline" % name)
        if not os.path.isabs(a["path"]) or os.path.normpath(a["path"]) != a["path"]:
            raise PermanentError("path: must be absolute and clean, not %r" % a["path"])
        if not a["section"] or "[" in a["section"] or "]" in a["section"]:
            raise PermanentError("section: must be non-empty and hold no bracket")
        k = a["key"]
        if not k or k != k.strip() or any(c in k for c in "=:[]") or k[0] in "#;":
            raise PermanentError("key: must be non-empty, without '=', ':', brackets, surrounding blanks "
                                 "or a leading '#' or ';'")
        v = a.get("value")
        if isinstance(v, str) and v != v.strip():
            raise PermanentError("value: must not begin or end with blanks (configparser strips them)")

    def observe(self, ctx, r):
        a = r.attributes
        p = _read(a["path"])
        if p is None or not p.has_section(a["section"]) or not p.has_option(a["section"], a["key"]):
            return Observation(False)
        value = p.get(a["section"], a["key"])
        return Observation(True, {"path": a["path"], "section": a["section"], "key": a["key"],
                                  "value": "" if value is None else value})

    def _set(self, ctx, r):
        a = r.attributes
        with _lock(a["path"]):
            p = _read(a["path"]) or _parser()
            if not p.has_section(a["section"]):
                p.add_section(a["section"])
            p.set(a["section"], a["key"], a["value"])
            _write(a["path"], p)
        ctx.info("set", path=a["path"], section=a["section"], key=a["key"], python=sys.executable)

    def create(self, ctx, r):
        self._set(ctx, r)

    def update(self, ctx, r, diff):
        self._set(ctx, r)

    def delete(self, ctx, r):
        a = r.attributes
        with _lock(a["path"]):
            p = _read(a["path"])
            if p is None or not p.has_section(a["section"]) or not p.remove_option(a["section"], a["key"]):
                ctx.changed(False)
                return
            _write(a["path"], p)
        ctx.info("removed", path=a["path"], section=a["section"], key=a["key"], python=sys.executable)

    def facts(self, ctx, r):
        a = r.attributes
        ctx.set_fact("section_options", _options(_read(a["path"]), a["section"]))


def main():
    serve({"ini::Option": IniOption()}, name="ini", version="1")


if __name__ == "__main__":
    main()
