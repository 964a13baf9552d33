#!/usr/bin/env python3
"""An APK's binary manifest as the manifest source the JVM device reads
(scripts/jvm-device.sh --provider-apk): `aapt2 dump xmltree --file
AndroidManifest.xml` turned back into XML. Strings are written as they are;
integers and booleans as their text, which the device types as aapt2 does
(meta-data "2" is an Integer again); resource references stay @0x… (the
device does not read them).

  apk-manifest.py AAPT2 APK OUT.xml
"""
import re
import subprocess
import sys
from xml.sax.saxutils import quoteattr

ANDROID = "http://schemas.android.com/apk/res/android:"


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: apk-manifest.py AAPT2 APK OUT.xml")
    aapt2, apk, out = sys.argv[1:]
    p = subprocess.run([aapt2, "dump", "xmltree", "--file", "AndroidManifest.xml", apk],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("apk-manifest: aapt2 could not read the manifest of %s: %s" % (apk, p.stderr.strip()[-300:]))
    lines = ['<?xml version="1.0" encoding="utf-8"?>']
    stack = []  # (depth, element name, index of its opening line)

    def close_to(depth):
        while stack and stack[-1][0] >= depth:
            d, name, at = stack.pop()
            if lines[at].endswith(">") and at == len(lines) - 1:
                lines[at] = lines[at][:-1] + " />"
            else:
                lines.append("  " * len(stack) + "</%s>" % name)

    for raw in p.stdout.splitlines():
        depth = len(raw) - len(raw.lstrip(" "))
        text = raw.strip()
        if text.startswith("E: "):
            close_to(depth)
            name = text[3:].split(" ")[0]
            extra = ' xmlns:android="http://schemas.android.com/apk/res/android"' if not stack else ""
            lines.append("  " * len(stack) + "<%s%s>" % (name, extra))
            stack.append((depth, name, len(lines) - 1))
        elif text.startswith("A: ") and stack:
            m = re.match(r"A: (%s)?([\w-]+)(?:\(0x[0-9a-f]+\))?=(.*)$" % re.escape(ANDROID), text)
            if not m:
                continue
            prefix = "android:" if m.group(1) else ""
            v = m.group(3)
            s = re.match(r'"((?:[^"\\]|\\.)*)"', v)
            value = s.group(1).replace('\\"', '"').replace("\\\\", "\\") if s else v.split(" ")[0]
            at = stack[-1][2]
            lines[at] = lines[at][:-1] + " %s%s=%s>" % (prefix, m.group(2), quoteattr(value))
    close_to(0)
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
