#!/usr/bin/env python3
"""What an APK declares, one fact a line, for scripts/apk-check.sh to compare
with android-probe-app/apk/expected/NAME.facts.

  apk-facts.py AAPT2 APK

Reads `aapt2 dump badging` (package, version, SDK levels, permissions asked)
and `aapt2 dump xmltree` of the binary manifest (components with the class
names a phone loads, their exported/enabled flags, permissions and
authorities, the instrumentation and its target), and `apksigner verify
--print-certs` (the signer's certificate digest). Exits 2 naming what it
cannot read.
"""
import re
import subprocess
import sys

ANDROID = "http://schemas.android.com/apk/res/android:"
COMPONENTS = ("activity", "activity-alias", "service", "receiver", "provider", "instrumentation")
# The attributes of a component whose change would change what a phone does.
KEPT = ("exported", "enabled", "permission", "readPermission", "writePermission", "authorities",
        "process", "targetPackage", "protectionLevel")


def run(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("apk-facts: %s failed: %s" % (" ".join(cmd), p.stderr.strip()[-500:]))
    return p.stdout


def badging(aapt2, apk):
    out = run(aapt2, "dump", "badging", apk)
    facts = []
    m = re.search(r"^package: name='([^']*)' versionCode='([^']*)' versionName='([^']*)'", out, re.M)
    if not m:
        sys.exit("apk-facts: no package line in the badging of " + apk)
    facts += ["package " + m.group(1), "versionCode " + m.group(2), "versionName " + m.group(3)]
    for key, name in (("minSdkVersion", "minSdk"), ("targetSdkVersion", "targetSdk")):
        m = re.search(r"^%s:'([^']*)'" % key, out, re.M)
        facts.append("%s %s" % (name, m.group(1) if m else "(none)"))
    facts += ["uses-permission " + p for p in re.findall(r"^uses-permission: name='([^']*)'", out, re.M)]
    return facts


def value(raw):
    # A string: "x" (Raw: "x"); a boolean or integer: false / 1; a reference: @0x...
    m = re.match(r'"((?:[^"\\]|\\.)*)"', raw)
    return m.group(1) if m else raw.split(" ")[0]


def xmltree(aapt2, apk):
    out = run(aapt2, "dump", "xmltree", "--file", "AndroidManifest.xml", apk)
    facts = []
    current = None  # (depth, kind, attributes) of the element being read

    def flush():
        if current is None:
            return
        _, kind, attrs = current
        if kind in COMPONENTS or kind == "permission":
            extra = ["%s=%s" % (k, attrs[k]) for k in KEPT if k in attrs]
            facts.append(" ".join([kind, attrs.get("name", "(no name)")] + extra))

    for line in out.splitlines():
        depth = len(line) - len(line.lstrip(" "))
        text = line.strip()
        if text.startswith("E: "):
            flush()
            current = (depth, text[3:].split(" ")[0], {})
        elif text.startswith("A: ") and current is not None:
            m = re.match(r"A: (?:%s)?([\w-]+)(?:\(0x[0-9a-f]+\))?=(.*)$" % re.escape(ANDROID), text)
            if m:
                current[2][m.group(1)] = value(m.group(2))
    flush()
    return facts


def signer(apk):
    out = run("apksigner", "verify", "--print-certs", apk)
    digests = re.findall(r"certificate SHA-256 digest: ([0-9a-f]{64})", out)
    if len(digests) != 1:
        sys.exit("apk-facts: expected one signer of %s, found %d" % (apk, len(digests)))
    return ["signer-sha256 " + digests[0]]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: apk-facts.py AAPT2 APK")
    aapt2, apk = sys.argv[1:]
    for fact in badging(aapt2, apk) + xmltree(aapt2, apk) + signer(apk):
        print(fact)


if __name__ == "__main__":
    main()
