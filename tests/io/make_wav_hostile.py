#!/usr/bin/env python3
"""Writes the hostile WAV files of tests/hostile/wav/, each FILE with FILE.expect (see
tests/hostile/README.md); tests/io/test_hostile_files.cpp (Hostile.WavFiles) reads each with
wav::read and checks the error. Deterministic: run it again after changing it.

  /usr/bin/python3 tests/io/make_wav_hostile.py tests/hostile/wav
"""
import os
import struct
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
GUID_TAIL = bytes([0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71])


def chunk(cid, body, declared=None):
    return cid + struct.pack("<I", len(body) if declared is None else declared) + body


def fmt(tag=1, channels=1, rate=8000, bits=16, block=None):
    block = channels * bits // 8 if block is None else block
    return struct.pack("<HHIIHH", tag, channels, rate, (rate * block) & 0xFFFFFFFF, block & 0xFFFF, bits)


def riff(chunks, declared=None):
    return b"RIFF" + struct.pack("<I", 4 + len(chunks) if declared is None else declared) + b"WAVE" + chunks


def hostile(name, data, expect, *contains):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    with open(os.path.join(out, name + ".expect"), "w") as f:
        f.write(("loads" if expect == "loads" else "error " + expect) + "\n")
        for c in contains:
            f.write(c + "\n")


samples = chunk(b"data", bytes(8))
# Sizes the file cannot hold: the reader compares each with what remains before reading.
hostile("truncated_fmt.wav", riff(chunk(b"fmt ", fmt(), 16)[:16]), "IOError",
        "chunk 'fmt ' at offset 12 declares 16 bytes but only 8 remain (the file is truncated)")
hostile("huge_chunk_before_data.wav", riff(chunk(b"fmt ", fmt()) + chunk(b"LIST", b"abcd", 0xFFFFFFFF)), "IOError",
        "chunk 'LIST' at offset 36 declares 4294967295 bytes but only 4 remain")
# A data chunk declaring 4 GB with 8 bytes present: the 4 frames that are there (libsndfile's
# reading), allocated from the file's length, not the declared one.
hostile("huge_data_declared.wav", riff(chunk(b"fmt ", fmt()) + chunk(b"data", bytes(8), 0xFFFFFFF0), 0xFFFFFFFF),
        "loads")
hostile("riff_header_cut.wav", b"RIFF\x10\x00", "IOError", "6 bytes, fewer than a RIFF header's 12")
hostile("fmt_too_short.wav", riff(chunk(b"fmt ", fmt()[:12]) + samples), "IOError",
        "the fmt chunk has 12 bytes (it needs at least 16)")
# fmt fields that make no sense.
hostile("zero_channels.wav", riff(chunk(b"fmt ", fmt(channels=0)) + samples), "IOError",
        "the fmt chunk declares 0 channels")
hostile("zero_sample_rate.wav", riff(chunk(b"fmt ", fmt(rate=0)) + samples), "IOError",
        "the fmt chunk declares a sample rate of 0")
hostile("odd_block_align.wav", riff(chunk(b"fmt ", fmt(channels=2, block=3)) + samples), "IOError",
        "block_align 3 does not match 2 channels * 16 bits / 8 = 4")
hostile("block_align_overflow.wav", riff(chunk(b"fmt ", fmt(tag=3, channels=65535, bits=64)) + samples),
        "IOError", "block_align 65528 does not match 65535 channels * 64 bits / 8 = 524280")
hostile("bits_12.wav", riff(chunk(b"fmt ", fmt(bits=12, block=2)) + samples), "IOError",
        "PCM with 12 bits per sample")
hostile("alaw.wav", riff(chunk(b"fmt ", fmt(tag=6, bits=8)) + samples), "IOError", "format tag 6 (A-law)")
ext = fmt(tag=0xFFFE) + struct.pack("<HHI", 22, 16, 4) + struct.pack("<H", 1) + bytes(14)
hostile("extensible_bad_guid.wav", riff(chunk(b"fmt ", ext) + samples), "IOError",
        "WAVE_FORMAT_EXTENSIBLE sub-format GUID 01000000000000000000000000000000 is neither PCM nor IEEE float")
hostile("extensible_short.wav", riff(chunk(b"fmt ", fmt(tag=0xFFFE) + struct.pack("<H", 0)) + samples), "IOError",
        "the WAVE_FORMAT_EXTENSIBLE fmt chunk has 18 bytes")
# Missing chunks.
hostile("no_fmt.wav", riff(samples), "IOError", "it has no fmt chunk")
hostile("no_data.wav", riff(chunk(b"fmt ", fmt()) + chunk(b"LIST", b"x") + b"\x00"), "IOError",
        "it has no data chunk")
hostile("two_fmt.wav", riff(chunk(b"fmt ", fmt()) + chunk(b"fmt ", fmt()) + samples), "IOError",
        "a second fmt chunk at offset 36")
hostile("not_wave.wav", b"RIFF\x04\x00\x00\x00AVI ", "IOError", "the RIFF form type is 'AVI ', not 'WAVE'")
# Valid, if unusual: an odd-sized chunk with its pad byte, the RIFF size wrong, fmt after data.
ok = riff(chunk(b"junk", b"abc") + b"\x00" + chunk(b"data", bytes(4)) + chunk(b"fmt ", fmt()), 7)
hostile("odd_chunk_fmt_after_data.wav", ok, "loads")
# fuzz_wav: read, but refused by the writer (its bytes-per-second overflowed 32 bits).
hostile("sample_rate_872423232.wav", riff(chunk(b"fmt ", fmt(rate=872423232)) + chunk(b"data", bytes(8), 0x7FFF0)),
        "loads")
hostile("extensible_float_6ch.wav",
        riff(chunk(b"fmt ", fmt(tag=0xFFFE, channels=6, bits=32) + struct.pack("<HHIH", 22, 32, 0x3F, 3) + GUID_TAIL)
             + chunk(b"data", struct.pack("<6f", 0.5, -0.5, 0.25, 0, 1, -1))), "loads")
