#!/usr/bin/env bash
# Opens index.html in headless Chromium, three times: for a synthetic run
# whose Provider strings try every way out (script and event-handler markup,
# ANSI/OSC, bidi, XML breakers, a 1 MB string, instruction-like text), for a
# live run against a broken simulated Provider, and for a live run against
# the legal variant hostile_text, a conformant Provider whose own strings
# carry all of that. Checks that no Provider markup became an element, no
# script ran (the hostile scripts would mark <body>), and the page rendered
# (its screenshot is not blank). The screenshots are kept under
# target/html-check/ as artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/html-check
rm -rf "$out"; mkdir -p "$out/live" "$out/hostile-live"
command -v chromium >/dev/null 2>&1 || { echo "html-report-check: chromium is not installed (scripts/setup.sh)" >&2; exit 1; }

cargo run -q -p cetp-report --example hostile_html -- "$out/hostile.html"
cargo run -q -p cetp-cli -- run --target sim:mutant=stack_trace_in_message --report-dir "$out/live" >/dev/null || true
# A legal variant passes: a non-zero exit is a false verdict or a harness
# failure, and either makes its page no evidence.
if ! cargo run -q -p cetp-cli -- run --target sim:variant=hostile_text --report-dir "$out/hostile-live" >"$out/hostile-live.out" 2>&1; then
  cat "$out/hostile-live.out" >&2
  echo "html-report-check: the run against sim:variant=hostile_text did not exit 0" >&2
  exit 1
fi

check() {
  local page=$1 name=$2
  local url="file://$PWD/$page"
  local flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$out/profile-$name")
  timeout 120 chromium "${flags[@]}" --virtual-time-budget=3000 --dump-dom "$url" >"$out/$name.dom" 2>"$out/$name.log"
  timeout 120 chromium "${flags[@]}" --window-size=1200,1600 --screenshot="$out/$name.png" "$url" >>"$out/$name.log" 2>&1
  python3 - "$out/$name.dom" "$out/$name.png" "$name" <<'PY'
import re, sys, zlib, struct
dom, png, name = sys.argv[1], sys.argv[2], sys.argv[3]
d = open(dom, encoding="utf-8", errors="replace").read()
assert "<body" in d, f"{name}: no DOM dumped"
body = re.search(r"<body[^>]*>", d).group(0)
assert "data-pwned" not in body, f"{name}: a Provider script ran: {body}"
# Serialized text keeps "<" as &lt;: a raw "<tag" is an element.
for tag in ("<script", "<img", "<svg onload"):
    assert tag not in d.lower(), f"{name}: Provider markup became an element: {tag}"
# The screenshot: decode the PNG (8-bit RGB/RGBA) and require some ink.
raw = open(png, "rb").read()
assert raw[:8] == b"\x89PNG\r\n\x1a\n", f"{name}: not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(raw):
    n, kind = struct.unpack(">I4s", raw[pos:pos + 8])
    chunk = raw[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, colour = struct.unpack(">IIBB", chunk[:10])
    if kind == b"IDAT":
        idat += chunk
    pos += 12 + n
px = zlib.decompress(idat)
channels = {2: 3, 6: 4}[colour]
stride = w * channels + 1
rows = [px[i * stride + 1:(i + 1) * stride] for i in range(len(px) // stride)]
# Filtered rows are not pixels, but a blank page compresses to rows of
# zeros and one value; rendered text makes many distinct bytes.
distinct = len(set(b"".join(rows[:400])))
assert distinct > 20, f"{name}: the screenshot looks blank ({distinct} distinct bytes)"
print(f"html-report-check: {name}: no Provider markup became an element, no script ran, rendered ({w}x{h}, {distinct} distinct bytes); screenshot {png}")
PY
}
check "$out/hostile.html" hostile
check "$out/live/index.html" live
check "$out/hostile-live/index.html" hostile-live
