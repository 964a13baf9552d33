#!/usr/bin/env python3
"""A sample Provider's manifest as the Android Gradle plugin's merger hands
it to aapt2: ${applicationId} filled in and every component's android:name
a full class name (".Foo" -> PACKAGE.Foo), as the probe's manifest gets from
android-probe-app/jvm/gen-sources.py --apk.

  sample-manifest.py SRC_MANIFEST PACKAGE OUT_MANIFEST
"""
import re
import sys
import xml.etree.ElementTree as ET


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: sample-manifest.py SRC_MANIFEST PACKAGE OUT_MANIFEST")
    src, package, dst = sys.argv[1:]
    with open(src, encoding="utf-8") as f:
        manifest = f.read().replace("${applicationId}", package)
    if "${" in manifest:
        sys.exit("sample-manifest: %s has a placeholder the build does not set: %s"
                 % (src, re.findall(r"\$\{[^}]*\}", manifest)))

    def expand(m):
        name = m.group(2)
        if name.startswith("."):
            name = package + name
        elif "." not in name:
            name = package + "." + name
        return m.group(1) + name + '"'

    components = r'(<(?:activity|service|provider|receiver|instrumentation|application)\b[^>]*?\bandroid:name=")([^"]+)"'
    manifest = re.sub(components, expand, manifest)
    ET.fromstring(manifest)
    with open(dst, "w", encoding="utf-8") as f:
        f.write(manifest)


if __name__ == "__main__":
    main()
