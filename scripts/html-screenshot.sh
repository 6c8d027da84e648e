#!/usr/bin/env bash
# Renders an HTML page in headless Chromium and checks that the screenshot is not blank.
#
# usage: scripts/html-screenshot.sh PAGE.html [SCREENSHOT.png]
# Chromium is Debian's chromium, which scripts/bootstrap.sh installs. Exit status: 0 the page rendered with
# content, 1 the screenshot is blank or missing, 2 usage, 3 Chromium is not installed.
set -euo pipefail

page=${1:?usage: html-screenshot.sh PAGE.html [SCREENSHOT.png]}

browser=$(command -v chromium || true)
if [ -z "$browser" ]; then
    echo "html-screenshot: chromium is not installed (the Debian package chromium; scripts/bootstrap.sh installs it)" >&2
    exit 3
fi

shot=${2:-${page%.html}.png}
[ -f "$page" ] || { echo "html-screenshot: no such file: $page" >&2; exit 2; }
page=$(cd "$(dirname "$page")" && pwd)/$(basename "$page")

rm -f "$shot"
# --no-sandbox: tests run as root in containers, where Chromium's sandbox cannot start. A private profile
# directory keeps runs independent; the page needs no network (it is self-contained).
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
timeout 60 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
    --screenshot="$shot" --window-size=1200,900 "file://$page" >/dev/null 2>&1 || true
[ -s "$shot" ] || { echo "html-screenshot: chromium wrote no screenshot" >&2; exit 1; }

# Pure Python (zlib, no PIL): decode the PNG, count non-white pixels and distinct colours.
python3 - "$shot" <<'PY'
import struct, sys, zlib

data = open(sys.argv[1], "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit("html-screenshot: not a PNG")
pos, idat, header = 8, b"", None
while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        header = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    pos += 12 + length
width, height, depth, colour_type, _, _, interlace = header
channels = {2: 3, 6: 4, 0: 1, 4: 2}.get(colour_type)
if depth != 8 or channels is None or interlace:
    sys.exit(f"html-screenshot: unsupported PNG (depth {depth}, colour type {colour_type}, interlace {interlace})")
raw = zlib.decompress(idat)
stride = width * channels
previous = bytearray(stride)
colours, non_white = set(), 0
for y in range(height):
    start = y * (stride + 1)
    kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
    for i in range(stride):
        a = line[i - channels] if i >= channels else 0
        b = previous[i]
        c = previous[i - channels] if i >= channels else 0
        if kind == 1: line[i] = (line[i] + a) & 255
        elif kind == 2: line[i] = (line[i] + b) & 255
        elif kind == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif kind == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    previous = line
    if y % 2:  # every other row is plenty to tell a page from a blank one, at half the cost
        continue
    for x in range(0, stride, channels):
        pixel = bytes(line[x:x + min(channels, 3)])
        colours.add(pixel)
        if pixel != b"\xff" * len(pixel):
            non_white += 1
share = non_white / (width * ((height + 1) // 2))
print(f"html-screenshot: {width}x{height}, {len(colours)} colours, {share:.1%} non-white")
if len(colours) < 8 or share < 0.02:
    sys.exit("html-screenshot: the screenshot looks blank")
PY
