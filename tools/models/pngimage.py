"""Writes an RGB image (a numpy uint8 array, height x width x 3) as a PNG,
with zlib alone (no imaging library)."""
import struct
import zlib


def write_png(path, img):
    height, width = img.shape[0], img.shape[1]
    raw = b"".join(b"\0" + img[r].tobytes() for r in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 9)))
        f.write(chunk(b"IEND", b""))
