"""Unit tests of the ini::Option adapter on temporary files."""

import os
import tempfile
import unittest

from intend_plugin import PermanentError, Resource
from intend_plugin.handler import Context
from ini_option import IniOption


class IniTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "a.ini")
        self.h = IniOption()

    def tearDown(self):
        self.dir.cleanup()

    def r(self, value="v", section="S", key="Key", purged=False):
        return Resource("ini::Option[x,option=o]", {"path": self.path, "section": section, "key": key, "value": value}, purged)

    def write(self, text, mode=0o644):
        with open(self.path, "w") as f:
            f.write(text)
        os.chmod(self.path, mode)

    def read(self):
        with open(self.path) as f:
            return f.read()

    def test_absent_file(self):
        self.assertFalse(self.h.observe(Context(), self.r()).exists)

    def test_create_new_file_mode_0644(self):
        old = os.umask(0o077)
        try:
            self.h.create(Context(), self.r())
        finally:
            os.umask(old)
        self.assertEqual(self.read(), "[S]\nKey = v\n\n")
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o644)

    def test_keeps_others_drops_comments(self):
        self.write("# top\n[DEFAULT]\nd = 1\n[S]\n; c\nother=x\nKey = old\n[T]\nmulti = a\n  b\n", 0o640)
        obs = self.h.observe(Context(), self.r())
        self.assertEqual((obs.exists, obs.attributes["value"]), (True, "old"))
        self.h.update(Context(), self.r("new"), {"value": {"from": "old", "to": "new"}})
        # What configparser does not keep: comments, "key=value" spacing.
        self.assertEqual(self.read(), "[DEFAULT]\nd = 1\n\n[S]\nother = x\nKey = new\n\n[T]\nmulti = a\n\tb\n\n")
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o640)

    def test_default_is_ordinary(self):
        self.write("[DEFAULT]\nKey = d\n[S]\n")
        self.assertFalse(self.h.observe(Context(), self.r()).exists)

    def test_percent_not_interpolated(self):
        self.h.create(Context(), self.r("100%"))
        self.assertEqual(self.h.observe(Context(), self.r()).attributes["value"], "100%")

    def test_delete_and_facts(self):
        self.write("[S]\nKey = v\nb = 2\n")
        c = Context()
        self.h.facts(c, self.r())
        self.assertEqual(c.facts(), {"section_options": 2})
        self.h.delete(Context(), self.r(purged=True))
        self.assertEqual(self.read(), "[S]\nb = 2\n\n")
        c = Context()
        self.h.delete(c, self.r(purged=True))
        self.assertIs(c._changed, False)

    def test_symlink_refused(self):
        target = os.path.join(self.dir.name, "t.ini")
        with open(target, "w") as f:
            f.write("[S]\n")
        os.symlink(target, self.path)
        with self.assertRaisesRegex(PermanentError, "^path: .* not a regular file"):
            self.h.create(Context(), self.r())

    def test_not_ini(self):
        self.write("no section header\n")
        with self.assertRaisesRegex(PermanentError, "^path: "):
            self.h.observe(Context(), self.r())

    def test_validate(self):
        self.h.validate(Context(), self.r())
        self.h.validate(Context(), Resource("x", {"path": self.path, "section": "S", "key": "k"}, True))
        for attr, bad in [("value", "a\nb"), ("value", " a"), ("section", "a]"), ("section", "a[b"), ("key", "#k"), ("key", "k:"), ("key", "k[0]"),
                          ("path", "a.ini"), ("path", "/a/../b.ini"), ("value", 3)]:
            attrs = {"path": self.path, "section": "S", "key": "k", "value": "v", attr: bad}
            with self.assertRaisesRegex(PermanentError, "^%s: " % attr, msg="%s=%r" % (attr, bad)):
                self.h.validate(Context(), Resource("x", attrs))


if __name__ == "__main__":
    unittest.main()
