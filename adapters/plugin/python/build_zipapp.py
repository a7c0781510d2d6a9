"""Build a Python adapter plugin into one zipapp file.

    /usr/bin/python3 adapters/plugin/python/build_zipapp.py -o bin/plugins/ini.pyz \
        adapters/plugin/python/examples/ini

The archive holds the adapter's *.py files (its directory, which has a
__main__.py) and the intend_plugin package (with its generated stubs),
behind a "#!/usr/bin/python3" line: the layout `python3 -m zipapp`
makes, but written here so that the same sources always give the same
bytes (entries sorted, fixed times and modes), since an artifact is
known by its SHA-256.
"""

import argparse
import os
import sys
import zipfile

SDK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "intend_plugin")
INTERPRETER = "/usr/bin/python3"


def files(adapter):
    out = {}
    for name in os.listdir(adapter):
        if name.endswith(".py"):
            out[name] = os.path.join(adapter, name)
    if "__main__.py" not in out:
        sys.exit("build_zipapp: %s has no __main__.py" % adapter)
    for name in os.listdir(SDK):
        if name.endswith(".py"):
            out["intend_plugin/" + name] = os.path.join(SDK, name)
    return out


def build(adapter, output):
    entries = files(adapter)
    tmp = output + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"#!" + INTERPRETER.encode() + b"\n")
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for arc in sorted(entries):
                info = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                with open(entries[arc], "rb") as src:
                    z.writestr(info, src.read())
    os.chmod(tmp, 0o755)
    os.replace(tmp, output)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("adapter", help="the adapter's directory (with its __main__.py)")
    a = ap.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
    build(a.adapter, a.output)


if __name__ == "__main__":
    main()
